package groups

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
)

func TestQuorum(t *testing.T) {
	P, A, B, F := Pending, Assumed, Bound, Finished
	tests := []struct {
		name    string
		setup   func(c *Cache)
		pod     *corev1.Pod // whose quorum is asked
		count   Counter
		wantOK  bool
		want    Shortfall
		missing *Key   // a *MissingError for this key is expected
		errHas  string // another error containing this is expected
	}{
		// Leaf gangs.
		{
			name: "a leaf gang with minCount existing members is satisfied",
			setup: func(c *Cache) {
				c.SetPodGroup(podGroup("g", 3, ""))
				addMembers(c, inPodGroup("g"), "g", P, P, P)
			},
			pod: newPod("g-0", inPodGroup("g")), count: ByExisting, wantOK: true,
		},
		{
			name: "a leaf gang one member short reports the leaf's shortfall in pods",
			setup: func(c *Cache) {
				c.SetPodGroup(podGroup("g", 3, ""))
				addMembers(c, inPodGroup("g"), "g", P, P)
			},
			pod: newPod("g-0", inPodGroup("g")), count: ByExisting,
			want: Shortfall{Key: pgKey("g"), Leaf: true, Have: 2, Need: 3},
		},
		{
			name: "ByExisting counts pending, assumed and bound members",
			setup: func(c *Cache) {
				c.SetPodGroup(podGroup("g", 3, ""))
				addMembers(c, inPodGroup("g"), "g", P, A, B)
			},
			pod: newPod("g-0", inPodGroup("g")), count: ByExisting, wantOK: true,
		},
		{
			name: "ByExisting does not count finished members",
			setup: func(c *Cache) {
				c.SetPodGroup(podGroup("g", 3, ""))
				addMembers(c, inPodGroup("g"), "g", P, B, F)
			},
			pod: newPod("g-0", inPodGroup("g")), count: ByExisting,
			want: Shortfall{Key: pgKey("g"), Leaf: true, Have: 2, Need: 3},
		},
		{
			name: "ByPlaced counts assumed and bound members but not pending ones",
			setup: func(c *Cache) {
				c.SetPodGroup(podGroup("g", 3, ""))
				addMembers(c, inPodGroup("g"), "g", P, A, B, F)
			},
			pod: newPod("g-0", inPodGroup("g")), count: ByPlaced,
			want: Shortfall{Key: pgKey("g"), Leaf: true, Have: 2, Need: 3},
		},
		{
			name: "ByPlaced is satisfied once minCount members are assumed or bound",
			setup: func(c *Cache) {
				c.SetPodGroup(podGroup("g", 2, ""))
				addMembers(c, inPodGroup("g"), "g", P, A, B)
			},
			pod: newPod("g-0", inPodGroup("g")), count: ByPlaced, wantOK: true,
		},
		{
			name: "ByBound counts only bound members",
			setup: func(c *Cache) {
				c.SetPodGroup(podGroup("g", 2, ""))
				addMembers(c, inPodGroup("g"), "g", A, A, B)
			},
			pod: newPod("g-0", inPodGroup("g")), count: ByBound,
			want: Shortfall{Key: pgKey("g"), Leaf: true, Have: 1, Need: 2},
		},
		{
			name: "a label gang needs its min-available",
			setup: func(c *Cache) {
				addMembers(c, inLabelGang("lg", "3"), "lg", B, B)
			},
			pod: newPod("lg-0", inLabelGang("lg", "3")), count: ByBound,
			want: Shortfall{Key: labelKey("lg"), Leaf: true, Have: 2, Need: 3},
		},
		{
			name: "a basic leaf with no placed member is short of one pod",
			setup: func(c *Cache) {
				c.SetPodGroup(podGroup("b", 0, ""))
				addMembers(c, inPodGroup("b"), "b", P, P)
			},
			pod: newPod("b-0", inPodGroup("b")), count: ByPlaced,
			want: Shortfall{Key: pgKey("b"), Leaf: true, Have: 0, Need: 1},
		},

		// Composite gangs over leaves.
		{
			name: "a composite gang with minGroupCount satisfied children is satisfied",
			setup: func(c *Cache) {
				c.SetComposite(composite("root", 2, ""))
				for _, n := range []string{"x", "y", "z"} {
					c.SetPodGroup(podGroup(n, 2, "root"))
				}
				addMembers(c, inPodGroup("x"), "x", B, B)
				addMembers(c, inPodGroup("y"), "y", B, A)
				addMembers(c, inPodGroup("z"), "z", B)
			},
			pod: newPod("x-0", inPodGroup("x")), count: ByPlaced, wantOK: true,
		},
		{
			name: "a composite gang with too few satisfied children reports its shortfall in groups",
			setup: func(c *Cache) {
				c.SetComposite(composite("root", 2, ""))
				for _, n := range []string{"x", "y", "z"} {
					c.SetPodGroup(podGroup(n, 2, "root"))
				}
				addMembers(c, inPodGroup("x"), "x", B, B)
				addMembers(c, inPodGroup("y"), "y", B, P)
				addMembers(c, inPodGroup("z"), "z", B)
			},
			pod: newPod("x-0", inPodGroup("x")), count: ByPlaced,
			want: Shortfall{Key: cpgKey("root"), Leaf: false, Have: 1, Need: 2},
		},
		{
			name: "the pod's own short leaf is reported before a short composite",
			setup: func(c *Cache) {
				c.SetComposite(composite("root", 2, ""))
				c.SetPodGroup(podGroup("x", 2, "root"))
				c.SetPodGroup(podGroup("y", 2, "root"))
				addMembers(c, inPodGroup("x"), "x", B, B)
				addMembers(c, inPodGroup("y"), "y", B)
			},
			pod: newPod("y-0", inPodGroup("y")), count: ByPlaced,
			want: Shortfall{Key: pgKey("y"), Leaf: true, Have: 1, Need: 2},
		},
		{
			name: "a deleted child PodGroup does not count toward its composite",
			setup: func(c *Cache) {
				c.SetComposite(composite("root", 2, ""))
				c.SetPodGroup(podGroup("x", 1, "root"))
				c.SetPodGroup(podGroup("y", 1, "root"))
				addMembers(c, inPodGroup("x"), "x", B)
				addMembers(c, inPodGroup("y"), "y", B)
				c.DeleteGroup(pgKey("y"))
			},
			pod: newPod("x-0", inPodGroup("x")), count: ByBound,
			want: Shortfall{Key: cpgKey("root"), Leaf: false, Have: 1, Need: 2},
		},
		{
			name: "a basic composite is satisfied by any satisfied child",
			setup: func(c *Cache) {
				c.SetComposite(composite("root", 0, ""))
				c.SetPodGroup(podGroup("x", 2, "root"))
				c.SetPodGroup(podGroup("y", 5, "root"))
				addMembers(c, inPodGroup("x"), "x", A, A)
				addMembers(c, inPodGroup("y"), "y", A)
			},
			pod: newPod("x-0", inPodGroup("x")), count: ByPlaced, wantOK: true,
		},
		{
			name: "a basic leaf under a gang composite counts as satisfied with one placed member",
			setup: func(c *Cache) {
				c.SetComposite(composite("root", 2, ""))
				c.SetPodGroup(podGroup("basic", 0, "root"))
				c.SetPodGroup(podGroup("gang", 2, "root"))
				addMembers(c, inPodGroup("basic"), "basic", A, P, P)
				addMembers(c, inPodGroup("gang"), "gang", A, B)
			},
			pod: newPod("gang-0", inPodGroup("gang")), count: ByPlaced, wantOK: true,
		},
		{
			name: "a basic leaf with nothing placed leaves its gang composite short",
			setup: func(c *Cache) {
				c.SetComposite(composite("root", 2, ""))
				c.SetPodGroup(podGroup("basic", 0, "root"))
				c.SetPodGroup(podGroup("gang", 2, "root"))
				addMembers(c, inPodGroup("basic"), "basic", P, P)
				addMembers(c, inPodGroup("gang"), "gang", A, B)
			},
			pod: newPod("gang-0", inPodGroup("gang")), count: ByPlaced,
			want: Shortfall{Key: cpgKey("root"), Leaf: false, Have: 1, Need: 2},
		},

		// Three levels: root(gang 2) ── mid(gang 2) ── a(gang 2), b(gang 1)
		//                           └─ c(gang 1)
		{
			name: "a three-level hierarchy is satisfied when every level reaches its minimum",
			setup: func(c *Cache) {
				threeLevels(c)
				addMembers(c, inPodGroup("a"), "a", B, B)
				addMembers(c, inPodGroup("b"), "b", B)
				addMembers(c, inPodGroup("c"), "c", B)
			},
			pod: newPod("a-0", inPodGroup("a")), count: ByBound, wantOK: true,
		},
		{
			name: "a short leaf makes the middle composite short before the root",
			setup: func(c *Cache) {
				threeLevels(c)
				addMembers(c, inPodGroup("a"), "a", B)
				addMembers(c, inPodGroup("b"), "b", B)
				addMembers(c, inPodGroup("c"), "c", B)
			},
			pod: newPod("b-0", inPodGroup("b")), count: ByBound,
			want: Shortfall{Key: cpgKey("mid"), Leaf: false, Have: 1, Need: 2},
		},
		{
			name: "a short middle composite makes the root short for a pod of a sibling leaf",
			setup: func(c *Cache) {
				threeLevels(c)
				addMembers(c, inPodGroup("a"), "a", B)
				addMembers(c, inPodGroup("b"), "b", B)
				addMembers(c, inPodGroup("c"), "c", B)
			},
			pod: newPod("c-0", inPodGroup("c")), count: ByBound,
			want: Shortfall{Key: cpgKey("root"), Leaf: false, Have: 1, Need: 2},
		},
		{
			name: "a four-level hierarchy is within the depth limit",
			setup: func(c *Cache) {
				c.SetComposite(composite("l1", 1, ""))
				c.SetComposite(composite("l2", 1, "l1"))
				c.SetComposite(composite("l3", 1, "l2"))
				c.SetPodGroup(podGroup("leaf", 1, "l3"))
				addMembers(c, inPodGroup("leaf"), "leaf", B)
			},
			pod: newPod("leaf-0", inPodGroup("leaf")), count: ByBound, wantOK: true,
		},
		{
			name: "a four-level hierarchy reports its root's shortfall",
			setup: func(c *Cache) {
				c.SetComposite(composite("l1", 2, ""))
				c.SetComposite(composite("l2", 1, "l1"))
				c.SetComposite(composite("l3", 1, "l2"))
				c.SetPodGroup(podGroup("leaf", 1, "l3"))
				addMembers(c, inPodGroup("leaf"), "leaf", B)
			},
			pod: newPod("leaf-0", inPodGroup("leaf")), count: ByBound,
			want: Shortfall{Key: cpgKey("l1"), Leaf: false, Have: 1, Need: 2},
		},

		// Pods outside groups and broken hierarchies.
		{
			name:   "a pod in no group is trivially satisfied",
			setup:  func(c *Cache) {},
			pod:    newPod("plain"),
			count:  ByPlaced,
			wantOK: true,
		},
		{
			name:   "a malformed attachment is an error",
			setup:  func(c *Cache) {},
			pod:    newPod("bad", inLabelGang("g", "abc")),
			count:  ByPlaced,
			errHas: "min-available",
		},
		{
			name: "a pod whose PodGroup does not exist gets a MissingError for it",
			setup: func(c *Cache) {
				addMembers(c, inPodGroup("ghost"), "g", B)
			},
			pod: newPod("g-0", inPodGroup("ghost")), count: ByBound,
			missing: &Key{Kind: PodGroupKind, Namespace: testNS, Name: "ghost"},
		},
		{
			name: "a leaf whose parent composite does not exist gets a MissingError for the parent",
			setup: func(c *Cache) {
				c.SetPodGroup(podGroup("g", 1, "ghost"))
				addMembers(c, inPodGroup("g"), "g", B)
			},
			pod: newPod("g-0", inPodGroup("g")), count: ByBound,
			missing: &Key{Kind: CompositeKind, Namespace: testNS, Name: "ghost"},
		},
		{
			name: "a missing grandparent is reported as missing",
			setup: func(c *Cache) {
				c.SetComposite(composite("mid", 1, "top"))
				c.SetPodGroup(podGroup("g", 1, "mid"))
				addMembers(c, inPodGroup("g"), "g", B)
			},
			pod: newPod("g-0", inPodGroup("g")), count: ByBound,
			missing: &Key{Kind: CompositeKind, Namespace: testNS, Name: "top"},
		},
		{
			name: "a five-level hierarchy is an error",
			setup: func(c *Cache) {
				c.SetComposite(composite("l1", 1, ""))
				c.SetComposite(composite("l2", 1, "l1"))
				c.SetComposite(composite("l3", 1, "l2"))
				c.SetComposite(composite("l4", 1, "l3"))
				c.SetPodGroup(podGroup("leaf", 1, "l4"))
				addMembers(c, inPodGroup("leaf"), "leaf", B)
			},
			pod: newPod("leaf-0", inPodGroup("leaf")), count: ByBound,
			errHas: "deeper than 4 levels or cyclic",
		},
		{
			name: "two composites that are each other's parent are an error, not a loop",
			setup: func(c *Cache) {
				c.SetComposite(composite("a", 1, "b"))
				c.SetComposite(composite("b", 1, "a"))
				c.SetPodGroup(podGroup("leaf", 1, "a"))
				addMembers(c, inPodGroup("leaf"), "leaf", B)
			},
			pod: newPod("leaf-0", inPodGroup("leaf")), count: ByBound,
			errHas: "deeper than 4 levels or cyclic",
		},
		{
			name: "a composite that is its own parent is an error, not a loop",
			setup: func(c *Cache) {
				c.SetComposite(composite("self", 1, "self"))
				c.SetPodGroup(podGroup("leaf", 1, "self"))
				addMembers(c, inPodGroup("leaf"), "leaf", B)
			},
			pod: newPod("leaf-0", inPodGroup("leaf")), count: ByBound,
			errHas: "deeper than 4 levels or cyclic",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := NewCache()
			tt.setup(c)
			ok, short, err := c.Quorum(tt.pod, tt.count)
			switch {
			case tt.missing != nil:
				var missing *MissingError
				require.ErrorAs(t, err, &missing)
				assert.Equal(t, *tt.missing, missing.Key)
				assert.False(t, ok)
			case tt.errHas != "":
				require.Error(t, err)
				assert.Contains(t, err.Error(), tt.errHas)
				assert.False(t, ok)
			default:
				require.NoError(t, err)
				assert.Equal(t, tt.wantOK, ok, "satisfied")
				assert.Equal(t, tt.want, short, "shortfall")
			}
			assertConsistent(t, c)
		})
	}
}

