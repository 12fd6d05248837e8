package reservation

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"

	"github.com/phalanx-sched/phalanx/pkg/placement"
)

func TestArgsDefault(t *testing.T) {
	a := Args{AfterSeconds: 60}
	require.NoError(t, a.Default())
	assert.Equal(t, int64(900), a.MaxHoldSeconds)
	assert.Equal(t, int32(50), a.MaxSharePercent)
	assert.True(t, a.BackfillOn())
	off := false
	a = Args{Backfill: &off}
	require.NoError(t, a.Default())
	assert.False(t, a.BackfillOn(), "backfill: false kept")
	cases := []struct {
		args Args
		err  string
	}{
		{Args{AfterSeconds: -1}, "reservation.afterSeconds=-1 is negative"},
		{Args{MaxHoldSeconds: -1}, "reservation.maxHoldSeconds=-1: use a positive number"},
		{Args{MaxSharePercent: 101}, "reservation.maxSharePercent=101: use 1 to 100"},
		{Args{MaxSharePercent: -1}, "reservation.maxSharePercent=-1: use 1 to 100"},
	}
	for _, c := range cases {
		assert.EqualError(t, c.args.Default(), c.err)
	}
	assert.Equal(t, 4, Args{MaxSharePercent: 50}.MaxNodes(9), "the share rounds down")
}

// TestAfterFor: the group's annotation only lengthens the configured wait
// (the annotation is the group owner's, the threshold the
// administrator's); -1 never holds; what is not a whole number is ignored.
func TestAfterFor(t *testing.T) {
	const after = 600 * time.Second
	cases := []struct {
		annotation string // "": none
		want       time.Duration
	}{
		{"", after},
		{"0", after},
		{"300", after},
		{"600", after},
		{"1200", 1200 * time.Second},
		{"-1", -1},
		{"-5", -1},
		{"soon", after},
		{"1.5", after},
		{"99999999999999999999", after}, // not an int64: ignored
		{"9223372036854775807", -1},     // overflows a duration: never
	}
	for _, c := range cases {
		var ann map[string]string
		if c.annotation != "" {
			ann = map[string]string{ReserveAfterAnnotation: c.annotation}
		}
		assert.Equal(t, c.want, Args{AfterSeconds: 600}.AfterFor(ann), "annotation %q", c.annotation)
	}
}

func TestPodEnd(t *testing.T) {
	p := podWith("p", 0, secs(60))
	assert.True(t, PodEnd(p).IsZero(), "not started")
	start := metav1.NewTime(t0)
	p.Status.StartTime = &start
	assert.Equal(t, t0.Add(time.Minute), PodEnd(p))
	p.Spec.ActiveDeadlineSeconds = nil
	assert.True(t, PodEnd(p).IsZero(), "without a bound")
	p.Spec.ActiveDeadlineSeconds = secs(8 * 24 * 3600)
	assert.True(t, PodEnd(p).IsZero(), "an absurd bound")
}

