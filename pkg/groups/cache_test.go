package groups

import (
	"errors"
	"sort"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	v1alpha1 "github.com/phalanx-sched/phalanx/apis/scheduling/v1alpha1"
)

func TestCacheMemberState(t *testing.T) {
	base := newPod("p", inPodGroup("g"))
	add := func(opts ...podOpt) func(*Cache) {
		return func(c *Cache) { c.AddOrUpdatePod(with(base, opts...)) }
	}
	assume := func(c *Cache) { c.MarkAssumedOn(base, "") }
	unassume := func(c *Cache) { c.MarkPending(base) }

	tests := []struct {
		name  string
		steps []func(*Cache)
		want  State
	}{
		{"a new pod is Pending", []func(*Cache){add()}, Pending},
		{"MarkAssumedOn makes a pending pod Assumed", []func(*Cache){add(), assume}, Assumed},
		{"an update without a node keeps an assumed pod Assumed", []func(*Cache){add(), assume, add(withLabel("x", "y"))}, Assumed},
		{"an update with nodeName makes an assumed pod Bound", []func(*Cache){add(), assume, add(onNode("n1"))}, Bound},
		{"an update with nodeName makes a pending pod Bound", []func(*Cache){add(), add(onNode("n1"))}, Bound},
		{"a pod first seen with a nodeName is Bound", []func(*Cache){add(onNode("n1"))}, Bound},
		{"MarkPending returns an assumed pod to Pending", []func(*Cache){add(), assume, unassume}, Pending},
		{"MarkPending leaves a pending pod Pending", []func(*Cache){add(), unassume}, Pending},
		{"MarkPending does not undo a bind", []func(*Cache){add(), assume, add(onNode("n1")), unassume}, Bound},
		{"MarkAssumed leaves a bound pod Bound", []func(*Cache){add(onNode("n1")), assume}, Bound},
		{"a deletionTimestamp makes a bound pod Finished", []func(*Cache){add(onNode("n1")), add(onNode("n1"), terminating())}, Finished},
		{"a deletionTimestamp makes an assumed pod Finished", []func(*Cache){add(), assume, add(terminating())}, Finished},
		{"phase Succeeded makes a bound pod Finished", []func(*Cache){add(onNode("n1")), add(onNode("n1"), inPhase(corev1.PodSucceeded))}, Finished},
		{"phase Failed makes a bound pod Finished", []func(*Cache){add(onNode("n1")), add(onNode("n1"), inPhase(corev1.PodFailed))}, Finished},
		{"a pod first seen terminating is Finished", []func(*Cache){add(terminating())}, Finished},
		{"MarkAssumed does not revive a finished pod", []func(*Cache){add(inPhase(corev1.PodFailed)), assume}, Finished},
		{"MarkPending does not revive a finished pod", []func(*Cache){add(inPhase(corev1.PodSucceeded)), unassume}, Finished},
		{"a running pod is Bound", []func(*Cache){add(onNode("n1"), inPhase(corev1.PodRunning))}, Bound},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := NewCache()
			c.SetPodGroup(podGroup("g", 1, ""))
			for _, step := range tt.steps {
				step(c)
			}
			got, ok := memberState(c, pgKey("g"), base.UID)
			require.True(t, ok, "pod is not a member")
			assert.Equal(t, tt.want, got)

			var want [numStates]int
			want[tt.want] = 1
			counts, _ := stateCounts(c, pgKey("g"))
			assert.Equal(t, want, counts, "per-state counts")
			info, ok := c.Get(pgKey("g"))
			require.True(t, ok)
			assert.Equal(t, btoi(tt.want != Finished), info.Existing, "Existing")
			assert.Equal(t, btoi(tt.want == Assumed || tt.want == Bound), info.Placed, "Placed")
			assert.Equal(t, btoi(tt.want == Bound), info.Bound, "Bound")
			assertConsistent(t, c)
		})
	}
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