// threeLevels builds root(gang 2) ── mid(gang 2) ── a(gang 2), b(gang 1)
// and root ── c(gang 1).
func threeLevels(c *Cache) {
	c.SetComposite(composite("root", 2, ""))
	c.SetComposite(composite("mid", 2, "root"))
	c.SetPodGroup(podGroup("a", 2, "mid"))
	c.SetPodGroup(podGroup("b", 1, "mid"))
	c.SetPodGroup(podGroup("c", 1, "root"))
}

func TestSatisfied(t *testing.T) {
	tests := []struct {
		name       string
		setup      func(c *Cache)
		key        Key
		count      Counter
		wantOK     bool
		have, need int
	}{
		{
			name: "a basic composite with no satisfied child needs one",
			setup: func(c *Cache) {
				c.SetComposite(composite("root", 0, ""))
				c.SetPodGroup(podGroup("x", 2, "root"))
				addMembers(c, inPodGroup("x"), "x", Pending)
			},
			key: cpgKey("root"), count: ByPlaced, have: 0, need: 1,
		},
		{
			name: "a basic composite counts its satisfied children",
			setup: func(c *Cache) {
				c.SetComposite(composite("root", 0, ""))
				c.SetPodGroup(podGroup("x", 1, "root"))
				c.SetPodGroup(podGroup("y", 1, "root"))
				addMembers(c, inPodGroup("x"), "x", Bound)
				addMembers(c, inPodGroup("y"), "y", Bound)
			},
			key: cpgKey("root"), count: ByBound, wantOK: true, have: 2, need: 1,
		},
		{
			name: "a nested composite counts as one child of its parent",
			setup: func(c *Cache) {
				threeLevels(c)
				addMembers(c, inPodGroup("a"), "a", Bound, Bound)
				addMembers(c, inPodGroup("b"), "b", Bound)
			},
			key: cpgKey("root"), count: ByBound, have: 1, need: 2,
		},
		{
			name: "a leaf gang reports pods",
			setup: func(c *Cache) {
				c.SetPodGroup(podGroup("x", 3, ""))
				addMembers(c, inPodGroup("x"), "x", Bound, Assumed)
			},
			key: pgKey("x"), count: ByPlaced, have: 2, need: 3,
		},
		{
			name:  "an unknown group is not satisfied and needs nothing",
			setup: func(c *Cache) {},
			key:   pgKey("nope"), count: ByPlaced,
		},
		{
			name: "a composite in a parent cycle terminates",
			setup: func(c *Cache) {
				c.SetComposite(composite("a", 1, "b"))
				c.SetComposite(composite("b", 1, "a"))
			},
			key: cpgKey("a"), count: ByPlaced, have: 0, need: 1,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := NewCache()
			tt.setup(c)
			ok, have, need := c.Satisfied(tt.key, tt.count)
			assert.Equal(t, tt.wantOK, ok, "satisfied")
			assert.Equal(t, tt.have, have, "have")
			assert.Equal(t, tt.need, need, "need")
		})
	}
}