// TestExpectedFit: the pods on the held nodes end in order (evictable ones
// at once) until the shortfall is free; unknown when the known ends cannot
// free it.
func TestExpectedFit(t *testing.T) {
	ending := func(in time.Duration, milli int64) Running {
		return Running{End: t0.Add(in), Requests: cpu(milli)}
	}
	a, b, c := ending(50*time.Second, 4000), ending(20*time.Second, 4000), ending(1000*time.Second, 4000)
	evicted := c
	evicted.Evictable = true
	unknown := Running{Requests: cpu(4000)}
	long := ending(-time.Hour, 4000) // should have ended already
	// Evictable, but protected by a minimum runtime for 30s more; and one
	// whose runtime bound ends before its protection does.
	shielded := Running{Requests: cpu(4000), Evictable: true, ProtectedUntil: t0.Add(30 * time.Second)}
	endsFirst := shielded
	endsFirst.End = t0.Add(10 * time.Second)
	lapsed := shielded
	lapsed.ProtectedUntil = t0.Add(-time.Second)
	cases := []struct {
		name  string
		short placement.Resources
		pods  []Running
		want  time.Duration // from now; -1: unknown
		// protected is when the protection it waits for ends, from now;
		// 0: none.
		protected time.Duration
	}{
		{"two pods must end: the later of the first two", cpu(8000), []Running{a, b, c}, 50 * time.Second, 0},
		{"more than every known end frees", cpu(16000), []Running{a, b, c}, -1, 0},
		{"nothing short: now", placement.Resources{}, []Running{a}, 0, 0},
		{"nothing short but zeros: now", cpu(0), nil, 0, 0},
		{"an evictable pod frees at once", cpu(8000), []Running{a, b, evicted}, 20 * time.Second, 0},
		{"a pod without a known end frees nothing", cpu(8000), []Running{a, unknown}, -1, 0},
		{"a pod past its end frees now", cpu(4000), []Running{long, b}, 0, 0},
		{"pod slots count one per pod", placement.Resources{corev1.ResourcePods: 2}, []Running{a, b, c}, 50 * time.Second, 0},
		{"a resource no pod uses is never freed", placement.Resources{"nvidia.com/gpu": 1}, []Running{a, b}, -1, 0},
		{"a protected evictable pod frees when its protection ends", cpu(4000), []Running{a, shielded}, 30 * time.Second, 30 * time.Second},
		{"the fit waits for the last protection it needs", cpu(8000), []Running{b, shielded}, 30 * time.Second, 30 * time.Second},
		{"a protection the fit does not need is not named", cpu(4000), []Running{b, shielded}, 20 * time.Second, 0},
		{"a pod that ends before its protection frees at its end", cpu(4000), []Running{a, endsFirst}, 10 * time.Second, 0},
		{"a protection that ended frees at once", cpu(4000), []Running{a, lapsed}, 0, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, protected := ExpectedFit(t0, tc.short, tc.pods)
			if tc.want < 0 {
				assert.True(t, got.IsZero(), "got %v", got)
				assert.True(t, protected.IsZero(), "protected %v", protected)
				return
			}
			assert.Equal(t, t0.Add(tc.want), got)
			if tc.protected == 0 {
				assert.True(t, protected.IsZero(), "protected %v", protected)
			} else {
				assert.Equal(t, t0.Add(tc.protected), protected)
			}
		})
	}
}

// TestChoose: a domain that could not hold the gang even with every other
// pod gone is never held and is named with its numbers; the others keep
// the planner's order.
func TestChoose(t *testing.T) {
	dom := func(name string, short, used int64, nodes ...string) Domain {
		return Domain{Fit: placement.DomainFit{Domain: name, Short: cpu(short)}, Nodes: sets.New(nodes...), Used: cpu(used), Free: cpu(0)}
	}
	choices, never := Choose(t0, []Domain{
		dom("r0", 8000, 8000, "a"),
		dom("r1", 12000, 8000, "b"),
		dom("r2", 4000, 4000),
		dom("r3", 0, 0, "c"),
	})
	require.Len(t, choices, 2)
	assert.Equal(t, "r0", choices[0].Domain)
	assert.Equal(t, "r3", choices[1].Domain)
	assert.Equal(t, t0, choices[1].Expected, "nothing short: expected now")
	assert.True(t, choices[0].Expected.IsZero(), "no known end")
	assert.Equal(t, []string{"r1 short 4000 cpu with every other pod gone"}, never)
}

func TestMessage(t *testing.T) {
	h := Hold{Key: "topology.phalanx.dev/rack", Domain: "zone-0-rack-1", Nodes: sets.New("a", "b"),
		Free:  placement.Resources{corev1.ResourceCPU: 1500, corev1.ResourceMemory: 2 << 30, "nvidia.com/gpu": 2},
		Short: cpu(4000)}
	assert.Equal(t, "holds topology.phalanx.dev/rack=zone-0-rack-1 (2 nodes; free 1.5 cpu, 2048Mi memory, 2 nvidia.com/gpu; short 4 cpu; expected to fit at unknown)", h.Message())
	h.Free, h.Expected = nil, t0
	assert.Equal(t, "holds topology.phalanx.dev/rack=zone-0-rack-1 (2 nodes; free nothing; short 4 cpu; expected to fit at 2026-03-01T12:00:00Z)", h.Message())
	h.Expected, h.Protected = t0.Add(time.Minute), t0.Add(time.Minute)
	assert.Equal(t, "holds topology.phalanx.dev/rack=zone-0-rack-1 (2 nodes; free nothing; short 4 cpu; expected to fit at 2026-03-01T12:01:00Z; the pods it would preempt are protected by their minimum runtime until 2026-03-01T12:01:00Z)", h.Message())
}