func TestCacheMarkIgnoresUntrackedPods(t *testing.T) {
	tests := []struct {
		name string
		pod  *corev1.Pod
	}{
		{"a pod in no group is not tracked by MarkAssumed", newPod("plain")},
		{"a grouped pod the informer has not delivered is not tracked by MarkAssumed", newPod("early", inPodGroup("g"))},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := NewCache()
			c.SetPodGroup(podGroup("g", 1, ""))
			c.MarkAssumedOn(tt.pod, "")
			c.MarkPending(tt.pod)
			_, ok := c.GroupOf(tt.pod.UID)
			assert.False(t, ok)
			counts, _ := stateCounts(c, pgKey("g"))
			assert.Equal(t, [numStates]int{}, counts)
			assertConsistent(t, c)
		})
	}
}

func TestCacheCounts(t *testing.T) {
	tests := []struct {
		name                         string
		states                       []State
		wantExisting, wantPlaced, wb int
	}{
		{"an empty group counts nothing", nil, 0, 0, 0},
		{"pending members exist but are not placed", []State{Pending, Pending}, 2, 0, 0},
		{"assumed and bound members are existing and placed", []State{Assumed, Bound}, 2, 2, 1},
		{"finished members count for nothing", []State{Finished, Finished, Bound}, 1, 1, 1},
		{"one member in every state", []State{Pending, Assumed, Bound, Finished}, 3, 2, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := NewCache()
			c.SetPodGroup(podGroup("g", 2, ""))
			addMembers(c, inPodGroup("g"), "p", tt.states...)
			info, ok := c.Get(pgKey("g"))
			require.True(t, ok)
			assert.Equal(t, tt.wantExisting, info.Existing, "Existing")
			assert.Equal(t, tt.wantPlaced, info.Placed, "Placed")
			assert.Equal(t, tt.wb, info.Bound, "Bound")
			assertConsistent(t, c)
		})
	}
}

func TestCacheLabelGroups(t *testing.T) {
	c := NewCache()
	early := t0.Add(-time.Hour)
	addMembers(c, inLabelGang("g", "3"), "p", Pending, Assumed)
	c.AddOrUpdatePod(newPod("old", inLabelGang("g", "3"), createdAt(early)))

	info, ok := c.Get(labelKey("g"))
	require.True(t, ok, "a label group exists as soon as it has a member")
	assert.True(t, info.Gang, "a label group is a gang")
	assert.Equal(t, 3, info.MinCount, "minCount comes from min-available")
	assert.Equal(t, 3, info.Existing)
	assert.Equal(t, 1, info.Placed)
	assert.Equal(t, early.UnixNano(), info.Created, "a label group is as old as its oldest member")

	ch, grouped, err := c.ChainOf(newPod("p-0", inLabelGang("g", "3")))
	require.NoError(t, err)
	require.True(t, grouped)
	assert.Len(t, ch, 1, "a label group is its own root")
	assertConsistent(t, c)
}