func TestMembersWithCyclicParents(t *testing.T) {
	c := NewCache()
	c.SetComposite(composite("a", 1, "b"))
	c.SetComposite(composite("b", 1, "a"))
	c.SetPodGroup(podGroup("leaf", 1, "a"))
	addMembers(c, inPodGroup("leaf"), "leaf", Pending, Bound)

	t.Run("members of a leaf under a cycle are the leaf's own", func(t *testing.T) {
		assert.Equal(t, []string{"leaf-0", "leaf-1"}, names(c.HierarchyMembersOf(pgKey("leaf"), Is(Pending, Bound))))
	})
	t.Run("members asked by a composite in the cycle are found without looping", func(t *testing.T) {
		assert.Equal(t, []string{"leaf-0", "leaf-1"}, names(c.HierarchyMembersOf(cpgKey("b"), Is(Pending, Bound))))
	})
}

// TestHierarchyBelowMaxDepth: a group below level MaxTreeDepth has an
// invalid chain of its own, and is not part of its root's tree, quorum or
// members either.
func TestHierarchyBelowMaxDepth(t *testing.T) {
	c := NewCache()
	c.SetComposite(composite("l1", 2, ""))
	c.SetComposite(composite("l2", 1, "l1"))
	c.SetComposite(composite("l3", 1, "l2"))
	c.SetComposite(composite("l4", 1, "l3"))
	c.SetPodGroup(podGroup("deep", 1, "l4"))
	c.SetPodGroup(podGroup("ok", 1, "l1"))
	deep := addMembers(c, inPodGroup("deep"), "deep", Bound)[0]
	ok := addMembers(c, inPodGroup("ok"), "ok", Bound)[0]

	t.Run("the group at level five has no valid chain", func(t *testing.T) {
		_, _, err := c.ChainOf(deep)
		require.Error(t, err)
		assert.Contains(t, err.Error(), "deeper than 4 levels or cyclic")
	})
	t.Run("the tree of the root stops at level four", func(t *testing.T) {
		tree, err := c.TreeOf(cpgKey("l1"))
		require.NoError(t, err)
		l4 := tree
		for _, name := range []string{"l2", "l3", "l4"} {
			require.NotEmpty(t, l4.Children)
			l4 = l4.Children[0] // composites sort before PodGroups
			require.Equal(t, cpgKey(name), l4.Key)
		}
		assert.Empty(t, l4.Children)
	})
	t.Run("the root's members leave out the level-five group's pods", func(t *testing.T) {
		assert.Equal(t, []string{"ok-0"}, names(c.HierarchyMembersOf(pgKey("ok"), Is(Bound))))
	})
	t.Run("the level-five group does not count toward the quorum", func(t *testing.T) {
		sat, have, need := c.Satisfied(cpgKey("l4"), ByBound)
		assert.Equal(t, []any{false, 0, 1}, []any{sat, have, need})
		q, short, err := c.Quorum(ok, ByBound)
		require.NoError(t, err)
		assert.False(t, q)
		assert.Equal(t, Shortfall{Key: cpgKey("l1"), Have: 1, Need: 2}, short)
	})
}
