package gang

import (
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/phalanx-sched/phalanx/pkg/gangcore"
	"github.com/phalanx-sched/phalanx/pkg/groups"
)

type expiry struct {
	root   groups.Key
	at     time.Duration // since the test began, on the bubble's clock
	reason string
}

// recorder collects expiries with the bubble's time.
type recorder struct {
	mu    sync.Mutex
	start time.Time
	got   []expiry
}

func (r *recorder) expire(root groups.Key, reason string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.got = append(r.got, expiry{root: root, at: time.Since(r.start), reason: reason})
}

func (r *recorder) list() []expiry {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]expiry(nil), r.got...)
}

// TestGangDeadlineFollowsProgress: a gang is released when no member has
// arrived in Permit for the idle timeout, not when its first member has
// waited that long; a gang that keeps progressing is released only at the
// overall bound; a finished round never expires. The bubble's clock is
// fake (testing/synctest), so the expiry times are exact.
func TestGangDeadlineFollowsProgress(t *testing.T) {
	const idle, limit = 2 * time.Second, 30 * time.Second
	big := groups.Key{Kind: groups.PodGroupKind, Namespace: "ns", Name: "big"}
	small := groups.Key{Kind: groups.LabelKind, Namespace: "ns", Name: "small"}

	t.Run("arrivals keep a gang waiting past the idle timeout; it expires idle after the last", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			r := &recorder{start: time.Now()}
			d := newGangDeadlines(idle, limit, r.expire)
			// Ten members arrive, one a second: the first waits 9 s,
			// far beyond the 2 s idle timeout.
			for i := 0; i < 10; i++ {
				d.progress(big)
				time.Sleep(time.Second)
				synctest.Wait()
				require.Empty(t, r.list(), "released while members kept arriving (after %d)", i+1)
			}
			time.Sleep(2 * time.Second)
			synctest.Wait()
			got := r.list()
			require.Len(t, got, 1)
			assert.Equal(t, big, got[0].root)
			assert.Equal(t, 11*time.Second, got[0].at, "idle timeout after the last arrival (at 9 s)")
			assert.Contains(t, got[0].reason, "no member of the gang reached Permit for 2s")
			assert.Contains(t, got[0].reason, "after 10 had arrived")
			assert.Zero(t, d.len(), "an expired round is forgotten")
		})
	})

	t.Run("a gang that never stalls is released at the overall bound", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			r := &recorder{start: time.Now()}
			d := newGangDeadlines(idle, limit, r.expire)
			for i := 0; i < 40 && len(r.list()) == 0; i++ {
				d.progress(big)
				time.Sleep(time.Second)
				synctest.Wait()
			}
			got := r.list()
			require.Len(t, got, 1)
			assert.Equal(t, limit, got[0].at)
			assert.Contains(t, got[0].reason, "waited 30s in Permit in all")
		})
	})

	t.Run("a round that reached quorum never expires, and the next round starts afresh", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			r := &recorder{start: time.Now()}
			d := newGangDeadlines(idle, limit, r.expire)
			d.progress(big)
			d.progress(small)
			time.Sleep(time.Second)
			d.done(big)
			time.Sleep(time.Minute)
			synctest.Wait()
			got := r.list()
			require.Len(t, got, 1, "only the gang still waiting expires")
			assert.Equal(t, small, got[0].root)
			assert.Equal(t, idle, got[0].at)

			r.start = time.Now()
			d.progress(big)
			time.Sleep(idle)
			synctest.Wait()
			got = r.list()
			require.Len(t, got, 2)
			assert.Equal(t, expiry{root: big, at: idle, reason: got[1].reason}, got[1], "a new round gets the full idle time")
			assert.Contains(t, got[1].reason, "after 1 had arrived")
		})
	})

	t.Run("stop ends every round without releasing anyone", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			r := &recorder{start: time.Now()}
			d := newGangDeadlines(idle, limit, r.expire)
			d.progress(big)
			d.progress(small)
			d.stop()
			time.Sleep(time.Hour)
			synctest.Wait()
			assert.Empty(t, r.list())
			assert.Zero(t, d.len())
		})
	})
}

// TestGangDeadlineOfTheGroup: a hierarchy whose group sets its own wait
// (scheduleTimeoutSeconds) is released that long after its first member
// arrived, whether members keep arriving or not, and whatever the
// profile's idle timeout; other gangs keep the profile's bounds.
func TestGangDeadlineOfTheGroup(t *testing.T) {
	const idle, limit = 2 * time.Second, 30 * time.Second
	x := groups.Key{Dialect: groups.Coscheduling, Kind: groups.PodGroupKind, Namespace: "ns", Name: "x"}
	plain := groups.Key{Kind: groups.PodGroupKind, Namespace: "ns", Name: "plain"}

	t.Run("longer than the idle timeout: stalls do not release it early", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			r := &recorder{start: time.Now()}
			d := newGangDeadlines(idle, limit, r.expire)
			d.progressFor(x, 10*time.Second)
			d.progress(plain)
			time.Sleep(9 * time.Second)
			synctest.Wait()
			got := r.list()
			require.Len(t, got, 1, "only the gang with the profile's bounds expired so far")
			assert.Equal(t, plain, got[0].root)
			assert.Equal(t, idle, got[0].at)
			time.Sleep(time.Second)
			synctest.Wait()
			got = r.list()
			require.Len(t, got, 2)
			assert.Equal(t, x, got[1].root)
			assert.Equal(t, 10*time.Second, got[1].at, "released at its own wait")
			assert.Contains(t, got[1].reason, "waited 10s in Permit (its PodGroup's scheduleTimeoutSeconds)")
		})
	})

	t.Run("shorter than the idle timeout: arrivals do not extend it", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			r := &recorder{start: time.Now()}
			d := newGangDeadlines(time.Minute, 10*time.Minute, r.expire)
			for i := 0; i < 10 && len(r.list()) == 0; i++ {
				d.progressFor(x, 3*time.Second)
				time.Sleep(time.Second)
				synctest.Wait()
			}
			got := r.list()
			require.Len(t, got, 1)
			assert.Equal(t, 3*time.Second, got[0].at)
			assert.Contains(t, got[0].reason, "3 members had arrived")
		})
	})

	t.Run("a wait beyond the framework's limit is cut to it", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			r := &recorder{start: time.Now()}
			d := newGangDeadlines(idle, limit, r.expire)
			d.progressFor(x, time.Hour)
			time.Sleep(time.Hour)
			synctest.Wait()
			got := r.list()
			require.Len(t, got, 1)
			assert.Equal(t, gangcore.FrameworkMaxPermitSeconds*time.Second, got[0].at)
		})
	})
}
