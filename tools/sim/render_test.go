package sim

import (
	"bytes"
	"errors"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// testResult is a decoded two-step scenario with the test snapshot after
// each step; the second step failed one check.
func testResult(t *testing.T) *Result {
	t.Helper()
	sc, err := Decode([]byte(`name: demo
description: A <b>demo</b> & its groups.
cluster: {zones: 2, racks: 1, nodesPerRack: 2, gpus: 2}
steps:
- name: Create the job
  create:
    gangs: [{name: workers, size: 2, topologyKey: rack, parent: job}]
- name: Wait for the job
  wait: {for: bound, group: job, count: 3}
  expect: [{group: job, bound: 3}]
`))
	require.NoError(t, err)
	sc.Steps[0].Create.Pods = []PodSet{{Name: "balloon", Count: 16, CPU: "4", PriorityClass: "low"}}
	sc.Source = "built-in"
	order := groupOrder{}
	snap := buildSnapshot(testObservation(), map[groupRef]int{{KindPods, "balloon"}: 3}, map[string]int32{"high": 1000}, order)
	return &Result{
		Scenario: sc,
		Steps: []StepResult{
			{Name: sc.Steps[0].Name, Action: sc.Steps[0].describe(), Snapshot: snap, Duration: 120 * time.Millisecond},
			{Name: sc.Steps[1].Name, Action: sc.Steps[1].describe(), Snapshot: snap, Duration: 2 * time.Second,
				Checks: []Check{{Text: "3 pods of job bound: only 2 of 3 after 30s", Pass: false}, {Text: "job: 2 bound, want 3"}}},
		},
		Duration: 3 * time.Second,
	}
}

func TestTerminalTable(t *testing.T) {
	res := testResult(t)
	var out bytes.Buffer
	writeHeader(&out, res.Scenario)
	for i := range res.Steps {
		var prev Snapshot
		if i > 0 {
			prev = res.Steps[i-1].Snapshot
		}
		writeStep(&out, res.Scenario, i, &res.Steps[i], prev)
	}
	writeFooter(&out, res)
	text := out.String()
	t.Log("\n" + text)

	for _, want := range []string{
		"== demo ===",
		"Cluster: 2 zones × 1 rack × 2 nodes (4 in all), each 8 cpu, 64Gi memory, 2 GPUs",
		"[1/2] Create the job  (100ms)",
		"      create gang workers: 2 pods workers-0..1 of 1 cpu (min 2, one rack, in\n      job); 16 plain pods balloon-00..15 of 4 cpu (priority low)\n",
		"[2/2] Wait for the job  (2s)",
		"      wait up to 30s until 3 pods of job are bound",
		"      FAIL  3 pods of job bound: only 2 of 3 after 30s",
		"      FAIL  job: 2 bound, want 3",
		"demo: FAIL, 0/2 checks passed in 2 steps (3s)",
	} {
		assert.Contains(t, text, want)
	}
	// The table: a header and one aligned row per group, children indented.
	rows := regexp.MustCompile(`(?m)^      (GROUP|job|└ workers|└ driver|balloon|tf|web)  +.*$`).FindAllString(text, -1)
	require.Len(t, rows, 14, "header and 6 groups, twice:\n%s", text)
	assert.Regexp(t, `^ +GROUP +POLICY +BOUND/PENDING +EVICTED +WHERE$`, rows[0])
	assert.Regexp(t, `^ +job +composite, gang min 2 groups, one zone +2/1 +0 +zone zone-0$`, rows[1])
	assert.Regexp(t, `^ +└ workers +gang min 2, one rack, priority high \(1000\) +2/0 +0 +rack zone-0-rack-0$`, rows[2])
	assert.Regexp(t, `^ +balloon +plain pods +1/0 +3 +1 node in 1 rack$`, rows[4])
	col := strings.Index(rows[0], "BOUND/PENDING")
	assert.Equal(t, "2/1", rows[1][col:col+3], "columns line up")
}

func TestSummary(t *testing.T) {
	failed := testResult(t)
	passed := testResult(t)
	passed.Scenario = &Scenario{Name: "ok"}
	passed.Steps = passed.Steps[:1]
	var out bytes.Buffer
	WriteSummary(&out, []*Result{passed, failed})
	assert.Regexp(t, `(?m)^  ok +PASS +0/0 checks +1 step +3s$`, out.String())
	assert.Regexp(t, `(?m)^  demo +FAIL +0/2 checks +2 steps +3s$`, out.String())
	assert.Contains(t, out.String(), "1 of 2 scenarios FAILED.")

	out.Reset()
	WriteSummary(&out, []*Result{passed})
	assert.Contains(t, out.String(), "All 1 scenario passed.")
}

func TestResultVerdict(t *testing.T) {
	res := testResult(t)
	assert.False(t, res.Passed(), "a failed check fails the scenario")
	res.Steps[1].Checks = []Check{{Text: "ok", Pass: true}}
	assert.True(t, res.Passed())
	res.Skipped = 1
	assert.False(t, res.Passed(), "a step not run fails the scenario")
	res.Skipped = 0
	res.Err = errors.New("clean up failed")
	assert.False(t, res.Passed())
}

func TestHTMLReport(t *testing.T) {
	failed := testResult(t)
	passed := testResult(t)
	passed.Steps[1].Checks = []Check{{Text: "job: 3 bound", Pass: true}}
	var out bytes.Buffer
	require.NoError(t, WriteReport(&out, []*Result{passed, failed}))
	page := out.String()

	t.Run("it is one self-contained page", func(t *testing.T) {
		assert.True(t, strings.HasPrefix(page, "<!DOCTYPE html>"))
		assert.NotContains(t, page, "<script")
		assert.NotContains(t, page, "<link")
		assert.NotRegexp(t, `(src|href)="(https?:)?//`, page, "no external assets")
		assert.NotContains(t, page, "ZgotmplZ", "html/template rejected a value")
	})
	t.Run("it has a summary, one frame per step and a picture in each", func(t *testing.T) {
		assert.Contains(t, page, "<title>Phalanx scenarios: 1/2 passed</title>")
		assert.Equal(t, 4, strings.Count(page, `<section class="frame"`))
		assert.Equal(t, 4, strings.Count(page, "<svg "))
		assert.Contains(t, page, `id="s2-demo-step2"`)
		assert.Contains(t, page, `<a href="#s1-demo">demo</a>`)
		assert.Contains(t, page, "Step 2/2</span><h3>Wait for the job</h3>")
	})
	t.Run("text from the scenario is escaped", func(t *testing.T) {
		assert.Contains(t, page, "A &lt;b&gt;demo&lt;/b&gt; &amp; its groups.")
		assert.NotContains(t, page, "<b>demo</b>")
	})
	t.Run("the legend gives each leaf group its colour", func(t *testing.T) {
		assert.Contains(t, page, `<span class="sw" style="background:#4e79a7"></span><b>workers</b> <small>gang min 2, one rack, priority high (1000)</small>`)
		assert.NotContains(t, page, "<b>job</b>", "a composite has no pods of its own to colour")
	})
	t.Run("checks show PASS and FAIL", func(t *testing.T) {
		assert.Contains(t, page, `<li class="ok"><span class="v">PASS</span>job: 3 bound</li>`)
		assert.Contains(t, page, `<li class="no"><span class="v">FAIL</span>job: 2 bound, want 3</li>`)
	})
}

func TestClusterSVG(t *testing.T) {
	snap := buildSnapshot(testObservation(), map[groupRef]int{{KindPods, "balloon"}: 3}, nil, groupOrder{})
	colors := map[string]string{"workers": "#4e79a7", "tf": "#f28e2b"}
	svg := clusterSVG(snap, colors, "t")

	assert.True(t, strings.HasPrefix(svg, `<svg xmlns="http://www.w3.org/2000/svg"`))
	for _, label := range []string{">zone-0<", ">zone-1<", ">zone-0-rack-0<", ">node-z0-r0-n0<", ">node-z1-r0-n1<"} {
		assert.Contains(t, svg, label)
	}
	assert.Less(t, strings.Index(svg, ">zone-0<"), strings.Index(svg, ">zone-1<"), "zones left to right")
	assert.Equal(t, 4, strings.Count(svg, `<g class="node">`))
	// node-z0-r0-n0 holds half a node of workers and a quarter of tf.
	assert.Contains(t, svg, `<title>node-z0-r0-n0 — workers: 1 pod (50%), tf: 1 pod (25%)</title>`)
	assert.Regexp(t, `<rect x="[0-9.]+" y="[0-9]+" width="60\.0" height="13" fill="#4e79a7" class="seg"/><rect x="[0-9.]+" y="[0-9]+" width="30\.0" height="13" fill="#f28e2b" class="seg"/>`, svg)
	assert.Contains(t, svg, ">driver: 1 pending<")
	assert.Equal(t, 1, strings.Count(svg, `class="pod"`), "one dashed box per pending pod")
	assert.Contains(t, svg, ">Evicted so far: balloon 3<")

	empty := clusterSVG(Snapshot{}, nil, "t")
	assert.Contains(t, empty, ">no nodes<")
	assert.Contains(t, empty, ">No pending pods.<")
}

func TestNodesWithoutTopologyLabels(t *testing.T) {
	zones := layoutZones([]NodeState{{Name: "x-1"}, {Name: "a", Zone: "zone-0", Rack: "r"}, {Name: "x-0"}})
	require.Len(t, zones, 2)
	assert.Equal(t, "zone-0", zones[0].name)
	assert.Equal(t, "", zones[1].name, "unlabelled nodes last")
	assert.Equal(t, []string{"x-1", "x-0"}, []string{zones[1].racks[0].nodes[0].Name, zones[1].racks[0].nodes[1].Name}, "in snapshot order")
	assert.Contains(t, clusterSVG(Snapshot{Nodes: []NodeState{{Name: "x-0"}}}, nil, "t"), ">no zone<")
}