func TestCacheMovesPodsBetweenGroups(t *testing.T) {
	tests := []struct {
		name string
		// setup adds the pod "mover" (returned) and any other state.
		setup func(c *Cache) *corev1.Pod
		// update is the mover's new version.
		update     func(p *corev1.Pod) *corev1.Pod
		wantGroup  Key // zero Key: no longer tracked
		gone       []Key
		wantCounts map[Key][numStates]int
	}{
		{
			name: "a pod whose gang label changes leaves the old label group, which disappears",
			setup: func(c *Cache) *corev1.Pod {
				return addMembers(c, inLabelGang("a", "1"), "mover", Pending)[0]
			},
			update:     func(p *corev1.Pod) *corev1.Pod { return with(p, inLabelGang("b", "1")) },
			wantGroup:  labelKey("b"),
			gone:       []Key{labelKey("a")},
			wantCounts: map[Key][numStates]int{labelKey("b"): {Pending: 1}},
		},
		{
			name: "a label group that still has members stays when one of them moves",
			setup: func(c *Cache) *corev1.Pod {
				addMembers(c, inLabelGang("a", "2"), "stay", Bound)
				return addMembers(c, inLabelGang("a", "2"), "mover", Bound)[0]
			},
			update:    func(p *corev1.Pod) *corev1.Pod { return with(p, inLabelGang("b", "1")) },
			wantGroup: labelKey("b"),
			wantCounts: map[Key][numStates]int{
				labelKey("a"): {Bound: 1},
				labelKey("b"): {Bound: 1},
			},
		},
		{
			name: "a pod moving from a PodGroup to a label gang leaves the PodGroup in place",
			setup: func(c *Cache) *corev1.Pod {
				c.SetPodGroup(podGroup("x", 1, ""))
				return addMembers(c, inPodGroup("x"), "mover", Pending)[0]
			},
			update: func(p *corev1.Pod) *corev1.Pod {
				q := p.DeepCopy()
				delete(q.Labels, v1alpha1.PodGroupLabel)
				return with(q, inLabelGang("b", "2"))
			},
			wantGroup: labelKey("b"),
			wantCounts: map[Key][numStates]int{
				pgKey("x"):    {},
				labelKey("b"): {Pending: 1},
			},
		},
		{
			name: "a pod moving off a PodGroup that does not exist drops the placeholder",
			setup: func(c *Cache) *corev1.Pod {
				c.SetPodGroup(podGroup("y", 1, ""))
				return addMembers(c, inPodGroup("missing"), "mover", Pending)[0]
			},
			update:     func(p *corev1.Pod) *corev1.Pod { return with(p, inPodGroup("y")) },
			wantGroup:  pgKey("y"),
			gone:       []Key{pgKey("missing")},
			wantCounts: map[Key][numStates]int{pgKey("y"): {Pending: 1}},
		},
		{
			name: "a pod whose group label is removed is no longer tracked",
			setup: func(c *Cache) *corev1.Pod {
				return addMembers(c, inLabelGang("a", "1"), "mover", Assumed)[0]
			},
			update: func(p *corev1.Pod) *corev1.Pod {
				q := p.DeepCopy()
				q.Labels = nil
				return q
			},
			gone: []Key{labelKey("a")},
		},
		{
			name: "a pod whose attachment becomes malformed is no longer tracked",
			setup: func(c *Cache) *corev1.Pod {
				addMembers(c, inLabelGang("a", "2"), "stay", Pending)
				return addMembers(c, inLabelGang("a", "2"), "mover", Pending)[0]
			},
			update:     func(p *corev1.Pod) *corev1.Pod { return with(p, inLabelGang("a", "0")) },
			wantCounts: map[Key][numStates]int{labelKey("a"): {Pending: 1}},
		},
		{
			name: "a pod moving between PodGroups under one composite stays in the hierarchy",
			setup: func(c *Cache) *corev1.Pod {
				c.SetComposite(composite("root", 2, ""))
				c.SetPodGroup(podGroup("x", 1, "root"))
				c.SetPodGroup(podGroup("y", 1, "root"))
				return addMembers(c, inPodGroup("x"), "mover", Bound)[0]
			},
			update:    func(p *corev1.Pod) *corev1.Pod { return with(p, inPodGroup("y")) },
			wantGroup: pgKey("y"),
			wantCounts: map[Key][numStates]int{
				pgKey("x"): {},
				pgKey("y"): {Bound: 1},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := NewCache()
			mover := tt.setup(c)
			c.AddOrUpdatePod(tt.update(mover))

			k, ok := c.GroupOf(mover.UID)
			if tt.wantGroup == (Key{}) {
				assert.False(t, ok, "pod should not be tracked, is in %v", k)
			} else if assert.True(t, ok, "pod should be tracked") {
				assert.Equal(t, tt.wantGroup, k)
			}
			for _, g := range tt.gone {
				assert.False(t, tracked(c, g), "%s should be gone", g)
				_, ok := c.Get(g)
				assert.False(t, ok, "Get(%s)", g)
			}
			for g, want := range tt.wantCounts {
				got, ok := stateCounts(c, g)
				assert.True(t, ok, "%s should be cached", g)
				assert.Equal(t, want, got, "counts of %s", g)
			}
			assertConsistent(t, c)
		})
	}
}

