package groups

import (
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"

	v1alpha1 "github.com/phalanx-sched/phalanx/apis/scheduling/v1alpha1"
)

// queuedPod is what the test knows of a pod it fed the cache.
type queuedPod struct {
	pod *corev1.Pod
	// state as the cache should have it; scheduled: bound through a
	// binding the cache saw in the pod's current group, or found bound in
	// the initial list.
	state     State
	scheduled bool
}

// sortModel is a cache fed at random, beside what the test expects of it.
type sortModel struct {
	t    *testing.T
	rng  *rand.Rand
	c    *Cache
	pods map[string]*queuedPod
	// parent of each PodGroup, "" for a root; minimum of each.
	parent map[string]string
	min    map[string]int32
	next   int
}

var (
	sortLeaves     = []string{"g0", "g1", "g2", "g3"}
	sortComposites = []string{"c0", "c1"}
)

func at(minutes int) time.Time { return t0.Add(time.Duration(minutes) * time.Minute) }

func (m *sortModel) setLeaf(name string) {
	pg := podGroup(name, m.min[name], m.parent[name])
	pg.CreationTimestamp.Time = at(10 * (int(name[1]) - '0'))
	m.c.SetPodGroup(pg)
}

// step applies one random change, as an informer or the scheduler would.
func (m *sortModel) step() string {
	// Map order is random; sorted names keep a seed replayable.
	names := sortedNames(m.pods)
	pick := func(keep func(*queuedPod) bool) *queuedPod {
		var from []*queuedPod
		for _, n := range names {
			if p := m.pods[n]; keep(p) {
				from = append(from, p)
			}
		}
		if len(from) == 0 {
			return nil
		}
		return from[m.rng.IntN(len(from))]
	}
	anyPod := func(*queuedPod) bool { return true }
	switch op := m.rng.IntN(10); op {
	case 0, 1: // a new pending pod
		m.next++
		p := newPod(fmt.Sprintf("p%d", m.next), inPodGroup(sortLeaves[m.rng.IntN(len(sortLeaves))]), createdAt(at(m.rng.IntN(100))))
		m.pods[p.Name] = &queuedPod{pod: p, state: Pending}
		m.c.AddOrUpdatePod(p)
		return "create pending " + p.Name
	case 2: // a pod created bound: with spec.nodeName, or found at start
		m.next++
		p := newPod(fmt.Sprintf("p%d", m.next), inPodGroup(sortLeaves[m.rng.IntN(len(sortLeaves))]), createdAt(at(m.rng.IntN(100))), onNode("n"))
		listed := m.rng.IntN(2) == 0
		m.pods[p.Name] = &queuedPod{pod: p, state: Bound, scheduled: listed}
		if listed {
			m.c.AddListedPod(p)
			return "list bound " + p.Name
		}
		m.c.AddOrUpdatePod(p)
		return "create bound " + p.Name
	case 3: // a reservation made or undone
		p := pick(func(p *queuedPod) bool { return p.state == Pending || p.state == Assumed })
		if p == nil {
			return "no reservation"
		}
		if p.state == Pending {
			p.state = Assumed
			m.c.MarkAssumedOn(p.pod, "n")
			return "assume " + p.pod.Name
		}
		p.state = Pending
		m.c.MarkPending(p.pod)
		return "unreserve " + p.pod.Name
	case 4: // a binding
		p := pick(func(p *queuedPod) bool { return p.state == Pending || p.state == Assumed })
		if p == nil {
			return "no binding"
		}
		p.pod = with(p.pod, onNode("n"))
		p.state, p.scheduled = Bound, true
		m.c.AddOrUpdatePod(p.pod)
		return "bind " + p.pod.Name
	case 5: // finished
		p := pick(func(p *queuedPod) bool { return p.state != Finished })
		if p == nil {
			return "none to finish"
		}
		p.pod = with(p.pod, inPhase(corev1.PodSucceeded))
		p.state = Finished
		m.c.AddOrUpdatePod(p.pod)
		return "finish " + p.pod.Name
	case 6: // deleted
		p := pick(anyPod)
		if p == nil {
			return "none to delete"
		}
		delete(m.pods, p.pod.Name)
		m.c.DeletePod(p.pod)
		return "delete " + p.pod.Name
	case 7: // relabelled into another group
		p := pick(anyPod)
		if p == nil {
			return "none to relabel"
		}
		to := sortLeaves[m.rng.IntN(len(sortLeaves))]
		if to == leafOf(p) {
			return "no relabel"
		}
		p.pod = with(p.pod, inPodGroup(to))
		switch p.state {
		case Assumed:
			// A new group starts from the API object: no reservation.
			p.state = Pending
		case Bound:
			p.scheduled = false
		}
		m.c.AddOrUpdatePod(p.pod)
		return "relabel " + p.pod.Name + " into " + to
	default: // a leaf moves under another parent, or to none
		leaf := sortLeaves[m.rng.IntN(len(sortLeaves))]
		parents := append([]string{""}, sortComposites...)
		m.parent[leaf] = parents[m.rng.IntN(len(parents))]
		m.setLeaf(leaf)
		return "move " + leaf + " under " + strconv.Quote(m.parent[leaf])
	}
}

