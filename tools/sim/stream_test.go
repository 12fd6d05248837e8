package sim

import (
	"bytes"
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	v1alpha1 "github.com/phalanx-sched/phalanx/apis/scheduling/v1alpha1"
	phalanxfake "github.com/phalanx-sched/phalanx/pkg/generated/clientset/versioned/fake"
)

const streamStep = "- name: s\n  stream: {name: job, count: 500, ratePerSecond: 2, seed: 7, minRuntime: 2s, maxRuntime: 5s, deadlineSlack: 1s, cpu: 4}\n"

func TestStreamSchedule(t *testing.T) {
	sc, err := Decode([]byte(scenarioWith(streamStep)))
	require.NoError(t, err)
	s := sc.Steps[0].Stream
	plan := s.schedule()
	require.Len(t, plan, 500)

	t.Run("the same seed gives the same arrivals and runtimes", func(t *testing.T) {
		assert.Equal(t, plan, s.schedule())
		other := *s
		other.Seed = 8
		assert.NotEqual(t, plan, other.schedule())
	})
	t.Run("arrivals come in order at about the rate asked", func(t *testing.T) {
		for i := 1; i < len(plan); i++ {
			assert.GreaterOrEqual(t, plan[i].at, plan[i-1].at)
		}
		rate := float64(len(plan)) / plan[len(plan)-1].at.Seconds()
		assert.InDelta(t, 2, rate, 0.2, "500 exponential gaps of mean 0.5s")
	})
	t.Run("runtimes stay in their range", func(t *testing.T) {
		for _, a := range plan {
			assert.GreaterOrEqual(t, a.runtime, 2*time.Second)
			assert.LessOrEqual(t, a.runtime, 5*time.Second)
		}
	})
	t.Run("each pod runs its runtime and declares it rounded up plus the slack", func(t *testing.T) {
		p := s.pod(3, 2300*time.Millisecond)
		assert.Equal(t, "job-003", p.Name, "numbered with the digits the largest needs")
		assert.Equal(t, "job", p.Labels[PodSetLabel])
		assert.Equal(t, "2.3", p.Annotations[runtimeAnnotation])
		require.NotNil(t, p.Spec.ActiveDeadlineSeconds)
		assert.Equal(t, int64(4), *p.Spec.ActiveDeadlineSeconds)
		assert.Equal(t, SchedulerName, p.Spec.SchedulerName)

		undeclared := *s
		undeclared.DeadlineSlack = ""
		assert.Nil(t, undeclared.pod(0, time.Second).Spec.ActiveDeadlineSeconds, "no slack, no declared bound")
	})
	t.Run("the step says what arrives", func(t *testing.T) {
		assert.Equal(t, "start a stream of 500 plain pods job-000..499 of 4 cpu in the background: one arrives every 500ms on average (Poisson, seed 7), each runs 2s to 5s and declares activeDeadlineSeconds of its runtime + 1s",
			sc.Steps[0].describe())
	})
}