func TestCacheDeletePod(t *testing.T) {
	tests := []struct {
		name       string
		setup      func(c *Cache) []*corev1.Pod
		delete     int // index into the pods setup returned
		group      Key
		wantCached bool
		wantExists bool
		wantCounts [numStates]int
	}{
		{
			name: "deleting one of two label gang members keeps the group",
			setup: func(c *Cache) []*corev1.Pod {
				return addMembers(c, inLabelGang("a", "2"), "p", Pending, Bound)
			},
			delete: 1, group: labelKey("a"),
			wantCached: true, wantExists: true, wantCounts: [numStates]int{Pending: 1},
		},
		{
			name: "deleting the last label gang member makes the group disappear",
			setup: func(c *Cache) []*corev1.Pod {
				return addMembers(c, inLabelGang("a", "2"), "p", Assumed)
			},
			delete: 0, group: labelKey("a"),
		},
		{
			name: "deleting a finished last member of a label gang makes the group disappear",
			setup: func(c *Cache) []*corev1.Pod {
				return addMembers(c, inLabelGang("a", "2"), "p", Finished)
			},
			delete: 0, group: labelKey("a"),
		},
		{
			name: "deleting the last member of an existing PodGroup keeps the PodGroup",
			setup: func(c *Cache) []*corev1.Pod {
				c.SetPodGroup(podGroup("x", 2, ""))
				return addMembers(c, inPodGroup("x"), "p", Bound)
			},
			delete: 0, group: pgKey("x"),
			wantCached: true, wantExists: true,
		},
		{
			name: "deleting the last member of a PodGroup that does not exist drops the placeholder",
			setup: func(c *Cache) []*corev1.Pod {
				return addMembers(c, inPodGroup("missing"), "p", Pending)
			},
			delete: 0, group: pgKey("missing"),
		},
		{
			name: "deleting an assumed member lowers the assumed count",
			setup: func(c *Cache) []*corev1.Pod {
				c.SetPodGroup(podGroup("x", 2, ""))
				return addMembers(c, inPodGroup("x"), "p", Assumed, Assumed, Pending)
			},
			delete: 0, group: pgKey("x"),
			wantCached: true, wantExists: true, wantCounts: [numStates]int{Pending: 1, Assumed: 1},
		},
		{
			name: "deleting a pod the cache never saw changes nothing",
			setup: func(c *Cache) []*corev1.Pod {
				c.SetPodGroup(podGroup("x", 2, ""))
				addMembers(c, inPodGroup("x"), "p", Bound)
				return []*corev1.Pod{newPod("stranger", inPodGroup("x"))}
			},
			delete: 0, group: pgKey("x"),
			wantCached: true, wantExists: true, wantCounts: [numStates]int{Bound: 1},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := NewCache()
			pods := tt.setup(c)
			require.Less(t, tt.delete, len(pods))
			c.DeletePod(pods[tt.delete])

			_, ok := c.GroupOf(pods[tt.delete].UID)
			assert.False(t, ok, "deleted pod is still tracked")
			assert.Equal(t, tt.wantCached, tracked(c, tt.group), "group cached")
			_, exists := c.Get(tt.group)
			assert.Equal(t, tt.wantExists, exists, "group exists")
			counts, _ := stateCounts(c, tt.group)
			assert.Equal(t, tt.wantCounts, counts)
			assertConsistent(t, c)
		})
	}
}

