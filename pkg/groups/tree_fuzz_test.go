package groups

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"

	v1alpha1 "github.com/phalanx-sched/phalanx/apis/scheduling/v1alpha1"
)

// A fuzzed hierarchy is a string of 3-byte objects:
//
//	byte 0: the object. An upper-case letter is a CompositePodGroup, a
//	        lower-case one a PodGroup; the letter names it (a to f, wrapping).
//	byte 1: the parent: a letter names CompositePodGroup a to f; '!' on a
//	        PodGroup means the object is never created (its pods dangle);
//	        anything else ('.') is no parent.
//	byte 2: a PodGroup's pods: the low two bits are how many ('0' to '3'),
//	        bit 2 makes them bound ('4' to '7'), bit 3 makes the gang
//	        minCount 2 instead of 1. A composite's minGroupCount is the
//	        byte mod 3 ('0' basic, '1', '2').
//
// So "A..BA.cB2" is root A, composite B under it, PodGroup c under B with
// two pending pods; "AB.BA.cA1" is a 2-cycle with a leaf hanging from it.
// The seed corpus is in testdata/fuzz/FuzzGroupTree.
// The first definition of a name wins; a trailing partial object is ignored.
type treeObj struct {
	key     Key
	parent  string
	missing bool // a PodGroup whose pods exist but whose object does not
	min     int32
	pods    int
	bound   bool
}

// treeItem is one thing an informer delivers: a group object or a pod.
type treeItem struct {
	obj *treeObj
	pod *corev1.Pod
}

const maxTreeObjs = 12

func letter(b byte) string { return string(rune('a' + (int(b&0x1f)+31)%32%6)) }

func isLetter(b byte) bool { b |= 0x20; return b >= 'a' && b <= 'z' }

func decodeTree(spec string) []*treeObj {
	var objs []*treeObj
	seen := map[Key]bool{}
	for i := 0; i+3 <= len(spec) && len(objs) < maxTreeObjs; i += 3 {
		b0, b1, b2 := spec[i], spec[i+1], spec[i+2]
		o := &treeObj{}
		if b0&0x20 == 0 {
			o.key = cpgKey(letter(b0))
			o.min = int32(b2 % 3)
		} else {
			o.key = pgKey(letter(b0))
			o.pods, o.bound = int(b2&3), b2&4 != 0
			o.min = 1 + int32(b2>>3&1)
			o.missing = b1 == '!'
		}
		if isLetter(b1) {
			o.parent = letter(b1)
		}
		if seen[o.key] {
			continue
		}
		seen[o.key] = true
		objs = append(objs, o)
	}
	return objs
}

// items lists every object and pod in definition order.
func treeItems(objs []*treeObj) []treeItem {
	var items []treeItem
	for _, o := range objs {
		if !o.missing {
			items = append(items, treeItem{obj: o})
		}
		for i := 0; i < o.pods; i++ {
			p := newPod(fmt.Sprintf("%s-%d", o.key.Name, i), inPodGroup(o.key.Name))
			if o.bound {
				p.Spec.NodeName = "node-1"
			}
			items = append(items, treeItem{pod: p})
		}
	}
	return items
}

func (it treeItem) add(c *Cache) {
	switch {
	case it.pod != nil:
		c.AddOrUpdatePod(it.pod)
	case it.obj.key.Kind == CompositeKind:
		c.SetComposite(composite(it.obj.key.Name, it.obj.min, it.obj.parent))
	default:
		c.SetPodGroup(podGroup(it.obj.key.Name, it.obj.min, it.obj.parent))
	}
}

func (it treeItem) remove(c *Cache) {
	if it.pod != nil {
		c.DeletePod(it.pod)
		return
	}
	c.DeleteGroup(it.obj.key)
}

func (it treeItem) String() string {
	if it.pod != nil {
		return "pod " + it.pod.Name
	}
	return fmt.Sprintf("%s (parent %q, min %d)", it.obj.key, it.obj.parent, it.obj.min)
}

func buildCache(items []treeItem) *Cache {
	c := NewCache()
	for _, it := range items {
		it.add(c)
	}
	return c
}

// world is what the objects and pods that exist say, computed from scratch:
// the oracle the incrementally maintained cache is checked against.
type world struct {
	objs map[Key]*treeObj
	pods map[Key][]*corev1.Pod // by leaf, sorted by name
}

func worldOf(items []treeItem) world {
	w := world{objs: map[Key]*treeObj{}, pods: map[Key][]*corev1.Pod{}}
	for _, it := range items {
		if it.pod != nil {
			k := pgKey(it.pod.Labels[v1alpha1.PodGroupLabel])
			w.pods[k] = append(w.pods[k], it.pod)
			continue
		}
		w.objs[it.obj.key] = it.obj
	}
	for _, ps := range w.pods {
		sort.Slice(ps, func(i, j int) bool { return ps[i].Name < ps[j].Name })
	}
	return w
}

