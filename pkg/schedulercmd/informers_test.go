package schedulercmd

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic/dynamicinformer"
	dynamicfake "k8s.io/client-go/dynamic/fake"

	"github.com/phalanx-sched/phalanx/pkg/plugins/gang"
	"github.com/phalanx-sched/phalanx/pkg/plugins/pluginrt"
)

// app.Run waits for the dynamic informers with a poll that sleeps 100ms
// when an informer has not listed at its first check. After
// syncDynamicInformers, that wait passes at once: in a synctest bubble the
// clock moves only when every goroutine sleeps, so no time passes. Without
// it, the same wait sleeps one poll per resource.
func TestDynamicInformersSyncedBeforeTheSchedulersPollingWait(t *testing.T) {
	rt := pluginrt.New()
	assert.Empty(t, gang.WatchedResources(rt, nil), "no profile runs the gang plugin: nothing to watch")

	gvrs := []struct{ group, version, resource, list string }{
		{"scheduling.phalanx.dev", "v1alpha1", "podgroups", "PodGroupList"},
		{"scheduling.phalanx.dev", "v1alpha1", "compositepodgroups", "CompositePodGroupList"},
		{"scheduling.k8s.io", "v1", "priorityclasses", "PriorityClassList"},
	}
	for _, presync := range []bool{true, false} {
		synctest.Test(t, func(t *testing.T) {
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			lists := map[schema.GroupVersionResource]string{}
			var watched []schema.GroupVersionResource
			for _, g := range gvrs {
				gvr := schema.GroupVersionResource{Group: g.group, Version: g.version, Resource: g.resource}
				lists[gvr] = g.list
				watched = append(watched, gvr)
			}
			client := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), lists)
			dyn := dynamicinformer.NewDynamicSharedInformerFactory(client, 0)
			for _, gvr := range watched {
				dyn.ForResource(gvr) // as the scheduler registers its handlers
			}
			if presync {
				syncDynamicInformers(ctx, dyn, watched)
			}

			start := time.Now()
			dyn.Start(ctx.Done())
			for gvr, ok := range dyn.WaitForCacheSync(ctx.Done()) {
				require.True(t, ok, gvr)
			}
			took := time.Since(start)
			if presync {
				assert.Zero(t, took, "the scheduler's wait slept after the informers were synced")
			} else {
				assert.NotZero(t, took, "the polling wait no longer sleeps: syncDynamicInformers may not be needed")
			}
			cancel()
			dyn.Shutdown()
		})
	}
}

// waitHandlersSync returns within one handlersPoll of the handlers being
// synced, where the scheduler's own wait (a check at once, then every
// 100ms) would return at the next 100ms tick; and it gives up on a stop.
func TestHandlersWaitLooksOftenerThanTheScheduler(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		ready := start.Add(30 * time.Millisecond)
		// As the scheduler's WaitForHandlersSync: a check at once, then
		// one every 100ms, until its context ends.
		schedulerWait := func(ctx context.Context) error {
			for {
				if !time.Now().Before(ready) {
					return nil
				}
				select {
				case <-ctx.Done():
					return ctx.Err()
				case <-time.After(100 * time.Millisecond):
				}
			}
		}
		require.True(t, waitHandlersSync(t.Context(), schedulerWait))
		took := time.Since(start)
		assert.GreaterOrEqual(t, took, 30*time.Millisecond)
		assert.LessOrEqual(t, took, 30*time.Millisecond+handlersPoll, "the handlers were synced at 30ms")

		// The same handlers, waited for the scheduler's way.
		start = time.Now()
		ready = start.Add(30 * time.Millisecond)
		require.NoError(t, schedulerWait(t.Context()))
		assert.Equal(t, 100*time.Millisecond, time.Since(start), "the scheduler's own wait sleeps to its next tick")

		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		start = time.Now()
		assert.False(t, waitHandlersSync(ctx, func(context.Context) error { return context.DeadlineExceeded }))
		assert.Zero(t, time.Since(start), "a stop ends the wait")
	})
}
