package topology

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"

	"github.com/phalanx-sched/phalanx/pkg/groups"
	"github.com/phalanx-sched/phalanx/pkg/placement"
)

func resvFor(name string, prio int32, created int64) *reservation {
	return &reservation{root: groups.Key{Dialect: groups.Phalanx, Kind: groups.PodGroupKind, Namespace: "ns", Name: name}, key: "rack", priority: prio, created: created}
}

func choice(domain string, nodes ...string) domainChoice {
	return domainChoice{domain: domain, nodes: sets.New(nodes...)}
}

func TestBookNeverOverlapsAndRanks(t *testing.T) {
	b := newBook()
	low := resvFor("low", 0, 1)
	if ok, _, why := b.offer(low, []domainChoice{choice("r1", "a", "b")}, 10); !ok {
		t.Fatalf("low refused: %s", why)
	}
	// An equal-priority, younger gang may not take r1: it gets r2.
	young := resvFor("young", 0, 2)
	ok, displaced, _ := b.offer(young, []domainChoice{choice("r1", "a", "b"), choice("r2", "c", "d")}, 10)
	if !ok || young.domain != "r2" || len(displaced) != 0 {
		t.Fatalf("young: ok=%v domain=%s displaced=%d", ok, young.domain, len(displaced))
	}
	// A higher-priority gang takes r1 over.
	high := resvFor("high", 10, 3)
	ok, displaced, _ = b.offer(high, []domainChoice{choice("r1", "a", "b")}, 10)
	if !ok || len(displaced) != 1 || displaced[0] != low {
		t.Fatalf("high: ok=%v displaced=%v", ok, displaced)
	}
	if b.get(low.root) != nil || b.byNode["a"] != high {
		t.Fatal("low still holds r1")
	}
	if b.heldNodes() != 4 {
		t.Fatalf("held %d nodes, want 4", b.heldNodes())
	}
}

func TestBookShare(t *testing.T) {
	b := newBook()
	a := resvFor("a", 0, 1)
	if ok, _, _ := b.offer(a, []domainChoice{choice("r1", "n1", "n2")}, 3); !ok {
		t.Fatal("a refused")
	}
	c := resvFor("c", 0, 2)
	ok, _, why := b.offer(c, []domainChoice{choice("r2", "n3", "n4")}, 3)
	if ok || !strings.Contains(why, "share") {
		t.Fatalf("c over the share: ok=%v why=%q", ok, why)
	}
	// A higher-priority gang displaces the lowest-ranked hold to fit.
	h := resvFor("h", 5, 3)
	ok, displaced, _ := b.offer(h, []domainChoice{choice("r2", "n3", "n4")}, 3)
	if !ok || len(displaced) != 1 || displaced[0] != a {
		t.Fatalf("h: ok=%v displaced=%v", ok, displaced)
	}
}

func podWith(prio int32, ads *int64) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns"}, Spec: corev1.PodSpec{Priority: &prio, ActiveDeadlineSeconds: ads}}
}

func TestBackfillAdmission(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	r := resvFor("big", 10, 1)
	r.preempts = true
	r.expected = now.Add(10 * time.Minute)
	i := func(v int64) *int64 { return &v }
	cases := []struct {
		name string
		pod  *corev1.Pod
		want bool
	}{
		{"ends before the gang", podWith(10, i(300)), true},
		{"ends after the gang", podWith(10, i(3600)), false},
		{"no runtime bound", podWith(10, nil), false},
		{"absurd runtime bound", podWith(10, i(-5)), false},
		{"absurdly long", podWith(10, i(1<<40)), false},
		{"preemptible by the gang", podWith(1, nil), true},
		{"higher priority than the gang", podWith(20, nil), true},
	}
	for _, c := range cases {
		ok, why := r.admits(c.pod, now, true)
		if ok != c.want {
			t.Errorf("%s: admits=%v (%s), want %v", c.name, ok, why, c.want)
		}
	}
	if ok, _ := r.admits(podWith(10, i(300)), now, false); ok {
		t.Error("backfill off admitted a runtime-bound pod")
	}
	r.preempts = false
	if ok, _ := r.admits(podWith(1, nil), now, true); ok {
		t.Error("a gang that never preempts admitted a lower-priority pod without a bound")
	}
	r.expected = time.Time{}
	if ok, _ := r.admits(podWith(10, i(1)), now, true); ok {
		t.Error("admitted a runtime-bound pod while the gang's start is unknown")
	}
}

func TestParseHolding(t *testing.T) {
	r := resvFor("big", 0, 1)
	r.key, r.domain, r.nodes = "topology.phalanx.dev/rack", "zone-0-rack-1", sets.New("a")
	r.short = placement.Resources{corev1.ResourceCPU: 4000}
	k, d, ok := parseHolding(r.message())
	if !ok || k != r.key || d != r.domain {
		t.Fatalf("parse %q: %s %s %v", r.message(), k, d, ok)
	}
	if _, _, ok := parseHolding("garbage"); ok {
		t.Fatal("parsed garbage")
	}
}

func TestRuntimeBound(t *testing.T) {
	start := metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	v := int64(60)
	p := podWith(0, &v)
	p.Status.StartTime = &start
	if got := podEnd(p); !got.Equal(start.Add(time.Minute)) {
		t.Fatalf("end %v", got)
	}
	p.Spec.ActiveDeadlineSeconds = nil
	if !podEnd(p).IsZero() {
		t.Fatal("end without a bound")
	}
}
