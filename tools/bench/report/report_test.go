package report

import (
	"bytes"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestPercentile(t *testing.T) {
	values := []float64{5, 1, 4, 2, 3}
	tests := []struct {
		name string
		p    float64
		want float64
	}{
		{"p0 is the minimum", 0, 1},
		{"p50 is the middle value", 50, 3},
		{"p99 of five values is the maximum", 99, 5},
		{"p100 is the maximum", 100, 5},
		{"p20 is the first value by nearest rank", 20, 1},
		{"p21 is the second value by nearest rank", 21, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, Percentile(values, tt.p))
		})
	}
	assert.Equal(t, []float64{5, 1, 4, 2, 3}, values, "the input is not reordered")
	assert.Zero(t, Percentile(nil, 50), "no values give zero")
}

func TestTimingFill(t *testing.T) {
	start := time.Unix(1000, 0)
	at := func(ms int) time.Time { return start.Add(time.Duration(ms) * time.Millisecond) }
	groups := []Group{
		{Name: "a", Members: []string{"a0", "a1"}, MinCount: 2},
		{Name: "b", Members: []string{"b0", "b1"}, MinCount: 2},
		{Name: "c", Members: []string{"c0", "c1"}, MinCount: 2},
	}
	timing := Timing{Start: start, Bound: map[string]time.Time{
		"a0": at(500), "a1": at(1000),
		"b0": at(250), "b1": at(3000),
		// c never completes.
		"c0": at(4000),
	}}
	var r Result
	timing.Fill(&r, groups)
	assert.Equal(t, 0.25, r.FirstBindSeconds)
	assert.Equal(t, 4.0, r.LastBindSeconds)
	assert.Equal(t, 5/4.0, r.PodsPerSecond, "bound pods over time to the last bind")
	assert.Equal(t, 1.0, r.FirstGroupSeconds, "gang a completes first, when its last member binds")
	assert.Equal(t, 1.0, r.GroupP50Seconds)
	assert.Equal(t, 3.0, r.GroupP99Seconds, "an incomplete gang has no completion time")
}

const sampleMetrics = `# HELP scheduler_schedule_attempts_total Number of attempts to schedule pods, by the result.
# TYPE scheduler_schedule_attempts_total counter
scheduler_schedule_attempts_total{profile="default-scheduler",result="scheduled"} 60
scheduler_schedule_attempts_total{profile="default-scheduler",result="unschedulable"} 4
scheduler_schedule_attempts_total{profile="other",result="scheduled"} 7
scheduler_pod_scheduling_attempts_bucket{le="1"} 56
scheduler_pod_scheduling_attempts_bucket{le="+Inf"} 60
scheduler_pod_scheduling_attempts_sum 66
scheduler_pod_scheduling_attempts_count 60
scheduler_podgroup_schedule_attempts_total{profile="default-scheduler",result="scheduled"} 20
scheduler_framework_extension_point_duration_seconds_sum{extension_point="PreFilter",profile="default-scheduler",status="Success"} 1.5
scheduler_framework_extension_point_duration_seconds_sum{extension_point="PreFilter",profile="default-scheduler",status="Unschedulable"} 0.5
scheduler_framework_extension_point_duration_seconds_sum{extension_point="Bind",profile="default-scheduler",status="Success"} 3
scheduler_framework_extension_point_duration_seconds_sum{extension_point="Bind",profile="other",status="Success"} 100
scheduler_scheduling_attempt_duration_seconds_sum{profile="default-scheduler",result="scheduled"} 4
scheduler_scheduling_attempt_duration_seconds_sum{profile="other",result="scheduled"} 50
scheduler_permit_wait_duration_seconds_sum{result="allowed"} 7
weird_metric{path="a \"quoted\" \\ value, with comma"} 1.5e+01 1700000000000
`

