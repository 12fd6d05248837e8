package groups

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	schedv1alpha3 "k8s.io/api/scheduling/v1alpha3"
	schedv1beta1 "k8s.io/api/scheduling/v1beta1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	xv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	v1alpha1 "github.com/phalanx-sched/phalanx/apis/scheduling/v1alpha1"
)

func xKey(name string) Key {
	return Key{Dialect: Coscheduling, Kind: PodGroupKind, Namespace: testNS, Name: name}
}

func inXGroup(name string) podOpt { return withLabel(xv1alpha1.PodGroupLabel, name) }

// A Phalanx PodGroup, an upstream PodGroup and a scheduler-plugins PodGroup
// with one name in one namespace are three groups with their own minimum
// and their own members.
func TestSameNameInThreeDialectsIsThreeGroups(t *testing.T) {
	c := NewCache()
	c.SetPodGroup(podGroup("a", 3, ""))
	c.SetGroup(nativeKey("a"), Spec{Gang: true, MinCount: 2})
	c.SetGroup(xKey("a"), SpecOfXPodGroup(&xv1alpha1.PodGroup{
		ObjectMeta: metav1.ObjectMeta{Namespace: testNS, Name: "a"}, Spec: xv1alpha1.PodGroupSpec{MinMember: 1}}))
	c.AddOrUpdatePod(newPod("p1", inPodGroup("a")))
	c.AddOrUpdatePod(newPod("n1", inSpecGroup("a")))
	c.AddOrUpdatePod(newPod("n2", inSpecGroup("a")))
	c.AddOrUpdatePod(newPod("x1", inXGroup("a")))

	for k, want := range map[Key][2]int{pgKey("a"): {3, 1}, nativeKey("a"): {2, 2}, xKey("a"): {1, 1}} {
		info, ok := c.Get(k)
		require.True(t, ok, k.String())
		assert.Equal(t, want[0], info.MinCount, "%s minCount", k)
		assert.Equal(t, want[1], info.Existing, "%s members", k)
	}
	ok, _, err := c.Quorum(newPod("n1", inSpecGroup("a")), ByExisting)
	require.NoError(t, err)
	assert.True(t, ok, "the upstream group has its 2 of 2")
	ok, short, err := c.Quorum(newPod("p1", inPodGroup("a")), ByExisting)
	require.NoError(t, err)
	assert.False(t, ok, "the Phalanx group has 1 of 3")
	assert.Equal(t, Shortfall{Key: pgKey("a"), Leaf: true, Have: 1, Need: 3}, short)
}

// An upstream PodGroup's parent is an upstream CompositePodGroup: a Phalanx
// composite of the same name is not it.
func TestNativeHierarchyStaysInItsDialect(t *testing.T) {
	c := NewCache()
	c.SetComposite(composite("top", 1, ""))
	c.SetGroup(nativeKey("leaf"), SpecOfNativePodGroup(&schedv1beta1.PodGroup{
		ObjectMeta: metav1.ObjectMeta{Namespace: testNS, Name: "leaf"},
		Spec: schedv1beta1.PodGroupSpec{ParentCompositePodGroupName: ptr.To("top"),
			SchedulingPolicy: schedv1beta1.PodGroupSchedulingPolicy{Gang: &schedv1beta1.GangSchedulingPolicy{MinCount: 1}}},
	}))
	pod := newPod("n", inSpecGroup("leaf"))
	c.AddOrUpdatePod(pod)
	_, _, err := c.ChainOf(pod)
	var missing *MissingError
	require.ErrorAs(t, err, &missing)
	assert.Equal(t, Key{Dialect: Native, Kind: CompositeKind, Namespace: testNS, Name: "top"}, missing.Key)
	assert.Contains(t, err.Error(), "CompositePodGroup.scheduling.k8s.io "+testNS+"/top not found")

	c.SetGroup(missing.Key, SpecOfNativeComposite(&schedv1alpha3.CompositePodGroup{
		ObjectMeta: metav1.ObjectMeta{Namespace: testNS, Name: "top"},
		Spec: schedv1alpha3.CompositePodGroupSpec{SchedulingPolicy: schedv1alpha3.CompositePodGroupSchedulingPolicy{
			Gang: &schedv1alpha3.CompositeGangSchedulingPolicy{MinGroupCount: 1}},
			SchedulingConstraints: &schedv1alpha3.CompositePodGroupSchedulingConstraints{
				Topology: []schedv1alpha3.TopologyConstraint{{Key: "zone"}}}},
	}))
	ch, _, err := c.ChainOf(pod)
	require.NoError(t, err)
	assert.Equal(t, missing.Key, ch.Root().Key)
	assert.Equal(t, 1, ch.Root().MinGroupCount)
	assert.Equal(t, "zone", ch.Root().TopologyKey)
}