func leafOf(p *queuedPod) string { return p.pod.Labels[v1alpha1.PodGroupLabel] }

// want is the SortFacts the model expects for p.
func (m *sortModel) want(p *queuedPod) SortFacts {
	leaf := leafOf(p)
	rootName, created := leaf, at(10*(int(leaf[1])-'0'))
	if par := m.parent[leaf]; par != "" {
		rootName, created = par, at(5*(int(par[1])-'0'))
	}
	root := pgKey(rootName)
	if m.parent[leaf] != "" {
		root = cpgKey(rootName)
	}
	f := SortFacts{Root: root, RootName: root.String(), Created: max(created.UnixNano(), p.pod.CreationTimestamp.UnixNano())}
	bound, scheduled := 0, 0
	for _, o := range m.pods {
		l := leafOf(o)
		if o.state == Pending && (l == leaf || (m.parent[leaf] != "" && m.parent[l] == m.parent[leaf])) {
			f.Created = max(f.Created, o.pod.CreationTimestamp.UnixNano())
		}
		if l == leaf && o.state == Bound {
			bound++
			if o.scheduled {
				scheduled++
			}
		}
	}
	f.Partial = scheduled > 0 && bound < int(m.min[leaf])
	return f
}

// TestSortFactsMatchAModel: after every change of a cache fed at random,
// each member's queue time (its hierarchy's youngest pending member, never
// before the root or the pod itself) and partial mark (members the
// scheduler bound, fewer than the minimum) are what a recount from
// scratch gives, remembered or not. PHALANX_SORT_SEED=<seed> replays one
// seed.
func TestSortFactsMatchAModel(t *testing.T) {
	seeds := []uint64{1, 2, 3, 4, 5, 6, 7, 8}
	if s := os.Getenv("PHALANX_SORT_SEED"); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		require.NoError(t, err)
		seeds = []uint64{v}
	}
	for _, seed := range seeds {
		t.Run(fmt.Sprintf("a cache fed at random with seed %d agrees with a recount", seed), func(t *testing.T) {
			m := &sortModel{t: t, rng: rand.New(rand.NewPCG(seed, 0)), c: NewCache(), pods: map[string]*queuedPod{},
				parent: map[string]string{}, min: map[string]int32{}}
			for i, c := range sortComposites {
				cpg := composite(c, 1, "")
				cpg.CreationTimestamp.Time = at(5 * i)
				m.c.SetComposite(cpg)
			}
			for _, l := range sortLeaves {
				m.min[l] = int32(2 + m.rng.IntN(2))
				m.setLeaf(l)
			}
			var log []string
			for range 400 {
				log = append(log, m.step())
				for _, n := range sortedNames(m.pods) {
					p := m.pods[n]
					want := m.want(p)
					for pass := range 2 { // computed, then remembered
						got, grouped := m.c.SortFactsOf(p.pod)
						require.True(t, grouped, "%s", p.pod.Name)
						if !assert.Equal(t, want, got, "pod %s, pass %d, after %v", p.pod.Name, pass, log[max(0, len(log)-8):]) {
							t.FailNow()
						}
					}
				}
			}
		})
	}
}

func sortedNames(pods map[string]*queuedPod) []string {
	out := make([]string, 0, len(pods))
	for n := range pods {
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}

// TestSortKeyGoesWithTheObjectItWasComputedFrom: the queue's remembered
// key answers only for the pod object it was computed from. Once the
// informer has a newer object of the member (it bound), the entry must not
// keep the old one: it held every member's pending version beside the
// bound one for as long as the member lived.
func TestSortKeyGoesWithTheObjectItWasComputedFrom(t *testing.T) {
	c := NewCache()
	pending := &corev1.Pod{}
	pending.Namespace, pending.Name, pending.UID = "ns", "m-0", "m-0"
	pending.Labels = map[string]string{v1alpha1.LightweightNameLabel: "g", v1alpha1.LightweightMinAvailableLabel: "1"}
	c.AddOrUpdatePod(pending)
	first, grouped := c.SortFactsOf(pending)
	require.True(t, grouped)
	require.Contains(t, c.sortKeys, pending.UID, "the queue's key is remembered")

	bound := pending.DeepCopy()
	bound.Spec.NodeName = "n"
	c.AddOrUpdatePod(bound)
	assert.NotContains(t, c.sortKeys, pending.UID, "the key of the pending object is gone with it")

	again, grouped := c.SortFactsOf(bound)
	require.True(t, grouped)
	assert.Equal(t, first.Root, again.Root)
	c.AddOrUpdatePod(bound)
	assert.Same(t, bound, c.sortKeys[bound.UID].pod, "an update with the same object keeps its key")
}
