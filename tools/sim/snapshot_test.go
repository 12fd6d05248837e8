package sim

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	v1alpha1 "github.com/phalanx-sched/phalanx/apis/scheduling/v1alpha1"
)

func testNode(name, zone, rack string) corev1.Node {
	n := newNode(name, zone, "", rack, nodeCapacity("8", "64Gi", 2, 0))
	return *n
}

var t0 = metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))

// testPod is created after every group of testObservation.
func testPod(name string, labels map[string]string, cpu, node string) corev1.Pod {
	p := newPod(name, labels, Amount(cpu), "", 0, "")
	p.Spec.NodeName = node
	p.CreationTimestamp = metav1.NewTime(t0.Add(2 * time.Second))
	return *p
}

// testObservation is a composite job (workers in one rack, a pending
// driver) in zone-0, a label gang and plain pods in zone-1.
func testObservation() *observation {
	job := &v1alpha1.CompositePodGroup{ObjectMeta: metav1.ObjectMeta{Name: "job", CreationTimestamp: t0},
		Spec: v1alpha1.CompositePodGroupSpec{
			SchedulingPolicy:      v1alpha1.CompositePodGroupSchedulingPolicy{Gang: &v1alpha1.CompositeGangSchedulingPolicy{MinGroupCount: 2}},
			SchedulingConstraints: &v1alpha1.CompositePodGroupSchedulingConstraints{Topology: []v1alpha1.TopologyConstraint{{Key: ZoneLabel}}},
		}}
	workers := (&Gang{Name: "workers", Size: 2, TopologyKey: "rack", Parent: "job", PriorityClass: "high"}).podGroup()
	workers.CreationTimestamp = t0
	driver := (&Gang{Name: "driver", Size: 1, Parent: "job", DisruptionAll: true}).podGroup()
	driver.CreationTimestamp = metav1.NewTime(t0.Add(time.Second))
	gone := testPod("balloon-09", map[string]string{PodSetLabel: "balloon"}, "4", "node-z1-r0-n1")
	gone.DeletionTimestamp = &t0
	return &observation{
		podGroups:  map[string]*v1alpha1.PodGroup{"workers": workers, "driver": driver},
		composites: map[string]*v1alpha1.CompositePodGroup{"job": job},
		nodes: []corev1.Node{
			testNode("node-z1-r0-n1", "zone-1", "zone-1-rack-0"),
			testNode("node-z0-r0-n0", "zone-0", "zone-0-rack-0"),
			testNode("node-z0-r0-n1", "zone-0", "zone-0-rack-0"),
			testNode("node-z1-r0-n0", "zone-1", "zone-1-rack-0"),
		},
		pods: []corev1.Pod{
			testPod("driver-0", map[string]string{v1alpha1.PodGroupLabel: "driver"}, "4", ""),
			testPod("workers-0", map[string]string{v1alpha1.PodGroupLabel: "workers"}, "4", "node-z0-r0-n0"),
			testPod("workers-1", map[string]string{v1alpha1.PodGroupLabel: "workers"}, "4", "node-z0-r0-n1"),
			testPod("tf-0", map[string]string{v1alpha1.LightweightNameLabel: "tf", v1alpha1.LightweightMinAvailableLabel: "2"}, "8", "node-z1-r0-n0"),
			testPod("tf-1", map[string]string{v1alpha1.LightweightNameLabel: "tf", v1alpha1.LightweightMinAvailableLabel: "2"}, "2", "node-z0-r0-n0"),
			testPod("balloon-00", map[string]string{PodSetLabel: "balloon"}, "4", "node-z1-r0-n1"),
			testPod("web-7", nil, "2", "node-z1-r0-n1"),
			gone,
		},
	}
}

