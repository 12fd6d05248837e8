package groups

import (
	"flag"
	"fmt"
	"math/rand/v2"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
)

var concurrencySeed = flag.Uint64("groups.seed", 0, "seed for TestCacheConcurrentUse (0: time-based)")

// attachment variants a pod may take during the concurrency test.
type variant int

const (
	vNone      variant = iota // no group
	vMalformed                // label gang with min-available "abc"
	vLabelA                   // label gang lg-a, min 2
	vLabelB                   // label gang lg-b, min 3
	vGroupX                   // PodGroup x (under composite P at the end)
	vGroupY                   // PodGroup y (a root)
	vGroupZ                   // upstream PodGroup z (spec.schedulingGroup), never created: a placeholder
	numVariants
)

func (v variant) key() (Key, bool) {
	switch v {
	case vLabelA:
		return labelKey("lg-a"), true
	case vLabelB:
		return labelKey("lg-b"), true
	case vGroupX:
		return pgKey("x"), true
	case vGroupY:
		return pgKey("y"), true
	case vGroupZ:
		return nativeKey("z"), true
	}
	return Key{}, false
}

func (v variant) apply(p *corev1.Pod) {
	switch v {
	case vMalformed:
		inLabelGang("lg-a", "abc")(p)
	case vLabelA:
		inLabelGang("lg-a", "2")(p)
	case vLabelB:
		inLabelGang("lg-b", "3")(p)
	case vGroupX:
		inPodGroup("x")(p)
	case vGroupY:
		inPodGroup("y")(p)
	case vGroupZ:
		inSpecGroup("z")(p)
	}
}

// phase of a pod object as the informer delivers it.
type phase int

const (
	phUnbound phase = iota
	phBound
	phSucceeded
	phTerminating
	numPhases
)

// modelPod is what the cache must hold for one pod, kept by the one
// goroutine that owns the pod.
type modelPod struct {
	tracked bool
	key     Key
	state   State
}

func (m *modelPod) update(v variant, ph phase) {
	k, grouped := v.key()
	if !grouped {
		*m = modelPod{}
		return
	}
	prev := Pending
	if m.tracked && m.key == k {
		prev = m.state
	}
	next := Pending
	switch {
	case ph == phSucceeded || ph == phTerminating:
		next = Finished
	case ph == phBound:
		next = Bound
	case prev == Assumed:
		next = Assumed
	}
	*m = modelPod{tracked: true, key: k, state: next}
}

func (m *modelPod) mark(s State) {
	if m.tracked && (m.state == Pending || m.state == Assumed) {
		m.state = s
	}
}