func TestDecodeRejectsBadStreamsAndSchedulerSettings(t *testing.T) {
	cases := []struct {
		name, yaml, want string
	}{
		{"a stream without a rate",
			scenarioWith("- name: s\n  stream: {name: job, count: 3, minRuntime: 1s, maxRuntime: 2s}\n"),
			`steps[0].stream.ratePerSecond: Invalid value: 0: must be above 0 and at most 100 pods a second`},
		{"a stream whose runtimes are upside down",
			scenarioWith("- name: s\n  stream: {name: job, count: 3, ratePerSecond: 1, minRuntime: 5s, maxRuntime: 2s}\n"),
			`steps[0].stream.maxRuntime: Invalid value: "2s": must not be shorter than minRuntime 5s`},
		{"a stream without runtimes",
			scenarioWith("- name: s\n  stream: {name: job, count: 3, ratePerSecond: 1}\n"),
			`steps[0].stream.minRuntime: Invalid value: "": must be a duration such as 5s`},
		{"a stream of too many pods",
			scenarioWith("- name: s\n  stream: {name: job, count: 5000, ratePerSecond: 1, minRuntime: 1s, maxRuntime: 1s}\n"),
			`steps[0].stream.count: Invalid value: 5000: must be between 1 and 1000`},
		{"a stream and a wait in one step",
			scenarioWith("- name: s\n  stream: {name: job, count: 3, ratePerSecond: 1, minRuntime: 1s, maxRuntime: 1s}\n  wait: {for: bound, group: job}\n"),
			`steps[0]: Invalid value: "wait, stream": a step does exactly one of`},
		{"a gang runtime that is not a duration",
			scenarioWith("- name: s\n  create: {gangs: [{name: g, size: 1, runtime: long}]}\n"),
			`steps[0].create.gangs[0].runtime: Invalid value: "long": must be a duration such as 20s`},
		{"a gang reserve-after in fractions of a second",
			scenarioWith("- name: s\n  create: {gangs: [{name: g, size: 1, reserveAfter: 1500ms}]}\n"),
			`steps[0].create.gangs[0].reserveAfter: Invalid value: "1500ms": must be a whole number of seconds such as 5s, or never`},
		{"a reserve-after on a gang without a PodGroup",
			scenarioWith("- name: s\n  create: {gangs: [{name: g, size: 1, labelPair: true, reserveAfter: 5s}]}\n"),
			`steps[0].create.gangs[0].reserveAfter: Forbidden: only a Phalanx PodGroup carries`},
		{"an empty scheduler block",
			scenarioWith(streamStep) + "scheduler: {}\n",
			`scheduler.reservation: Required value`},
		{"a reservation share above 100%",
			scenarioWith(streamStep) + "scheduler: {reservation: {afterSeconds: 1, maxSharePercent: 150}}\n",
			`scheduler.reservation.maxSharePercent: Invalid value: 150: must be 1 to 100`},
		{"a negative afterSeconds",
			scenarioWith(streamStep) + "scheduler: {reservation: {afterSeconds: -1}}\n",
			`scheduler.reservation.afterSeconds: Invalid value: -1: must not be negative`},
		{"a misspelt reservation field",
			scenarioWith(streamStep) + "scheduler: {reservation: {afterSecond: 1}}\n",
			`unknown field "scheduler.reservation.afterSecond"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Decode([]byte(tc.yaml))
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}

func TestGangRuntimeAndReserveAfter(t *testing.T) {
	sc, err := Decode([]byte(scenarioWith("- name: s\n  create: {gangs: [{name: g, size: 2, runtime: 20s, reserveAfter: 5s}, {name: h, size: 1, reserveAfter: never}]}\n")))
	require.NoError(t, err)
	g, h := &sc.Steps[0].Create.Gangs[0], &sc.Steps[0].Create.Gangs[1]
	assert.Equal(t, "20", g.pods()[1].Annotations[runtimeAnnotation], "the node agent ends each member after its runtime")
	assert.Equal(t, "5", g.podGroup().Annotations[reserveAfterAnnotation])
	assert.Equal(t, "-1", h.podGroup().Annotations[reserveAfterAnnotation], "never reserve is -1")
	assert.Empty(t, h.pods()[0].Annotations, "no runtime: the pod runs until deleted")
	assert.Contains(t, sc.Steps[0].describe(), "each runs 20s, reserve after 5s")
	assert.Contains(t, sc.Steps[0].describe(), "never reserved for")
}

func TestSchedulerSpecApply(t *testing.T) {
	backfill := false
	spec := &SchedulerSpec{Reservation: &Reservation{AfterSeconds: 2, MaxSharePercent: 50, Backfill: &backfill}}
	out, err := spec.apply(nil)
	require.NoError(t, err)
	var cfg struct {
		Profiles []struct {
			SchedulerName string `json:"schedulerName"`
			PluginConfig  []struct {
				Name string         `json:"name"`
				Args map[string]any `json:"args"`
			} `json:"pluginConfig"`
		} `json:"profiles"`
	}
	require.NoError(t, yaml.Unmarshal(out, &cfg))
	require.Len(t, cfg.Profiles, 1)
	assert.Equal(t, SchedulerName, cfg.Profiles[0].SchedulerName)
	var topo map[string]any
	for _, pc := range cfg.Profiles[0].PluginConfig {
		if pc.Name == "PhalanxTopology" {
			topo = pc.Args
		}
	}
	require.NotNil(t, topo, "the default configuration's PhalanxTopology args")
	assert.Equal(t, "BestFit", topo["domainPolicy"], "the other args stay")
	assert.Equal(t, map[string]any{"afterSeconds": float64(2), "maxSharePercent": float64(50), "backfill": false}, topo["reservation"],
		"unset fields are left to the plugin's defaults")

	t.Run("a profile without PhalanxTopology args gets them", func(t *testing.T) {
		out, err := spec.apply([]byte("apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\nprofiles:\n- schedulerName: a\n- schedulerName: b\n  pluginConfig: [{name: PhalanxGang, args: {bindConcurrency: 8}}]\n"))
		require.NoError(t, err)
		assert.Equal(t, 2, strings.Count(string(out), "reservation:"), "both profiles:\n%s", out)
		assert.Contains(t, string(out), "bindConcurrency: 8")
	})
	t.Run("a configuration without profiles is an error", func(t *testing.T) {
		_, err := spec.apply([]byte("kind: KubeSchedulerConfiguration\n"))
		assert.ErrorContains(t, err, "no profiles")
	})
}

func TestRunRestartsTheSchedulerForItsSettings(t *testing.T) {
	yamlText := "name: t\ncluster: {zones: 1, racks: 1, nodesPerRack: 1}\nscheduler: {reservation: {afterSeconds: 3}}\nsteps:\n- name: more nodes\n  addNodes: {prefix: extra, count: 1}\n"
	sc, err := Decode([]byte(yamlText))
	require.NoError(t, err)
	cluster := func() Cluster {
		return Cluster{Client: fake.NewClientset(), Phalanx: phalanxfake.NewSimpleClientset()}
	}

	t.Run("under the scenario's configuration, then the cluster's", func(t *testing.T) {
		var configs [][]byte
		cl := cluster()
		cl.RestartScheduler = func(cfg []byte) error {
			configs = append(configs, cfg)
			return nil
		}
		res := Run(context.Background(), cl, sc, nil)
		require.NoError(t, res.Err)
		require.Len(t, configs, 2)
		assert.Contains(t, string(configs[0]), "afterSeconds: 3")
		assert.Nil(t, configs[1], "back to the cluster's own configuration")
	})
	t.Run("a cluster that cannot restart its scheduler fails the scenario before step 1", func(t *testing.T) {
		var out bytes.Buffer
		res := Run(context.Background(), cluster(), sc, &out)
		require.Error(t, res.Err)
		assert.Contains(t, res.Err.Error(), "this cluster cannot restart its scheduler")
		assert.Equal(t, 1, res.Skipped)
		assert.False(t, res.Passed())
	})
}

func TestFinishedPodsAreDoneNotBound(t *testing.T) {
	running := testPod("job-00", map[string]string{PodSetLabel: "job"}, "4", "node-z0-r0-n0")
	succeeded := testPod("job-01", map[string]string{PodSetLabel: "job"}, "4", "node-z0-r0-n1")
	succeeded.Status.Phase = corev1.PodSucceeded
	failed := testPod("job-02", map[string]string{PodSetLabel: "job"}, "4", "node-z0-r0-n1")
	failed.Status.Phase = corev1.PodFailed
	pending := testPod("job-03", map[string]string{PodSetLabel: "job"}, "4", "")
	pending.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse}}
	gang := (&Gang{Name: "trainer", Size: 2, TopologyKey: "rack"}).podGroup()
	gang.Status.Conditions = []metav1.Condition{{Type: reservedCondition, Status: metav1.ConditionTrue, Reason: "Holding", Message: "holds topology.phalanx.dev/rack=zone-0-rack-0 (2 nodes)"}}
	o := &observation{
		podGroups: map[string]*v1alpha1.PodGroup{"trainer": gang},
		nodes:     []corev1.Node{testNode("node-z0-r0-n0", "zone-0", "zone-0-rack-0"), testNode("node-z0-r0-n1", "zone-0", "zone-0-rack-0")},
		pods:      []corev1.Pod{running, succeeded, failed, pending},
	}
	snap := buildSnapshot(o, nil, nil, groupOrder{})
	job, ok := snap.find("job")
	require.True(t, ok)
	assert.Equal(t, 1, job.Bound, "only the running pod holds a node")
	assert.Equal(t, 2, job.Done, "Succeeded and Failed pods ran and finished")
	assert.Equal(t, 1, job.Pending)
	assert.Equal(t, []string{"node-z0-r0-n0"}, job.nodeNames, "finished pods are not drawn on their nodes")
	for _, n := range snap.Nodes {
		if n.Name == "node-z0-r0-n1" {
			assert.Empty(t, n.Slots)
		}
	}
	trainer, ok := snap.find("trainer")
	require.True(t, ok)
	assert.Equal(t, "Holding: holds topology.phalanx.dev/rack=zone-0-rack-0 (2 nodes)", trainer.Reservation)

	assert.Equal(t, []Check{{Text: "job: 2 done", Pass: true}, {Text: "job: 1 bound", Pass: true}},
		evaluate([]Expectation{{Group: "job", Done: ptr.To(2)}, {Group: "job", Bound: ptr.To(1)}}, snap))
	assert.Equal(t, 1, countBound([]*corev1.Pod{&running}))
	assert.Equal(t, 2, countDone([]*corev1.Pod{&running, &succeeded, &failed, &pending}))

	var out bytes.Buffer
	writeStep(&out, &Scenario{Steps: make([]Step, 1)}, 0, &StepResult{Name: "s", Snapshot: snap}, Snapshot{})
	assert.Contains(t, out.String(), "DONE")
	assert.Contains(t, out.String(), "> trainer reservation: Holding: holds\n        topology.phalanx.dev/rack=zone-0-rack-0 (2 nodes)", "the note wraps under its marker")
}

func TestStreamCreatesItsPodsInTheBackground(t *testing.T) {
	sc, err := Decode([]byte(scenarioWith("- name: s\n  stream: {name: job, count: 5, ratePerSecond: 100, seed: 3, minRuntime: 1s, maxRuntime: 2s}\n")))
	require.NoError(t, err)
	client := fake.NewClientset()
	var st streams
	st.start(context.Background(), Cluster{Client: client}, "ns", sc.Steps[0].Stream)
	var pods *corev1.PodList
	require.Eventually(t, func() bool {
		pods, err = client.CoreV1().Pods("ns").List(context.Background(), metav1.ListOptions{})
		return err == nil && len(pods.Items) == 5
	}, 10*time.Second, 10*time.Millisecond, "5 pods at 100 a second")
	st.stop()
	require.NoError(t, st.failed())
	s := sc.Steps[0].Stream
	plan := s.schedule()
	index := map[string]int{}
	for i := range plan {
		index[s.podName(i)] = i
	}
	for _, p := range pods.Items {
		i, ok := index[p.Name]
		require.True(t, ok, "%s is one of the stream's", p.Name)
		want := strconv.FormatFloat(plan[i].runtime.Seconds(), 'f', -1, 64)
		assert.Equal(t, want, p.Annotations[runtimeAnnotation], "%s runs its drawn runtime", p.Name)
		assert.Nil(t, p.Spec.ActiveDeadlineSeconds, "no slack, no declared bound")
	}

	t.Run("a failed create is reported once and ends the stream", func(t *testing.T) {
		var st streams
		st.start(context.Background(), Cluster{Client: client}, "ns", sc.Steps[0].Stream)
		require.Eventually(t, func() bool {
			st.mu.Lock()
			defer st.mu.Unlock()
			return st.err != nil
		}, 10*time.Second, 10*time.Millisecond, "job-00 exists already")
		st.stop()
		err := st.failed()
		require.Error(t, err)
		assert.Contains(t, err.Error(), "stream job: create pod job-00")
		assert.NoError(t, st.failed(), "reported once")
	})
}