func TestBuildSnapshot(t *testing.T) {
	evicted := map[groupRef]int{{KindPods, "balloon"}: 3}
	order := groupOrder{}
	snap := buildSnapshot(testObservation(), evicted, map[string]int32{"high": 1000}, order)

	byName := map[string]GroupState{}
	var names []string
	for _, g := range snap.Groups {
		byName[g.Name] = g
		names = append(names, treeName(g))
	}
	t.Run("rows are in tree order, children under their composite", func(t *testing.T) {
		assert.Equal(t, []string{"job", "└ workers", "└ driver", "balloon", "tf", "web"}, names)
	})
	t.Run("a composite sums its children and reports its own domain", func(t *testing.T) {
		job := byName["job"]
		assert.Equal(t, KindComposite, job.Kind)
		assert.Equal(t, 2, job.Bound)
		assert.Equal(t, 1, job.Pending)
		assert.Equal(t, []string{"zone-0"}, job.Domains)
		assert.Equal(t, "zone zone-0", job.Where())
		assert.Equal(t, "composite, gang min 2 groups, one zone", job.Policy)
		assert.False(t, job.Leaf)
	})
	t.Run("a leaf PodGroup says its policy in words", func(t *testing.T) {
		w := byName["workers"]
		assert.Equal(t, "gang min 2, one rack, priority high (1000)", w.Policy)
		assert.Equal(t, "job", w.Parent)
		assert.Equal(t, 1, w.Depth)
		assert.Equal(t, "rack zone-0-rack-0", w.Where())
		assert.Equal(t, "gang min 1, evicted whole", byName["driver"].Policy)
		assert.Equal(t, "-", byName["driver"].Where(), "nothing bound")
	})
	t.Run("implicit groups come from the label pair, the pod-set label and the pod name", func(t *testing.T) {
		assert.Equal(t, KindLabelGang, byName["tf"].Kind)
		assert.Equal(t, "gang min 2 (label pair)", byName["tf"].Policy)
		assert.Equal(t, "2 nodes in 2 racks", byName["tf"].Where())
		assert.Equal(t, KindPods, byName["web"].Kind)
		assert.Equal(t, "plain pods", byName["web"].Policy)
	})
	t.Run("terminating pods are not counted, evictions are", func(t *testing.T) {
		b := byName["balloon"]
		assert.Equal(t, 1, b.Bound)
		assert.Equal(t, 3, b.Evicted)
	})
	t.Run("nodes are in natural order with each group's share", func(t *testing.T) {
		require.Len(t, snap.Nodes, 4)
		assert.Equal(t, "node-z0-r0-n0", snap.Nodes[0].Name)
		assert.Equal(t, "node-z1-r0-n1", snap.Nodes[3].Name)
		assert.Equal(t, []NodeSlot{{Group: "workers", Pods: 1, Share: 0.5}, {Group: "tf", Pods: 1, Share: 0.25}}, snap.Nodes[0].Slots)
		assert.Equal(t, "zone-1-rack-0", snap.Nodes[3].Rack)
	})
	t.Run("a later snapshot keeps the order of the first", func(t *testing.T) {
		o := testObservation()
		o.pods = append([]corev1.Pod{testPod("aaa-0", nil, "1", "")}, o.pods...)
		again := buildSnapshot(o, nil, nil, order)
		assert.Equal(t, []string{"job", "workers", "driver", "balloon", "tf", "web", "aaa"}, groupNames(again))
	})
	t.Run("groups ranked at creation keep that order", func(t *testing.T) {
		order := groupOrder{}
		for _, ref := range []groupRef{{KindPods, "web"}, {KindComposite, "job"}, {KindPodGroup, "driver"}} {
			order.rank(ref)
		}
		again := buildSnapshot(testObservation(), nil, nil, order)
		assert.Equal(t, []string{"web", "job", "driver", "workers", "balloon", "tf"}, groupNames(again))
	})
}

func groupNames(s Snapshot) []string {
	var out []string
	for _, g := range s.Groups {
		out = append(out, g.Name)
	}
	return out
}

func TestEvaluate(t *testing.T) {
	o := testObservation()
	o.pods = append(o.pods,
		testPod("spread-0", nil, "1", "node-z0-r0-n0"),
		testPod("spread-1", nil, "1", "node-z1-r0-n0"))
	snap := buildSnapshot(o, map[groupRef]int{{KindPods, "balloon"}: 3}, nil, groupOrder{})
	checks := evaluate([]Expectation{
		{Group: "job", Bound: ptr.To(2), Pending: ptr.To(1), SameDomain: "zone"},
		{Group: "workers", Bound: ptr.To(3), SameDomain: RackLabel},
		{Group: "balloon", Evicted: ptr.To(3)},
		{Group: "spread", SameDomain: "zone"},
		{Group: "driver", SameDomain: "rack"},
		{Group: "nope", Bound: ptr.To(1)},
	}, snap)
	assert.Equal(t, []Check{
		{Text: "job: 2 bound", Pass: true},
		{Text: "job: 1 pending", Pass: true},
		{Text: "job: all 2 bound pods in one zone (zone-0)", Pass: true},
		{Text: "workers: 2 bound, want 3"},
		{Text: "workers: all 2 bound pods in one rack (zone-0-rack-0)", Pass: true},
		{Text: "balloon: 3 evicted", Pass: true},
		{Text: "spread: bound pods span 2 zones (zone-0, zone-1), want one"},
		{Text: "driver: all bound pods in one rack: none is bound"},
		{Text: "nope: no such group in the namespace (groups: job, workers, driver, balloon, spread, tf, web)"},
	}, checks)
}

func TestGroupOf(t *testing.T) {
	cases := []struct {
		name   string
		labels map[string]string
		pod    string
		want   groupRef
	}{
		{"the PodGroup label wins", map[string]string{v1alpha1.PodGroupLabel: "pg", PodSetLabel: "set"}, "x-0", groupRef{KindPodGroup, "pg"}},
		{"the label pair is a label gang", map[string]string{v1alpha1.LightweightNameLabel: "tf", v1alpha1.LightweightMinAvailableLabel: "5"}, "x-0", groupRef{KindLabelGang, "tf"}},
		{"a malformed label pair is plain pods", map[string]string{v1alpha1.LightweightNameLabel: "tf"}, "x-0", groupRef{KindPods, "x"}},
		{"a pod set", map[string]string{PodSetLabel: "balloon"}, "balloon-07", groupRef{KindPods, "balloon"}},
		{"a Job's pods", map[string]string{"batch.kubernetes.io/job-name": "train"}, "train-abcde", groupRef{KindPods, "train"}},
		{"other pods by name without the ordinal", nil, "web-12", groupRef{KindPods, "web"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: tc.pod, Labels: tc.labels}}
			assert.Equal(t, tc.want, groupOf(p))
		})
	}
}