// TestCacheConcurrentUse hammers the cache from pod writers (each owning
// its pods, so their final state is known), a group-object writer, and
// readers, then checks that every count is exactly what the final pod set
// implies. Run it with -race.
func TestCacheConcurrentUse(t *testing.T) {
	seed := *concurrencySeed
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	t.Logf("seed %d (rerun with -args -groups.seed=%d)", seed, seed)

	const (
		podWriters   = 8
		podsPerOwner = 6
		opsPerWriter = 600
		readers      = 4
		opsPerReader = 600
		groupOps     = 300
	)
	c := NewCache()
	models := make([][]modelPod, podWriters)
	podName := func(w, i int) string { return fmt.Sprintf("w%d-p%d", w, i) }

	var writers, all sync.WaitGroup
	for w := range podWriters {
		models[w] = make([]modelPod, podsPerOwner)
		writers.Add(1)
		all.Add(1)
		go func() {
			defer all.Done()
			defer writers.Done()
			rng := rand.New(rand.NewPCG(seed, uint64(w)))
			variants := make([]variant, podsPerOwner)
			for range opsPerWriter {
				i := rng.IntN(podsPerOwner)
				m := &models[w][i]
				switch op := rng.IntN(10); {
				case op < 4: // update, often keeping the attachment
					if rng.IntN(3) == 0 {
						variants[i] = variant(rng.IntN(int(numVariants)))
					}
					ph := phase(rng.IntN(int(numPhases)))
					p := newPod(podName(w, i))
					variants[i].apply(p)
					switch ph {
					case phBound:
						onNode("node-" + fmt.Sprint(w))(p)
					case phSucceeded:
						onNode("node-" + fmt.Sprint(w))(p)
						inPhase(corev1.PodSucceeded)(p)
					case phTerminating:
						terminating()(p)
					}
					c.AddOrUpdatePod(p)
					m.update(variants[i], ph)
				case op < 5:
					c.DeletePod(newPod(podName(w, i)))
					*m = modelPod{}
				case op < 8:
					c.MarkAssumedOn(newPod(podName(w, i)), "")
					m.mark(Assumed)
				default:
					c.MarkPending(newPod(podName(w, i)))
					m.mark(Pending)
				}
			}
		}()
	}

	all.Add(1)
	go func() { // group objects
		defer all.Done()
		rng := rand.New(rand.NewPCG(seed, 1000))
		for range groupOps {
			switch rng.IntN(7) {
			case 0:
				c.SetPodGroup(podGroup("x", 2, "P"))
			case 1:
				c.SetPodGroup(podGroup("x", 1, "Q"))
			case 2:
				c.DeleteGroup(pgKey("x"))
			case 3:
				c.SetPodGroup(podGroup("y", 1, ""))
			case 4:
				c.DeleteGroup(pgKey("y"))
			case 5:
				c.SetComposite(composite("P", 1, ""))
				c.SetComposite(composite("Q", 0, "P"))
			case 6:
				c.DeleteGroup(cpgKey("P"))
				c.DeleteGroup(cpgKey("Q"))
			}
		}
		c.SetComposite(composite("P", 2, ""))
		c.SetPodGroup(podGroup("x", 2, "P"))
		c.SetPodGroup(podGroup("y", 1, ""))
		c.DeleteGroup(cpgKey("Q"))
	}()

	keys := []Key{labelKey("lg-a"), labelKey("lg-b"), pgKey("x"), pgKey("y"), nativeKey("z"), cpgKey("P"), cpgKey("Q")}
	counters := []Counter{ByExisting, ByPlaced, ByBound}
	for r := range readers {
		all.Add(1)
		go func() {
			defer all.Done()
			rng := rand.New(rand.NewPCG(seed, uint64(2000+r)))
			for range opsPerReader {
				k := keys[rng.IntN(len(keys))]
				p := newPod(podName(rng.IntN(podWriters), rng.IntN(podsPerOwner)))
				variant(rng.IntN(int(numVariants))).apply(p)
				switch rng.IntN(6) {
				case 0:
					_, short, _ := c.Quorum(p, counters[rng.IntN(len(counters))])
					assert.GreaterOrEqual(t, short.Have, 0)
					assert.GreaterOrEqual(t, short.Need, 0)
				case 1:
					got := c.HierarchyMembersOf(k, Is(Pending, Assumed, Bound, Finished))
					assert.True(t, sort.SliceIsSorted(got, func(i, j int) bool { return got[i].Name < got[j].Name }), "Members sorted")
				case 2:
					c.HierarchyMembers(p, Is(Assumed))
				case 3:
					if info, ok := c.Get(k); ok {
						// One snapshot under one lock: the counts nest.
						assert.LessOrEqual(t, info.Bound, info.Placed, "%s: bound <= placed", k)
						assert.LessOrEqual(t, info.Placed, info.Existing, "%s: placed <= existing", k)
					}
				case 4:
					if ch, ok, err := c.ChainOf(p); ok && err == nil {
						assert.NotEmpty(t, ch)
					}
				case 5:
					c.Satisfied(k, counters[rng.IntN(len(counters))])
					c.RootOf(k)
					c.GroupOf(p.UID)
				}
			}
		}()
	}
	all.Wait()

	// The final pod set decides every count.
	assertConsistent(t, c)
	want := map[Key][numStates]int{}
	for w := range podWriters {
		for i, m := range models[w] {
			uid := newPod(podName(w, i)).UID
			k, ok := c.GroupOf(uid)
			if !assert.Equal(t, m.tracked, ok, "%s tracked", podName(w, i)) || !ok {
				continue
			}
			assert.Equal(t, m.key, k, "%s group", podName(w, i))
			s, _ := memberState(c, k, uid)
			assert.Equal(t, m.state, s, "%s state", podName(w, i))
			counts := want[m.key]
			counts[m.state]++
			want[m.key] = counts
		}
	}
	for _, k := range keys[:5] { // the leaves
		got, cached := stateCounts(c, k)
		exp, hasMembers := want[k]
		assert.Equal(t, exp, got, "counts of %s", k)
		switch k.Kind {
		case LabelKind:
			assert.Equal(t, hasMembers, cached, "label group %s is cached iff it has members", k)
			_, exists := c.Get(k)
			assert.Equal(t, hasMembers, exists, "label group %s exists iff it has members", k)
		case PodGroupKind:
			if k.Name == "z" {
				assert.Equal(t, hasMembers, cached, "placeholder %s is cached iff it has members", k)
				continue
			}
			info, exists := c.Get(k)
			if assert.True(t, exists, "%s was created last", k) {
				assert.Equal(t, exp[Pending]+exp[Assumed]+exp[Bound], info.Existing, "%s Existing", k)
				assert.Equal(t, exp[Assumed]+exp[Bound], info.Placed, "%s Placed", k)
				assert.Equal(t, exp[Bound], info.Bound, "%s Bound", k)
			}
		}
	}
	assert.False(t, tracked(c, cpgKey("Q")), "Q was deleted last and has no children")
	root, ok := c.RootOf(pgKey("x"))
	require.True(t, ok, "x hangs under P at the end")
	assert.Equal(t, cpgKey("P"), root)
}