func TestCachePlaceholders(t *testing.T) {
	t.Run("a pod whose PodGroup does not exist yet is held in a placeholder until the PodGroup appears", func(t *testing.T) {
		c := NewCache()
		pod := addMembers(c, inPodGroup("later"), "p", Pending)[0]

		k, ok := c.GroupOf(pod.UID)
		require.True(t, ok, "the pod is tracked before its group exists")
		assert.Equal(t, pgKey("later"), k)
		_, ok = c.Get(pgKey("later"))
		assert.False(t, ok, "a placeholder is not reported by Get")

		_, grouped, err := c.ChainOf(pod)
		assert.True(t, grouped)
		var missing *MissingError
		require.ErrorAs(t, err, &missing)
		assert.Equal(t, pgKey("later"), missing.Key)
		assert.Contains(t, err.Error(), "PodGroup ns/later not found")

		c.SetPodGroup(podGroup("later", 1, ""))
		ch, grouped, err := c.ChainOf(pod)
		require.NoError(t, err)
		assert.True(t, grouped)
		require.Len(t, ch, 1)
		assert.Equal(t, pgKey("later"), ch.Leaf().Key)
		assert.Equal(t, 1, ch.Leaf().Existing, "the member held by the placeholder is counted")
		assertConsistent(t, c)
	})

	t.Run("a PodGroup whose parent composite does not exist yet resolves once the composite appears", func(t *testing.T) {
		c := NewCache()
		c.SetPodGroup(podGroup("leaf", 1, "parent"))
		pod := addMembers(c, inPodGroup("leaf"), "p", Pending)[0]

		_, _, err := c.ChainOf(pod)
		var missing *MissingError
		require.ErrorAs(t, err, &missing)
		assert.Equal(t, cpgKey("parent"), missing.Key)
		assert.Contains(t, err.Error(), "parent CompositePodGroup ns/parent not found")
		_, ok := c.RootOf(pgKey("leaf"))
		assert.False(t, ok, "a broken hierarchy has no root")

		c.SetComposite(composite("parent", 1, ""))
		ch, _, err := c.ChainOf(pod)
		require.NoError(t, err)
		require.Len(t, ch, 2)
		assert.Equal(t, pgKey("leaf"), ch.Leaf().Key)
		assert.Equal(t, cpgKey("parent"), ch.Root().Key)
		root, ok := c.RootOf(pgKey("leaf"))
		assert.True(t, ok)
		assert.Equal(t, cpgKey("parent"), root)
		assertConsistent(t, c)
	})

	t.Run("an ungrouped pod has no chain and no error", func(t *testing.T) {
		ch, grouped, err := NewCache().ChainOf(newPod("plain"))
		assert.NoError(t, err)
		assert.False(t, grouped)
		assert.Nil(t, ch)
	})

	t.Run("a malformed attachment is reported by ChainOf", func(t *testing.T) {
		_, grouped, err := NewCache().ChainOf(newPod("bad", inLabelGang("g", "abc")))
		assert.True(t, grouped)
		require.Error(t, err)
		assert.False(t, errors.As(err, new(*MissingError)), "not a missing-group error")
	})
}

func TestCacheChainInfo(t *testing.T) {
	c := NewCache()
	never := v1alpha1.PreemptNever
	root := composite("root", 1, "")
	root.Spec.Priority = ptr.To(int32(42))
	root.Spec.PreemptionPolicy = &never
	root.Spec.PriorityClassName = "high"
	c.SetComposite(root)
	leaf := podGroup("leaf", 3, "root")
	leaf.Spec.SchedulingConstraints = &v1alpha1.PodGroupSchedulingConstraints{
		Topology: []v1alpha1.TopologyConstraint{{Key: "topology.kubernetes.io/zone"}},
	}
	leaf.Spec.DisruptionMode = &v1alpha1.DisruptionMode{All: &v1alpha1.AllDisruptionMode{}}
	c.SetPodGroup(leaf)
	pod := addMembers(c, inPodGroup("leaf"), "p", Bound)[0]

	ch, _, err := c.ChainOf(pod)
	require.NoError(t, err)
	require.Len(t, ch, 2)

	l := ch.Leaf()
	assert.Equal(t, pgKey("leaf"), l.Key)
	assert.Equal(t, leaf.UID, l.UID)
	assert.True(t, l.Gang)
	assert.Equal(t, 3, l.MinCount)
	assert.Equal(t, "topology.kubernetes.io/zone", l.TopologyKey)
	assert.True(t, l.DisruptionAll)
	assert.Equal(t, 1, l.Bound)

	r := ch.Root()
	assert.Equal(t, cpgKey("root"), r.Key)
	assert.Equal(t, 1, r.MinGroupCount)
	assert.Equal(t, "high", r.PriorityClassName)
	require.NotNil(t, r.Priority)
	assert.Equal(t, int32(42), *r.Priority)
	require.NotNil(t, r.PreemptionPolicy)
	assert.Equal(t, corev1.PreemptNever, *r.PreemptionPolicy, "Never maps to the core preemption policy")
	assert.Equal(t, t0.UnixNano(), r.Created)
}