func TestDominantShare(t *testing.T) {
	p := newPod("p", nil, "2", "16Gi", 1, "")
	alloc := corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse("8"),
		corev1.ResourceMemory: resource.MustParse("64Gi"),
		GPUResource:           resource.MustParse("2"),
	}
	assert.InDelta(t, 0.5, dominantShare(p, alloc), 1e-9, "the GPU is the dominant resource")
	delete(alloc, GPUResource)
	assert.InDelta(t, 0.25, dominantShare(p, alloc), 1e-9)
}

func TestNaturalLess(t *testing.T) {
	assert.True(t, naturalLess("node-2", "node-10"))
	assert.False(t, naturalLess("node-10", "node-2"))
	assert.True(t, naturalLess("a", "b"))
	assert.True(t, naturalLess("zone-0-rack-1", "zone-1-rack-0"))
}

// tried is a pending pod the scheduler has reported on.
func tried(p corev1.Pod) corev1.Pod {
	p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: "Unschedulable"})
	return p
}

func TestSettling(t *testing.T) {
	tf := map[string]string{v1alpha1.LightweightNameLabel: "tf", v1alpha1.LightweightMinAvailableLabel: "2"}
	gated := testPod("web-2", nil, "1", "")
	gated.Spec.SchedulingGates = []corev1.PodSchedulingGate{{Name: "example.com/hold"}}
	cases := []struct {
		name string
		pods []corev1.Pod
		want bool
	}{
		{"a gang with one of two bound is still binding",
			[]corev1.Pod{testPod("tf-0", tf, "1", "n1"), tried(testPod("tf-1", tf, "1", ""))}, true},
		{"a gang fully bound is settled",
			[]corev1.Pod{testPod("tf-0", tf, "1", "n1"), testPod("tf-1", tf, "1", "n2")}, false},
		{"a gang with nothing bound and a verdict is settled",
			[]corev1.Pod{tried(testPod("tf-0", tf, "1", "")), tried(testPod("tf-1", tf, "1", ""))}, false},
		{"a gang below its minimum with nothing left to bind is settled",
			[]corev1.Pod{testPod("tf-0", tf, "1", "n1")}, false},
		{"plain pods are never binding as a group",
			[]corev1.Pod{testPod("web-0", nil, "1", "n1"), tried(testPod("web-1", nil, "1", ""))}, false},
		{"a pending pod the scheduler has not tried yet is not settled",
			[]corev1.Pod{testPod("web-0", nil, "1", "n1"), testPod("web-1", nil, "1", "")}, true},
		{"a pod held by a scheduling gate waits for no verdict",
			[]corev1.Pod{gated}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, (&observation{pods: tc.pods}).settling())
		})
	}
	t.Run("a pod marked for eviction or terminating is not settled", func(t *testing.T) {
		victim := testPod("web-0", nil, "1", "n1")
		victim.Status.Conditions = []corev1.PodCondition{{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue}}
		assert.True(t, (&observation{pods: []corev1.Pod{victim}}).settling())
		gone := testPod("web-1", nil, "1", "n1")
		gone.DeletionTimestamp = &t0
		assert.True(t, (&observation{pods: []corev1.Pod{gone}}).settling())
	})
	t.Run("a PodGroup gang uses its minCount", func(t *testing.T) {
		o := testObservation()
		o.pods = o.pods[:len(o.pods)-1] // without the terminating balloon
		o.pods[0] = tried(o.pods[0])    // the pending driver
		o.pods = append(o.pods, tried(testPod("workers-2", map[string]string{v1alpha1.PodGroupLabel: "workers"}, "1", "")))
		assert.False(t, o.settling(), "2 of minCount 2 bound: settled")
		o.podGroups["workers"].Spec.SchedulingPolicy.Gang.MinCount = 3
		assert.True(t, o.settling(), "2 of minCount 3 bound, 1 pending")
	})
}

func TestEvictionsFollowTheObservation(t *testing.T) {
	o := testObservation()
	o.pods[1].UID = "w0"
	e := &evictions{victims: map[types.UID]groupRef{"w0": {KindPodGroup, "workers"}, "gone": {KindPods, "balloon"}}}
	assert.True(t, e.evicting(o), "a victim the watch saw still runs in the observation")
	assert.Equal(t, map[groupRef]int{{KindPods, "balloon"}: 1}, e.counts(o), "only victims gone from the observation count")
	o.pods = o.pods[2:]
	assert.False(t, e.evicting(o))
	assert.Equal(t, map[groupRef]int{{KindPods, "balloon"}: 1, {KindPodGroup, "workers"}: 1}, e.counts(o))
}