// chainResult is what the documented rules say about a group's hierarchy.
type chainResult struct {
	chain   []Key // leaf (or the group asked about) first, root last
	missing *Key  // the first group on the way up that does not exist
	invalid bool  // more than MaxTreeDepth levels, or a cycle
}

func (w world) chain(k Key) chainResult {
	o := w.objs[k]
	if o == nil {
		return chainResult{missing: &k}
	}
	r := chainResult{chain: []Key{k}}
	seen := map[Key]bool{k: true}
	for o.parent != "" {
		pk := cpgKey(o.parent)
		if seen[pk] || len(r.chain) >= v1alpha1.MaxTreeDepth {
			return chainResult{invalid: true}
		}
		seen[pk] = true
		if o = w.objs[pk]; o == nil {
			return chainResult{missing: &pk}
		}
		r.chain = append(r.chain, pk)
	}
	return r
}

func (r chainResult) ok() bool   { return !r.invalid && r.missing == nil }
func (r chainResult) root() Key  { return r.chain[len(r.chain)-1] }
func (w world) valid(k Key) bool { return w.chain(k).ok() }

// children are the existing groups that name k as parent and whose own
// hierarchy is valid, sorted the way TreeOf sorts them.
func (w world) children(k Key) []Key {
	var out []Key
	for ck, o := range w.objs {
		if o.parent == k.Name && k.Kind == CompositeKind && w.valid(ck) {
			out = append(out, ck)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].String() < out[j].String() })
	return out
}

// satisfied is the quorum of a group with a valid hierarchy, from scratch,
// counting the pods that counts says count.
func (w world) satisfied(k Key, counts func(*corev1.Pod) bool) (bool, int, int) {
	o := w.objs[k]
	if k.Kind != CompositeKind {
		n := 0
		for _, p := range w.pods[k] {
			if counts(p) {
				n++
			}
		}
		return n >= int(o.min), n, int(o.min)
	}
	sat := 0
	for _, ck := range w.children(k) {
		if ok, _, _ := w.satisfied(ck, counts); ok {
			sat++
		}
	}
	if o.min == 0 {
		return sat > 0, sat, 1
	}
	return sat >= int(o.min), sat, int(o.min)
}

// podsUnder lists the pods of every leaf in the valid tree under k.
func (w world) podsUnder(k Key) []string {
	if k.Kind != CompositeKind {
		return podNames(w.pods[k])
	}
	var out []string
	for _, ck := range w.children(k) {
		out = append(out, w.podsUnder(ck)...)
	}
	sort.Strings(out)
	return out
}

func podNames(ps []*corev1.Pod) []string {
	out := []string{}
	for _, p := range ps {
		out = append(out, p.Name)
	}
	return out
}

// universe is every key a query could be asked about.
func universe(objs []*treeObj) []Key {
	set := map[Key]bool{}
	for _, o := range objs {
		set[o.key] = true
		if o.parent != "" {
			set[cpgKey(o.parent)] = true
		}
	}
	keys := make([]Key, 0, len(set))
	for k := range set {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i].String() < keys[j].String() })
	return keys
}

// counters are the quorum counters checked, each with which of the fuzzed
// pods (never finished or assumed) it counts.
var counters = []struct {
	name string
	c    Counter
	pod  func(*corev1.Pod) bool
}{
	{"existing", ByExisting, func(*corev1.Pod) bool { return true }},
	{"bound", ByBound, func(p *corev1.Pod) bool { return p.Spec.NodeName != "" }},
}

