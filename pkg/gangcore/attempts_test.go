package gangcore

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/types"

	"github.com/phalanx-sched/phalanx/pkg/groups"
)

type clock struct{ t time.Time }

func (c *clock) now() time.Time { return c.t }

// TestAttempts: a round opens with its first waiting member and ends once,
// as allowed (quorum), rejected (a member failed), or timed out (its
// deadline passed, or a failure after the Permit bound); a member the
// cache forgot still closes the round it waited in.
func TestAttempts(t *testing.T) {
	root := groups.Key{Kind: groups.PodGroupKind, Namespace: "ns", Name: "g"}
	other := groups.Key{Kind: groups.PodGroupKind, Namespace: "ns", Name: "h"}
	limit := 600 * time.Second
	type step func(a *Attempts, c *clock) any
	tests := []struct {
		name  string
		steps []step
		want  []any
		open  int
	}{{
		name: "quorum after 3 s: allowed, with the wait",
		steps: []step{
			func(a *Attempts, c *clock) any { return a.Waiting(root, "0") },
			func(a *Attempts, c *clock) any { c.t = c.t.Add(3 * time.Second); return a.Waiting(root, "1") },
			func(a *Attempts, c *clock) any { d, ok := a.Allowed(root); return []any{d, ok} },
			func(a *Attempts, c *clock) any { _, ok := a.Allowed(root); return ok },
		},
		want: []any{true, false, []any{3 * time.Second, true}, false},
	}, {
		name: "a failure rejects the round once; released members unreserved after it count nothing",
		steps: []step{
			func(a *Attempts, c *clock) any { return a.Waiting(root, "0") },
			func(a *Attempts, c *clock) any { return a.Waiting(root, "1") },
			func(a *Attempts, c *clock) any { r, ok := a.Failed(root, true, "2", limit); return []any{r, ok} },
			func(a *Attempts, c *clock) any { r, ok := a.Failed(root, true, "0", limit); return []any{r, ok} },
		},
		want: []any{true, false, []any{Rejected, true}, []any{Result(""), false}},
	}, {
		name: "a failure after the Permit bound is a timeout",
		steps: []step{
			func(a *Attempts, c *clock) any { return a.Waiting(root, "0") },
			func(a *Attempts, c *clock) any {
				c.t = c.t.Add(limit)
				r, ok := a.Failed(root, true, "0", limit)
				return []any{r, ok}
			},
		},
		want: []any{true, []any{TimedOut, true}},
	}, {
		name: "a member the cache forgot closes the round it waited in",
		steps: []step{
			func(a *Attempts, c *clock) any { return a.Waiting(root, "0") },
			func(a *Attempts, c *clock) any {
				r, ok := a.Failed(groups.Key{}, false, "0", limit)
				return []any{r, ok}
			},
			func(a *Attempts, c *clock) any {
				r, ok := a.Failed(groups.Key{}, false, "unknown", limit)
				return []any{r, ok}
			},
		},
		want: []any{true, []any{Rejected, true}, []any{Result(""), false}},
	}, {
		name: "an expired deadline closes the round",
		steps: []step{
			func(a *Attempts, c *clock) any { return a.Waiting(root, "0") },
			func(a *Attempts, c *clock) any { return a.Expired(root) },
			func(a *Attempts, c *clock) any { return a.Expired(root) },
		},
		want: []any{true, true, false},
	}, {
		name: "hierarchies have rounds of their own; a deleted group's is forgotten",
		steps: []step{
			func(a *Attempts, c *clock) any { return a.Waiting(root, "0") },
			func(a *Attempts, c *clock) any { return a.Waiting(other, "x") },
			func(a *Attempts, c *clock) any { return a.Forget(other) },
		},
		want: []any{true, true, true},
		open: 1,
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := &clock{t: time.Unix(1000, 0)}
			a := NewAttempts(c.now)
			var got []any
			for _, s := range tc.steps {
				got = append(got, s(a, c))
			}
			assert.Equal(t, tc.want, got)
			rounds, _ := a.Open()
			assert.Equal(t, tc.open, rounds)
			assert.Equal(t, tc.open, a.Reset())
			rounds, members := a.Open()
			assert.Zero(t, rounds)
			assert.Zero(t, members)
		})
	}
}

func TestAttemptForgetsItsMembersWhenClosed(t *testing.T) {
	root := groups.Key{Kind: groups.LabelKind, Namespace: "ns", Name: "tf"}
	a := NewAttempts(time.Now)
	for _, uid := range []types.UID{"0", "1", "1", "2"} {
		a.Waiting(root, uid)
	}
	require.Len(t, a.open[root].members, 3, "a member waiting twice is remembered once")
	a.Allowed(root)
	assert.Empty(t, a.open)
	assert.Empty(t, a.rootOf)
}

// TestReleases: only an attempt's first failure releases the waiting
// members; a member reserving starts a new attempt, whose first failure
// releases again.
func TestReleases(t *testing.T) {
	unit := groups.Key{Kind: groups.PodGroupKind, Namespace: "ns", Name: "g"}
	var r Releases
	assert.True(t, r.First(unit), "the first failure releases")
	assert.False(t, r.First(unit), "the members it released fail in turn and release nothing")
	r.Started(unit)
	assert.True(t, r.First(unit), "a new attempt's first failure releases again")
	r.Forget(unit)
	assert.Zero(t, r.Len())
}