// scheduler-plugins' API has no composite kind: the parent annotation names
// a Phalanx CompositePodGroup, and the annotation's topology key applies.
func TestSchedulerPluginsGroupJoinsAPhalanxComposite(t *testing.T) {
	c := NewCache()
	c.SetComposite(composite("job", 2, ""))
	for _, name := range []string{"workers", "ps"} {
		c.SetGroup(xKey(name), SpecOfXPodGroup(&xv1alpha1.PodGroup{
			ObjectMeta: metav1.ObjectMeta{Namespace: testNS, Name: name, Annotations: map[string]string{
				XParentAnnotation: "job", XTopologyKeyAnnotation: "topology.phalanx.dev/rack"}},
			Spec: xv1alpha1.PodGroupSpec{MinMember: 2},
		}))
	}
	pod := newPod("w0", inXGroup("workers"))
	c.AddOrUpdatePod(pod)
	ch, _, err := c.ChainOf(pod)
	require.NoError(t, err)
	require.Len(t, ch, 2)
	assert.Equal(t, cpgKey("job"), ch.Root().Key)
	assert.Equal(t, "topology.phalanx.dev/rack", ch.Leaf().TopologyKey)
	assert.True(t, ch.Leaf().PriorityFromMembers, "priority comes from the pods, as in scheduler-plugins")
	tree, err := c.TreeOf(xKey("workers"))
	require.NoError(t, err)
	assert.Len(t, tree.Children, 2, "both scheduler-plugins groups are children of the composite")
}

// What scheduler-plugins' API allows but no scheduler can act on is an
// Invalid reason naming the field, not a silent wait.
func TestSchedulerPluginsSpecValidation(t *testing.T) {
	x := func(min int32, timeout *int32, ann map[string]string, res corev1.ResourceList) Spec {
		return SpecOfXPodGroup(&xv1alpha1.PodGroup{ObjectMeta: metav1.ObjectMeta{Name: "g", Annotations: ann},
			Spec: xv1alpha1.PodGroupSpec{MinMember: min, ScheduleTimeoutSeconds: timeout, MinResources: res}})
	}
	good := x(4, ptr.To[int32](30), nil, corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("8")})
	assert.Empty(t, good.Invalid)
	assert.Equal(t, 4, good.MinCount)
	assert.Equal(t, 30*time.Second, good.WaitTimeout)
	assert.True(t, good.MinResources.Cpu().Equal(resource.MustParse("8")))
	// 0 is the scheduler's default, as scheduler-plugins reads it; the MPI
	// Operator writes it for every job without a timeout.
	zero := x(2, ptr.To[int32](0), nil, nil)
	assert.Empty(t, zero.Invalid)
	assert.Zero(t, zero.WaitTimeout)

	for name, tc := range map[string]struct {
		spec Spec
		want string
	}{
		"minMember 0":        {x(0, nil, nil, nil), "spec.minMember is 0"},
		"negative minMember": {x(-2, nil, nil, nil), "spec.minMember is -2"},
		"negative timeout":   {x(2, ptr.To[int32](-5), nil, nil), "spec.scheduleTimeoutSeconds is -5"},
		"bad topology key":   {x(2, nil, map[string]string{XTopologyKeyAnnotation: "not a key!"}, nil), XTopologyKeyAnnotation},
		"bad parent name":    {x(2, nil, map[string]string{XParentAnnotation: "Not_A_Name"}, nil), XParentAnnotation},
		"negative resource":  {x(2, nil, nil, corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("-1Gi")}), "spec.minResources[memory]"},
	} {
		assert.Contains(t, tc.spec.Invalid, tc.want, name)
	}

	c := NewCache()
	c.SetGroup(xKey("bad"), x(0, nil, nil, nil))
	pod := newPod("p", inXGroup("bad"))
	c.AddOrUpdatePod(pod)
	_, _, err := c.Quorum(pod, ByExisting)
	var invalid *InvalidError
	require.ErrorAs(t, err, &invalid, "no member of an invalid group passes a quorum check")
	assert.Contains(t, invalid.Reason, "spec.minMember")
}