func TestParseMetricsAndSchedulerMetrics(t *testing.T) {
	samples, err := ParseMetrics(sampleMetrics)
	require.NoError(t, err)
	assert.Equal(t, 67.0, samples.Sum("scheduler_schedule_attempts_total", map[string]string{"result": "scheduled"}))
	assert.Equal(t, 15.0, samples.Sum("weird_metric", map[string]string{"path": `a "quoted" \ value, with comma`}),
		"escaped label values and timestamps parse")

	m := MetricsBetween(nil, samples, "default-scheduler", "test")
	assert.Equal(t, &SchedulerMetrics{
		AttemptsPerBoundPod: 1.1, Scheduled: 60, Unschedulable: 4, PodGroupAttempts: 20, Source: "test",
		PhaseSeconds: map[string]float64{"PreFilter": 2, "Bind": 3, "SchedulingAttempt": 4, "PermitWait": 7},
	}, m, "phases of the profile only, summed over statuses; unlabelled histograms count")

	before, err := ParseMetrics("scheduler_pod_scheduling_attempts_sum 6\nscheduler_pod_scheduling_attempts_count 6\n" +
		`scheduler_schedule_attempts_total{profile="default-scheduler",result="scheduled"} 6` + "\n" +
		`scheduler_framework_extension_point_duration_seconds_sum{extension_point="Bind",profile="default-scheduler",status="Success"} 3` + "\n")
	require.NoError(t, err)
	d := MetricsBetween(before, samples, "default-scheduler", "test")
	assert.Equal(t, 54.0, d.Scheduled, "a delta between two scrapes of one process")
	assert.InDelta(t, 60.0/54, d.AttemptsPerBoundPod, 1e-9)
	assert.NotContains(t, d.PhaseSeconds, "Bind", "a phase that did not grow is left out")

	_, err = ParseMetrics(`broken{a="x" 1`)
	assert.Error(t, err, "unterminated labels")
	_, err = ParseMetrics("no_value")
	assert.Error(t, err)
}

func TestAPIRequestsBetween(t *testing.T) {
	before, err := ParseMetrics(`apiserver_request_total{code="201",group="",resource="pods",subresource="binding",verb="POST",version="v1"} 10
apiserver_request_total{code="200",group="",resource="nodes",subresource="",verb="LIST",version="v1"} 3
`)
	require.NoError(t, err)
	after, err := ParseMetrics(`apiserver_request_total{code="201",group="",resource="pods",subresource="binding",verb="POST",version="v1"} 40
apiserver_request_total{code="409",group="",resource="pods",subresource="binding",verb="POST",version="v1"} 2
apiserver_request_total{code="200",group="",resource="nodes",subresource="",verb="LIST",version="v1"} 3
apiserver_request_total{code="200",group="",resource="pods",subresource="",verb="LIST",version="v1"} 1
apiserver_request_total{code="200",group="scheduling.phalanx.dev",resource="podgroups",subresource="status",verb="PATCH",version="v1alpha1"} 5
`)
	require.NoError(t, err)
	counts := APIRequestsBetween(before, after)
	assert.Equal(t, map[string]float64{
		"POST pods/binding": 32,
		"LIST pods":         1,
		"PATCH podgroups.scheduling.phalanx.dev/status": 5,
	}, counts, "by verb and resource over all codes; unchanged keys left out")
	assert.Equal(t, 37.0, APIWrites(counts), "reads do not count")
}

func TestProcField(t *testing.T) {
	status := "Name:\tkube-scheduler\nVmHWM:\t  123456 kB\nVmRSS:\t 1000 kB\n"
	assert.Equal(t, uint64(123456), ProcField(status, "VmHWM"))
	assert.Zero(t, ProcField(status, "VmSwap"))
}

