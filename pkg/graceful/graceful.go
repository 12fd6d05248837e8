// Package graceful stops a Phalanx scheduler without leaving a gang bound
// below its minimum.
//
// kube-scheduler stops on SIGTERM by cancelling one context: the
// scheduling loop, the leader election and every binding cycle end
// together, and the process exits as soon as the Lease is released. A gang
// whose members passed Permit a moment earlier is then half bound: bind
// pacing sends a 1,000-member gang's requests over seconds. Here the stop
// comes in two steps instead. First the scheduler stops starting cycles
// and Permit stops letting anything through, while the Lease is still held
// (no other replica schedules meanwhile) and the binds already let through
// keep going; then, once they have finished or the drain timeout has
// passed, the instance's context is cancelled and kube-scheduler's own
// shutdown runs. A kill skips the first step; the next leader completes a
// partly bound gang first (pkg/plugins/queuesort), in its members' domain.
package graceful

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/klog/v2"
	"k8s.io/kubernetes/cmd/kube-scheduler/app"
	"k8s.io/kubernetes/pkg/scheduler"
	"k8s.io/kubernetes/pkg/scheduler/framework"

	"github.com/phalanx-sched/phalanx/pkg/plugins"
	"github.com/phalanx-sched/phalanx/pkg/plugins/gang"
	"github.com/phalanx-sched/phalanx/pkg/plugins/pluginrt"
)

// DefaultDrainTimeout bounds how long a stopping scheduler waits for the
// binds it has let through. A 1,000-member gang binds in a few seconds; the
// bound must stay below the pod's terminationGracePeriodSeconds (45 in
// manifests/base), or the kubelet kills the process mid-drain.
const DefaultDrainTimeout = 30 * time.Second

// Lifecycle is one scheduler instance's life: it ends when parent ends (a
// kill), or, once term ends (SIGTERM), after its binds have drained.
type Lifecycle struct {
	drain   *gang.Drain
	plugins *pluginrt.Runtime
	timeout time.Duration

	ctx    context.Context
	cancel context.CancelFunc
	// holding is set when the stop begins: from then on the scheduling
	// loop gets no more pods.
	holding atomic.Bool

	once   sync.Once
	report gang.DrainReport
	// stopped is closed when the stop (drain or not) has ended and ctx is
	// cancelled.
	stopped chan struct{}
}

// New starts a lifecycle. Build the scheduler with Context and Registry,
// then Attach it. timeout 0 stops without waiting, as kube-scheduler does.
func New(parent, term context.Context, timeout time.Duration) *Lifecycle {
	l := &Lifecycle{drain: gang.NewDrain(), plugins: pluginrt.New(), timeout: timeout, stopped: make(chan struct{})}
	l.ctx, l.cancel = context.WithCancel(parent)
	go func() {
		select {
		case <-term.Done():
			l.Stop()
		case <-l.ctx.Done():
			l.Stop() // killed: nothing to wait for, but Done must close
		}
	}()
	return l
}

// Context is the instance's context: the scheduler's Setup and Run take it,
// and its plugins send binding requests on it.
func (l *Lifecycle) Context() context.Context { return l.ctx }

// Registry is the Phalanx plugin registry wired to this instance's drain
// and plugin runtime.
func (l *Lifecycle) Registry() []app.Option { return plugins.RegistryFor(l.plugins, l.drain) }

// Plugins is the runtime this instance's plugins share, for the
// diagnostics that read their state.
func (l *Lifecycle) Plugins() *pluginrt.Runtime { return l.plugins }

// Attach makes sched's scheduling loop take no more pods once the stop
// has begun. Call it before sched runs.
func (l *Lifecycle) Attach(sched *scheduler.Scheduler) {
	next := sched.NextEntity
	sched.NextEntity = func(logger klog.Logger) (framework.QueuedEntityInfo, error) {
		if !l.holding.Load() {
			e, err := next(logger)
			if err != nil || e == nil || !l.holding.Load() {
				return e, err
			}
			// Popped as the stop began: the queue must not count it as
			// in flight, and the next scheduler will schedule it.
			e.ForEachPodInfo(func(p *framework.QueuedPodInfo) bool {
				if p.Pod != nil {
					sched.SchedulingQueue.Done(p.Pod.UID)
				}
				return true
			})
		}
		// A nil entity makes the loop go round again; it ends with ctx.
		<-l.ctx.Done()
		return nil, nil
	}
}

// Stop stops the instance gracefully: no more cycles, nothing more
// through Permit, a wait of at most the drain timeout for the binds let
// through, then the instance's context is cancelled. It returns what the
// wait achieved; later calls return the same.
func (l *Lifecycle) Stop() gang.DrainReport {
	l.once.Do(func() {
		defer close(l.stopped)
		defer l.cancel()
		logger := klog.FromContext(l.ctx)
		l.holding.Store(true)
		pods, groups := l.drain.Stop()
		// Killed, or configured not to wait: an expired context.
		ctx, cancel := context.WithTimeout(l.ctx, max(l.timeout, 0))
		defer cancel()
		waits := ctx.Err() == nil
		if waits {
			logger.Info("Graceful stop: no new scheduling cycles; waiting for the binds already let through Permit",
				"binds", pods, "groups", groups, "timeout", l.timeout)
		}
		l.report = l.drain.Wait(ctx)
		switch {
		case len(l.report.Left) > 0:
			logger.Info("Stopping with binds unfinished: their gangs stay partly bound until the next scheduler completes them",
				"bound", l.report.Bound, "failed", l.report.Failed, "left", len(l.report.Left),
				"groups", strings.Join(l.report.LeftGroups, ", "), "pods", sample(l.report.Left, 10))
		case waits:
			logger.Info("Graceful stop: binds drained", "bound", l.report.Bound, "failed", l.report.Failed, "took", l.report.Took.Round(time.Millisecond))
		}
	})
	return l.report
}

// Kill ends the instance at once, as SIGKILL would: binding requests in
// flight are abandoned.
func (l *Lifecycle) Kill() {
	l.cancel()
	<-l.stopped
}

// Done is closed once the instance's context is cancelled and the stop
// has ended.
func (l *Lifecycle) Done() <-chan struct{} { return l.stopped }

func sample(names []string, n int) string {
	if len(names) <= n {
		return strings.Join(names, ", ")
	}
	return strings.Join(names[:n], ", ") + ", ..."
}
