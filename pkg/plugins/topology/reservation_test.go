package topology

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
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

func TestExpectedFit(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	running := func(name string, cpu int64, prio int32, startAgo, ads int64) *corev1.Pod {
		p := podWith(prio, &ads)
		p.Name = name
		p.Spec.Containers = []corev1.Container{{Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: *resourceQuantity(cpu)}}}}
		st := metav1.NewTime(now.Add(-time.Duration(startAgo) * time.Second))
		p.Status.StartTime = &st
		return p
	}
	pods := []*corev1.Pod{
		running("a", 4, 0, 10, 60),  // ends in 50s
		running("b", 4, 0, 10, 30),  // ends in 20s
		running("c", 4, 0, 0, 1000), // ends in 1000s
	}
	never := func(*corev1.Pod) bool { return false }
	short := placement.Resources{corev1.ResourceCPU: 8000}
	if got := expectedFit(now, short, pods, never); !got.Equal(now.Add(50 * time.Second)) {
		t.Fatalf("8 cpu free at %v, want +50s", got.Sub(now))
	}
	if got := expectedFit(now, placement.Resources{corev1.ResourceCPU: 16000}, pods, never); !got.IsZero() {
		t.Fatalf("16 cpu never free, got %v", got)
	}
	if got := expectedFit(now, placement.Resources{}, pods, never); !got.Equal(now) {
		t.Fatalf("nothing short: %v", got)
	}
	// A preemptible pod counts as free at once.
	c := func(p *corev1.Pod) bool { return p.Name == "c" }
	if got := expectedFit(now, short, pods, c); !got.Equal(now.Add(20 * time.Second)) {
		t.Fatalf("with c preemptible: %v, want +20s", got.Sub(now))
	}
}

func resourceQuantity(cpu int64) *resource.Quantity {
	return resource.NewQuantity(cpu, resource.DecimalSI)
}

func TestReservationArgs(t *testing.T) {
	a := ReservationArgs{AfterSeconds: 60}
	if err := a.defaults(); err != nil || a.MaxHoldSeconds != 900 || a.MaxSharePercent != 50 || !*a.Backfill {
		t.Fatalf("defaults: %+v %v", a, err)
	}
	for _, bad := range []ReservationArgs{{AfterSeconds: -1}, {MaxHoldSeconds: -1}, {MaxSharePercent: 101}} {
		if err := bad.defaults(); err == nil {
			t.Errorf("%+v accepted", bad)
		}
	}
}