// A gang waits in Permit as one unit: the strictest scheduleTimeoutSeconds
// among its groups bounds the whole hierarchy, and groups without one
// leave it to the scheduler's default.
func TestHierarchyWaitTimeout(t *testing.T) {
	c := NewCache()
	timeout := func(name string, seconds *int32, parent string) {
		ann := map[string]string{}
		if parent != "" {
			ann[XParentAnnotation] = parent
		}
		c.SetGroup(xKey(name), SpecOfXPodGroup(&xv1alpha1.PodGroup{
			ObjectMeta: metav1.ObjectMeta{Namespace: testNS, Name: name, Annotations: ann},
			Spec:       xv1alpha1.PodGroupSpec{MinMember: 1, ScheduleTimeoutSeconds: seconds}}))
	}
	timeout("alone", ptr.To[int32](30), "")
	assert.Equal(t, 30*time.Second, c.HierarchyWaitTimeout(xKey("alone")))
	timeout("default", nil, "")
	assert.Zero(t, c.HierarchyWaitTimeout(xKey("default")))
	timeout("zero", ptr.To[int32](0), "")
	assert.Zero(t, c.HierarchyWaitTimeout(xKey("zero")), "0 is the scheduler's default")
	assert.Zero(t, c.HierarchyWaitTimeout(xKey("unknown")))

	c.SetComposite(composite("job", 2, ""))
	timeout("slow", ptr.To[int32](120), "job")
	timeout("fast", ptr.To[int32](20), "job")
	timeout("unset", nil, "job")
	for _, name := range []string{"slow", "fast", "unset"} {
		assert.Equal(t, 20*time.Second, c.HierarchyWaitTimeout(xKey(name)), "%s: the strictest group of the hierarchy", name)
	}
	assert.Equal(t, 20*time.Second, c.HierarchyWaitTimeout(cpgKey("job")))
}

// Group claims: both dialects carry their resourceClaims into the Spec,
// a member's entry uses the group's claim only when it matches exactly,
// and a claim made from a template is refused with the field named.
func TestGroupClaims(t *testing.T) {
	phalanx := SpecOfPodGroup(&v1alpha1.PodGroup{Spec: v1alpha1.PodGroupSpec{ResourceClaims: []v1alpha1.PodGroupResourceClaim{
		{Name: "channel", ResourceClaimName: ptr.To("cd-channel")}}}})
	assert.Equal(t, []GroupClaim{{Name: "channel", ClaimName: "cd-channel"}}, phalanx.Claims)
	assert.Empty(t, phalanx.Invalid)

	native := SpecOfNativePodGroup(&schedv1beta1.PodGroup{Spec: schedv1beta1.PodGroupSpec{ResourceClaims: []schedv1beta1.PodGroupResourceClaim{
		{Name: "channel", ResourceClaimName: ptr.To("cd-channel")}}}})
	assert.Equal(t, phalanx.Claims, native.Claims)
	assert.Empty(t, native.Invalid)

	gc := phalanx.Claims[0]
	assert.True(t, gc.Matches(&corev1.PodResourceClaim{Name: "channel", ResourceClaimName: ptr.To("cd-channel")}))
	assert.False(t, gc.Matches(&corev1.PodResourceClaim{Name: "other", ResourceClaimName: ptr.To("cd-channel")}), "another entry name")
	assert.False(t, gc.Matches(&corev1.PodResourceClaim{Name: "channel", ResourceClaimTemplateName: ptr.To("cd-channel")}), "a template of that name")

	tmpl := SpecOfPodGroup(&v1alpha1.PodGroup{Spec: v1alpha1.PodGroupSpec{ResourceClaims: []v1alpha1.PodGroupResourceClaim{
		{Name: "gpu", ResourceClaimTemplateName: ptr.To("gpu")}}}})
	assert.Contains(t, tmpl.Invalid, "spec.resourceClaims[gpu]")
	// kube-controller-manager makes an upstream PodGroup's claim from its
	// template and records it in the status.
	nativeTmpl := SpecOfNativePodGroup(&schedv1beta1.PodGroup{Spec: schedv1beta1.PodGroupSpec{ResourceClaims: []schedv1beta1.PodGroupResourceClaim{
		{Name: "gpu", ResourceClaimTemplateName: ptr.To("gpu")}}}})
	assert.Empty(t, nativeTmpl.Invalid)
	assert.Equal(t, "", nativeTmpl.Claims[0].Claim(), "not made yet")
	made := SpecOfNativePodGroup(&schedv1beta1.PodGroup{
		Spec: schedv1beta1.PodGroupSpec{ResourceClaims: []schedv1beta1.PodGroupResourceClaim{{Name: "gpu", ResourceClaimTemplateName: ptr.To("gpu")}}},
		Status: schedv1beta1.PodGroupStatus{ResourceClaimStatuses: []schedv1beta1.PodGroupResourceClaimStatus{
			{Name: "other", ResourceClaimName: ptr.To("x")}, {Name: "gpu", ResourceClaimName: ptr.To("pg-gpu-abc")}}},
	})
	assert.Equal(t, "pg-gpu-abc", made.Claims[0].Claim())
	assert.True(t, made.Claims[0].Matches(&corev1.PodResourceClaim{Name: "gpu", ResourceClaimTemplateName: ptr.To("gpu")}))
}