func TestCacheSetParent(t *testing.T) {
	t.Run("a PodGroup that changes parent leaves its old composite", func(t *testing.T) {
		c := NewCache()
		c.SetComposite(composite("old", 1, ""))
		c.SetComposite(composite("new", 1, ""))
		c.SetPodGroup(podGroup("leaf", 1, "old"))
		addMembers(c, inPodGroup("leaf"), "p", Bound)
		sat, _, _ := c.Satisfied(cpgKey("old"), ByBound)
		require.True(t, sat, "precondition: the old parent is satisfied through the leaf")

		c.SetPodGroup(podGroup("leaf", 1, "new"))
		sat, have, _ := c.Satisfied(cpgKey("old"), ByBound)
		assert.False(t, sat, "old parent no longer counts the leaf")
		assert.Equal(t, 0, have)
		sat, _, _ = c.Satisfied(cpgKey("new"), ByBound)
		assert.True(t, sat, "new parent counts the leaf")
		assertConsistent(t, c)
	})

	t.Run("a placeholder parent is dropped when its only child moves away", func(t *testing.T) {
		c := NewCache()
		c.SetPodGroup(podGroup("leaf", 1, "ghost"))
		require.True(t, tracked(c, cpgKey("ghost")), "precondition: placeholder parent")
		c.SetPodGroup(podGroup("leaf", 1, ""))
		assert.False(t, tracked(c, cpgKey("ghost")))
		assertConsistent(t, c)
	})
}

func TestCacheDeleteGroup(t *testing.T) {
	t.Run("a deleted PodGroup keeps its members tracked and regains them when recreated", func(t *testing.T) {
		c := NewCache()
		c.SetPodGroup(podGroup("x", 2, ""))
		pods := addMembers(c, inPodGroup("x"), "p", Assumed, Bound)

		c.DeleteGroup(pgKey("x"))
		_, ok := c.Get(pgKey("x"))
		assert.False(t, ok, "Get reports the group gone")
		k, ok := c.GroupOf(pods[0].UID)
		assert.True(t, ok)
		assert.Equal(t, pgKey("x"), k)
		_, _, err := c.ChainOf(pods[0])
		var missing *MissingError
		assert.ErrorAs(t, err, &missing)
		sat, _, err := c.Quorum(pods[0], ByExisting)
		assert.False(t, sat)
		assert.ErrorAs(t, err, &missing)

		c.SetPodGroup(podGroup("x", 2, ""))
		info, ok := c.Get(pgKey("x"))
		require.True(t, ok)
		assert.Equal(t, 2, info.Placed, "member states survive the group's absence")
		assertConsistent(t, c)
	})

	t.Run("a deleted PodGroup without members is dropped along with a placeholder parent", func(t *testing.T) {
		c := NewCache()
		c.SetPodGroup(podGroup("x", 2, "ghost"))
		c.DeleteGroup(pgKey("x"))
		assert.False(t, tracked(c, pgKey("x")))
		assert.False(t, tracked(c, cpgKey("ghost")))
		assertConsistent(t, c)
	})

	t.Run("a deleted composite breaks its children's chains but keeps them", func(t *testing.T) {
		c := NewCache()
		c.SetComposite(composite("root", 1, ""))
		c.SetPodGroup(podGroup("x", 1, "root"))
		pod := addMembers(c, inPodGroup("x"), "p", Pending)[0]

		c.DeleteGroup(cpgKey("root"))
		_, _, err := c.ChainOf(pod)
		var missing *MissingError
		require.ErrorAs(t, err, &missing)
		assert.Equal(t, cpgKey("root"), missing.Key)
		assert.True(t, tracked(c, cpgKey("root")), "kept as a placeholder while it has children")

		c.DeleteGroup(pgKey("x"))
		c.DeletePod(pod)
		assert.False(t, tracked(c, pgKey("x")))
		assert.False(t, tracked(c, cpgKey("root")), "placeholder dropped with its last child")
		assertConsistent(t, c)
	})

	t.Run("deleting a group the cache does not know is harmless", func(t *testing.T) {
		c := NewCache()
		c.DeleteGroup(pgKey("nope"))
		assert.False(t, tracked(c, pgKey("nope")))
	})

	t.Run("deleting composites that are each other's parent leaves nothing behind", func(t *testing.T) {
		c := NewCache()
		c.SetComposite(composite("a", 1, "b"))
		c.SetComposite(composite("b", 1, "a"))
		c.SetComposite(composite("self", 1, "self"))
		c.DeleteGroup(cpgKey("a"))
		c.DeleteGroup(cpgKey("b"))
		c.DeleteGroup(cpgKey("self"))
		assert.False(t, tracked(c, cpgKey("a")))
		assert.False(t, tracked(c, cpgKey("b")))
		assert.False(t, tracked(c, cpgKey("self")))
		assertConsistent(t, c)
	})

	t.Run("a deleted composite leaves its parent's hierarchy with its subtree", func(t *testing.T) {
		c := NewCache()
		c.SetComposite(composite("root", 1, ""))
		c.SetComposite(composite("mid", 1, "root"))
		c.SetPodGroup(podGroup("x", 1, "mid"))
		addMembers(c, inPodGroup("x"), "x", Pending)
		require.Equal(t, []string{"x-0"}, names(c.HierarchyMembersOf(cpgKey("root"), Is(Pending))), "precondition")

		c.DeleteGroup(cpgKey("mid"))
		assert.Empty(t, c.HierarchyMembersOf(cpgKey("root"), Is(Pending)), "the deleted composite's leaves are not root's members")
		assert.True(t, tracked(c, cpgKey("mid")), "kept as a placeholder while it has children")
		assertConsistent(t, c)
	})
}