// FuzzGroupTree builds a cache from random PodGroup and CompositePodGroup
// hierarchies (cycles, chains deeper than MaxTreeDepth, missing parents and
// groups, pods before their groups) delivered in a random order, then
// removes a random part of them, and checks:
//   - nothing panics, and ChainOf, RootOf, TreeOf, Quorum, Satisfied and
//     Members terminate;
//   - a cycle or a chain of more than MaxTreeDepth levels is an error, a
//     missing group or parent is a *MissingError naming it, and a valid
//     chain is exactly the parent links up to the root;
//   - TreeOf of any group with a valid hierarchy is the tree of its root,
//     holding exactly the groups whose own hierarchy is valid and ends at
//     that root, each once, never deeper than MaxTreeDepth, with each
//     leaf's pods;
//   - Quorum, Satisfied and Members agree with the same from-scratch view;
//   - the cache's own bookkeeping is consistent;
//   - delivering the same objects in another order gives the same answers;
//     deleting some gives the answers of never having added them; deleting
//     all leaves the cache empty.
func FuzzGroupTree(f *testing.F) {
	f.Add("A..BA.cB2", uint64(0), uint64(0))
	f.Fuzz(func(t *testing.T, spec string, order, drop uint64) {
		objs := decodeTree(spec)
		items := treeItems(objs)
		rng := rand.New(rand.NewPCG(order, drop))
		perm := make([]treeItem, len(items))
		for i, j := range rng.Perm(len(items)) {
			perm[i] = items[j]
		}
		keys := universe(objs)
		w := worldOf(items)

		c := buildCache(perm)
		assertConsistent(t, c)
		checkTree(t, c, w, keys)
		got := dumpCache(c, keys, items)

		reversed := slices.Clone(perm)
		slices.Reverse(reversed)
		for _, order := range [][]treeItem{items, reversed} {
			other := buildCache(order)
			require.Equal(t, got, dumpCache(other, keys, items),
				"the same objects in another order give other answers; orders:\n%v\n%v", perm, order)
		}

		var kept, dropped []treeItem
		for i, it := range perm {
			if drop>>(i%64)&1 == 1 {
				dropped = append(dropped, it)
			} else {
				kept = append(kept, it)
			}
		}
		for _, it := range dropped {
			it.remove(c)
		}
		assertConsistent(t, c)
		checkTree(t, c, worldOf(kept), keys)
		require.Equal(t, dumpCache(buildCache(kept), keys, items), dumpCache(c, keys, items),
			"deleting %v after adding %v is not the same as never adding them", dropped, perm)

		for _, it := range kept {
			it.remove(c)
		}
		c.mu.RLock()
		defer c.mu.RUnlock()
		require.Empty(t, c.pods, "pods left after every pod was deleted")
		require.Empty(t, c.groups, "groups left after every object and pod was deleted")
	})
}

// checkTree compares every query against the from-scratch view w.
func checkTree(t *testing.T, c *Cache, w world, keys []Key) {
	t.Helper()
	for _, k := range keys {
		want := w.chain(k)

		root, ok := c.RootOf(k)
		require.Equal(t, want.ok(), ok, "RootOf(%s) ok", k)
		if ok {
			assert.Equal(t, want.root(), root, "RootOf(%s)", k)
		}

		tree, err := c.TreeOf(k)
		checkChainErr(t, want, err, "TreeOf(%s)", k)
		if err == nil {
			seen := map[Key]bool{}
			checkSubtree(t, w, tree, 0, seen)
			var valid []Key
			for ok := range w.objs {
				if r := w.chain(ok); r.ok() && r.root() == want.root() {
					valid = append(valid, ok)
				}
			}
			assert.ElementsMatch(t, valid, slices.Collect(maps.Keys(seen)),
				"TreeOf(%s) must hold exactly the groups with a valid hierarchy under root %s", k, want.root())
			assert.Equal(t, orEmpty(w.podsUnder(want.root())), orEmpty(names(c.HierarchyMembersOf(k, Is(Pending, Assumed, Bound, Finished)))),
				"Members(%s) must be the pods of every leaf under its root", k)
		} else {
			// A broken hierarchy still answers, from k down, without a pod twice.
			got := names(c.HierarchyMembersOf(k, Is(Pending, Assumed, Bound, Finished)))
			assert.Len(t, got, len(slices.Compact(slices.Clone(got))), "Members(%s) repeats a pod", k)
		}

		for _, ctr := range counters {
			sat, have, need := c.Satisfied(k, ctr.c)
			if want.ok() {
				wsat, whave, wneed := w.satisfied(k, ctr.pod)
				assert.Equal(t, []any{wsat, whave, wneed}, []any{sat, have, need}, "Satisfied(%s, %s)", k, ctr.name)
			} else {
				assert.GreaterOrEqual(t, have, 0)
			}
		}

		if k.Kind != PodGroupKind {
			continue
		}
		probe := newPod("probe", inPodGroup(k.Name))
		ch, grouped, err := c.ChainOf(probe)
		require.True(t, grouped)
		checkChainErr(t, want, err, "ChainOf(%s)", k)
		if err == nil {
			var got []Key
			for _, info := range ch {
				got = append(got, info.Key)
			}
			assert.Equal(t, want.chain, got, "ChainOf(%s) must follow the parent links", k)
		}
		for _, ctr := range counters {
			ok, short, err := c.Quorum(probe, ctr.c)
			checkChainErr(t, want, err, "Quorum(%s, %s)", k, ctr.name)
			if err != nil {
				assert.False(t, ok, "Quorum(%s) is not met for a broken hierarchy", k)
				continue
			}
			wantOK, wantShort := true, Shortfall{}
			for _, lk := range want.chain {
				if sat, have, need := w.satisfied(lk, ctr.pod); !sat {
					wantOK, wantShort = false, Shortfall{Key: lk, Leaf: lk.Kind != CompositeKind, Have: have, Need: need}
					break
				}
			}
			assert.Equal(t, wantOK, ok, "Quorum(%s, %s)", k, ctr.name)
			assert.Equal(t, wantShort, short, "Quorum(%s, %s) shortfall", k, ctr.name)
		}
	}
}