func TestTableAndRatios(t *testing.T) {
	ok := Verdict{Pods: 10, Bound: 10, Groups: 2, CompleteGroups: 2}
	results := []Result{
		{Case: "Gang/x", Arm: ArmPhalanx, Run: 1, Pods: 10, Groups: 2, PodsPerSecond: 100, FirstGroupSeconds: 1, GroupP99Seconds: 2, Verdict: ok, Stop: "all bound", MemoryScope: ScopeHarness, PeakRSSBytes: 400 << 20},
		{Case: "Gang/x", Arm: ArmUpstream, Run: 1, Pods: 10, Groups: 2, PodsPerSecond: 50, FirstGroupSeconds: 2, GroupP99Seconds: 8, Verdict: ok, Stop: "all bound", MemoryScope: ScopeScheduler, PeakRSSBytes: 100 << 20},
		{Case: "Gang/x", Arm: ArmCeiling, Run: 1, Pods: 10, Groups: 2, PodsPerSecond: 1000, Verdict: ok, Stop: "all bound", MemoryScope: ScopeHarness},
		{Case: "Gang/x", Arm: ArmPhalanxProcess, Run: 1, Pods: 10, Groups: 2, PodsPerSecond: 80, Verdict: ok, Stop: "all bound", MemoryScope: ScopeScheduler, PeakRSSBytes: 80 << 20},
		{Case: "Gang/x", Arm: ArmPhalanx, Run: 2, Pods: 10, Groups: 2, PodsPerSecond: 300, FirstGroupSeconds: 1, GroupP99Seconds: 2, Verdict: ok, Stop: "all bound"},
		{Case: "Gang/x", Arm: ArmPhalanx, Run: 3, Pods: 10, Groups: 2, PodsPerSecond: 200, FirstGroupSeconds: 1, GroupP99Seconds: 2, Verdict: ok, Stop: "all bound"},
	}
	sums := Summarize(results)
	require.Len(t, sums, 4)
	assert.Equal(t, 3, sums[0].Runs)
	assert.Equal(t, 200.0, sums[0].PodsPerSecond, "median over the runs")

	ratios := Ratios(sums)
	require.Len(t, ratios, 2)
	assert.Equal(t, Ratio{Case: "Gang/x", Arrival: ArrivalPrecreated, Arm: ArmPhalanx, PodsPerSecondVsUpstream: 4, PodsPerSecondVsCeiling: 0.2,
		UpstreamShareOfCeiling: 0.05, FirstGroupVsUpstream: 0.5, GroupP99VsUpstream: 0.25}, ratios[0],
		"no memory ratio for an in-process arm: its peak includes the API server")
	assert.InDelta(t, 0.8, ratios[1].MemoryVsUpstream, 1e-9, "both as their own process: memory compares")

	var buf bytes.Buffer
	require.NoError(t, WriteTable(&buf, results))
	assert.Contains(t, buf.String(), "4.00×")
	assert.Contains(t, buf.String(), "200.0 (100–300)", "median and range over three runs")
	assert.Contains(t, buf.String(), "100 MiB (s)")
	assert.NotContains(t, buf.String(), "Where the schedulers' time went", "no phases measured, no phase table")

	results[1].Scheduler = &SchedulerMetrics{PhaseSeconds: map[string]float64{"PermitWait": 12.5}}
	buf.Reset()
	require.NoError(t, WriteTable(&buf, results))
	assert.Contains(t, buf.String(), "Where the schedulers' time went")
	assert.Contains(t, buf.String(), "12.50")

	errored := append(append([]Result(nil), results...), Result{Case: "Gang/x", Arm: ArmCeiling, Run: 2, Pods: 10, Error: "start sandbox: port in use"})
	buf.Reset()
	require.NoError(t, WriteTable(&buf, errored))
	assert.Contains(t, buf.String(), "ok (1 of 2 runs failed to run; see the JSON)", "a run that never ran is no placement violation")
	assert.NotContains(t, buf.String(), "VIOLATED")

	failed := append(results, Result{Case: "Gang/x", Arm: ArmUpstream, Run: 2, Pods: 10, Verdict: Verdict{Pods: 10, Bound: 5, Groups: 2, PartialGroups: 1}, Stop: "deadline"})
	buf.Reset()
	require.NoError(t, WriteTable(&buf, failed))
	assert.Contains(t, buf.String(), "VIOLATED (stopped: all bound, deadline)")
}

func TestRatiosAgainstSchedulerPlugins(t *testing.T) {
	ok := Verdict{Pods: 10, Bound: 10, Groups: 2, CompleteGroups: 2}
	results := []Result{
		{Case: "Gang/x", Arm: ArmPhalanxProcess, Run: 1, Pods: 10, Groups: 2, PodsPerSecond: 90, FirstGroupSeconds: 1, GroupP99Seconds: 3, Verdict: ok, Stop: "all bound", MemoryScope: ScopeScheduler, PeakRSSBytes: 90 << 20},
		{Case: "Gang/x", Arm: ArmSchedulerPlugins, Run: 1, Pods: 10, Groups: 2, PodsPerSecond: 30, FirstGroupSeconds: 2, GroupP99Seconds: 6, Verdict: ok, Stop: "all bound", MemoryScope: ScopeScheduler, PeakRSSBytes: 60 << 20},
		{Case: "TopologyAwareScheduling/x", Arm: ArmPhalanxProcess, Run: 1, Pods: 10, Groups: 2, PodsPerSecond: 90, Verdict: ok, Stop: "all bound"},
		{Case: "TopologyAwareScheduling/x", Arm: ArmSchedulerPlugins, Run: 1, Pods: 10, Groups: 2, Skipped: "no topology"},
	}
	ratios := Ratios(Summarize(results))
	require.Len(t, ratios, 2)
	assert.Equal(t, Ratio{Case: "Gang/x", Arrival: ArrivalPrecreated, Arm: ArmPhalanxProcess, HasSchedulerPlugins: true,
		PodsPerSecondVsSchedulerPlugins: 3, FirstGroupVsSchedulerPlugins: 0.5, GroupP99VsSchedulerPlugins: 0.5, MemoryVsSchedulerPlugins: 1.5}, ratios[0])
	assert.False(t, ratios[1].HasSchedulerPlugins, "a skipped arm gives no ratio")

	var buf bytes.Buffer
	require.NoError(t, WriteTable(&buf, results))
	assert.Contains(t, buf.String(), "pods/s ÷ scheduler-plugins")
	assert.Contains(t, buf.String(), "3.00×")
	assert.Contains(t, buf.String(), "n/a: no topology")
}