func TestCacheMembers(t *testing.T) {
	// root (composite) ── mid (composite) ── a (PodGroup): a-b2 bound, a-a1 pending
	//                  │                  └─ b (PodGroup): b-c assumed, b-x finished
	//                  └─ c (PodGroup): c-0 bound
	// other (PodGroup, unrelated root): o-0 pending
	build := func() *Cache {
		c := NewCache()
		c.SetComposite(composite("root", 2, ""))
		c.SetComposite(composite("mid", 1, "root"))
		c.SetPodGroup(podGroup("a", 2, "mid"))
		c.SetPodGroup(podGroup("b", 1, "mid"))
		c.SetPodGroup(podGroup("c", 1, "root"))
		c.SetPodGroup(podGroup("other", 1, ""))
		c.AddOrUpdatePod(newPod("a-b2", inPodGroup("a"), onNode("n")))
		c.AddOrUpdatePod(newPod("a-a1", inPodGroup("a")))
		bc := newPod("b-c", inPodGroup("b"))
		c.AddOrUpdatePod(bc)
		c.MarkAssumedOn(bc, "")
		c.AddOrUpdatePod(newPod("b-x", inPodGroup("b"), inPhase(corev1.PodFailed)))
		c.AddOrUpdatePod(newPod("c-0", inPodGroup("c"), onNode("n")))
		c.AddOrUpdatePod(newPod("o-0", inPodGroup("other")))
		return c
	}
	all := Is(Pending, Assumed, Bound, Finished)
	tests := []struct {
		name string
		key  Key
		keep func(State) bool
		want []string
	}{
		{"members of a deep leaf include every leaf under its root, sorted by name", pgKey("a"), all, []string{"a-a1", "a-b2", "b-c", "b-x", "c-0"}},
		{"members asked by the root key are the same", cpgKey("root"), all, []string{"a-a1", "a-b2", "b-c", "b-x", "c-0"}},
		{"members asked by a middle composite cover the whole hierarchy", cpgKey("mid"), all, []string{"a-a1", "a-b2", "b-c", "b-x", "c-0"}},
		{"a filter on Pending keeps only pending members", pgKey("c"), Is(Pending), []string{"a-a1"}},
		{"a filter on Assumed and Bound keeps the placed members", pgKey("b"), Is(Assumed, Bound), []string{"a-b2", "b-c", "c-0"}},
		{"a filter on Finished keeps only finished members", pgKey("a"), Is(Finished), []string{"b-x"}},
		{"an empty filter keeps nothing", pgKey("a"), Is(), nil},
		{"an unrelated root has only its own members", pgKey("other"), all, []string{"o-0"}},
		{"an unknown group has no members", pgKey("unknown"), all, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := build()
			assert.Equal(t, tt.want, names(c.HierarchyMembersOf(tt.key, tt.keep)))
		})
	}

	t.Run("SubtreeMembers stops at the group asked for", func(t *testing.T) {
		c := build()
		assert.Equal(t, []string{"a-a1", "a-b2", "b-c", "b-x"}, names(c.SubtreeMembers(cpgKey("mid"), all)), "a middle composite: its own leaves only")
		assert.Equal(t, []string{"a-a1", "a-b2"}, names(c.SubtreeMembers(pgKey("a"), all)), "a leaf: its own members only")
		assert.Equal(t, []string{"a-a1", "a-b2", "b-c", "b-x", "c-0"}, names(c.SubtreeMembers(cpgKey("root"), all)), "the root: the whole hierarchy")
		assert.Equal(t, []string{"b-c"}, names(c.SubtreeMembers(cpgKey("mid"), Is(Assumed))))
		assert.Nil(t, c.SubtreeMembers(pgKey("unknown"), all))
	})

	t.Run("the per-state listings read one state, in no order, over the same scope", func(t *testing.T) {
		c := build()
		sorted := func(pods []*corev1.Pod) []string {
			out := names(pods)
			sort.Strings(out)
			return out
		}
		for _, tt := range []struct {
			key   Key
			state State
			whole []string // HierarchyMembersIn
			sub   []string // SubtreeMembersIn
		}{
			{pgKey("a"), Bound, []string{"a-b2", "c-0"}, []string{"a-b2"}},
			{cpgKey("mid"), Assumed, []string{"b-c"}, []string{"b-c"}},
			{cpgKey("root"), Pending, []string{"a-a1"}, []string{"a-a1"}},
			{pgKey("c"), Finished, []string{"b-x"}, nil},
			{pgKey("unknown"), Pending, nil, nil},
		} {
			assert.Equal(t, tt.whole, sorted(c.HierarchyMembersIn(tt.key, tt.state)), "HierarchyMembersIn(%s, %d)", tt.key, tt.state)
			assert.Equal(t, tt.sub, sorted(c.SubtreeMembersIn(tt.key, tt.state)), "SubtreeMembersIn(%s, %d)", tt.key, tt.state)
		}
	})

	t.Run("HierarchyMembers resolves the pod's group and returns the same members", func(t *testing.T) {
		c := build()
		got := c.HierarchyMembers(newPod("a-a1", inPodGroup("a")), Is(Bound))
		assert.Equal(t, []string{"a-b2", "c-0"}, names(got))
	})

	t.Run("HierarchyMembers of an ungrouped or malformed pod is empty", func(t *testing.T) {
		c := build()
		assert.Empty(t, c.HierarchyMembers(newPod("plain"), Is(Bound)))
		assert.Empty(t, c.HierarchyMembers(newPod("bad", inLabelGang("a", "-1")), Is(Bound)))
	})

	t.Run("members of a leaf whose parent is missing are the leaf's own", func(t *testing.T) {
		c := NewCache()
		c.SetPodGroup(podGroup("a", 1, "ghost"))
		c.SetPodGroup(podGroup("b", 1, "ghost"))
		addMembers(c, inPodGroup("a"), "a", Pending)
		addMembers(c, inPodGroup("b"), "b", Pending)
		assert.Equal(t, []string{"a-0"}, names(c.HierarchyMembersOf(pgKey("a"), Is(Pending))))
	})

	t.Run("members are sorted by namespace before name", func(t *testing.T) {
		// Sorting is by namespace/name; within one hierarchy every pod
		// shares the namespace, so the order is by name across leaves.
		c := NewCache()
		c.SetComposite(composite("root", 1, ""))
		c.SetPodGroup(podGroup("z", 1, "root"))
		c.SetPodGroup(podGroup("y", 1, "root"))
		for _, n := range []string{"p10", "p2", "p1", "a"} {
			c.AddOrUpdatePod(newPod(n, inPodGroup("z")))
			c.AddOrUpdatePod(newPod("y-"+n, inPodGroup("y")))
		}
		assert.Equal(t, []string{"a", "p1", "p10", "p2", "y-a", "y-p1", "y-p10", "y-p2"}, names(c.HierarchyMembersOf(pgKey("y"), Is(Pending))))
	})
}

func names(pods []*corev1.Pod) []string {
	var out []string
	for _, p := range pods {
		out = append(out, p.Name)
	}
	return out
}