func checkChainErr(t *testing.T, want chainResult, err error, format string, args ...any) {
	t.Helper()
	what := fmt.Sprintf(format, args...)
	switch {
	case want.invalid:
		if assert.Error(t, err, "%s: a cycle or a hierarchy deeper than %d levels must be an error", what, v1alpha1.MaxTreeDepth) {
			assert.Contains(t, err.Error(), "deeper than 4 levels or cyclic", what)
		}
	case want.missing != nil:
		var missing *MissingError
		if assert.ErrorAs(t, err, &missing, "%s: a missing group must be a MissingError", what) {
			assert.Equal(t, *want.missing, missing.Key, what)
		}
	default:
		assert.NoError(t, err, what)
	}
}

// checkSubtree checks one node of a TreeOf answer and records it in seen.
func checkSubtree(t *testing.T, w world, tree *Tree, depth int, seen map[Key]bool) {
	t.Helper()
	k := tree.Key
	require.False(t, seen[k], "%s appears twice in one tree", k)
	seen[k] = true
	require.Less(t, depth, v1alpha1.MaxTreeDepth, "%s sits below level %d", k, v1alpha1.MaxTreeDepth)
	o := w.objs[k]
	require.NotNil(t, o, "the tree holds %s, which does not exist", k)
	if k.Kind != CompositeKind {
		assert.Empty(t, tree.Children)
		got := []string{}
		for _, m := range tree.Members {
			got = append(got, m.Pod.Name)
		}
		assert.Equal(t, podNames(w.pods[k]), got, "members of %s", k)
		return
	}
	assert.Empty(t, tree.Members)
	for _, ch := range tree.Children {
		checkSubtree(t, w, ch, depth+1, seen)
	}
}

func orEmpty(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// dumpCache renders everything a caller can learn from c about keys and
// the pods of items, plus which groups it tracks, for comparing caches.
func dumpCache(c *Cache, keys []Key, items []treeItem) string {
	var b strings.Builder
	c.mu.RLock()
	tracked := make([]string, 0, len(c.groups))
	for k, g := range c.groups {
		tracked = append(tracked, fmt.Sprintf("%s exists=%v children=%d members=%d", k, g.Exists, len(g.children), len(g.members)))
	}
	c.mu.RUnlock()
	sort.Strings(tracked)
	fmt.Fprintf(&b, "tracked: %s\n", strings.Join(tracked, "; "))
	for _, k := range keys {
		info, ok := c.Get(k)
		fmt.Fprintf(&b, "%s: get=%v %+v\n", k, ok, info)
		root, ok := c.RootOf(k)
		fmt.Fprintf(&b, "  root=%v %s\n", ok, root)
		tree, err := c.TreeOf(k)
		fmt.Fprintf(&b, "  tree=%s err=%v\n", treeString(tree), err)
		for _, ctr := range counters {
			sat, have, need := c.Satisfied(k, ctr.c)
			fmt.Fprintf(&b, "  satisfied(%s)=%v %d/%d\n", ctr.name, sat, have, need)
		}
		fmt.Fprintf(&b, "  members=%v\n", names(c.HierarchyMembersOf(k, Is(Pending, Assumed, Bound, Finished))))
		if k.Kind == PodGroupKind {
			probe := newPod("probe", inPodGroup(k.Name))
			ch, _, err := c.ChainOf(probe)
			fmt.Fprintf(&b, "  chain=%+v err=%v\n", ch, err)
			ok, short, err := c.Quorum(probe, ByExisting)
			fmt.Fprintf(&b, "  quorum=%v %+v err=%v\n", ok, short, err)
		}
	}
	for _, it := range items {
		if it.pod != nil {
			k, ok := c.GroupOf(it.pod.UID)
			fmt.Fprintf(&b, "pod %s: %v %s\n", it.pod.Name, ok, k)
		}
	}
	return b.String()
}

func treeString(t *Tree) string {
	if t == nil {
		return "nil"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "(%s %+v", t.Key, t.Info)
	for _, m := range t.Members {
		fmt.Fprintf(&b, " %s:%d@%s", m.Pod.Name, m.State, m.Node)
	}
	for _, ch := range t.Children {
		b.WriteString(" " + treeString(ch))
	}
	b.WriteString(")")
	return b.String()
}
