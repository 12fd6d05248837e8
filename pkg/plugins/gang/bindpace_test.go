package gang

import (
	"context"
	"fmt"
	"testing"
	"testing/synctest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/types"
)

// TestBindSlotsCapAndOrder: no more than n binds hold a slot, a freed slot
// goes to the earliest waiter, a release without a slot (a bind that never
// took one, or a second release) frees nothing, and a cancelled wait takes
// nothing. synctest.Wait returns once every goroutine of the test is
// blocked, so the waiters' arrival order is exact, without sleeps.
func TestBindSlotsCapAndOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := newBindSlots(2)
		ctx := context.Background()
		require.NoError(t, b.acquire(ctx, "a"))
		require.NoError(t, b.acquire(ctx, "b"))
		require.NoError(t, b.acquire(ctx, "a"), "a pod that holds a slot does not take another")
		assert.Equal(t, 2, len(b.slots))

		got := make(chan types.UID, 3)
		for i := 0; i < 3; i++ {
			uid := types.UID(fmt.Sprintf("w%d", i))
			go func() {
				if err := b.acquire(ctx, uid); err == nil {
					got <- uid
				}
			}()
			synctest.Wait() // w<i> is blocked before the next one starts
		}
		select {
		case uid := <-got:
			t.Fatalf("%s took a slot while both were held", uid)
		default:
		}

		b.release("nobody")
		assert.Equal(t, 2, len(b.slots), "a release without a slot frees nothing")
		b.release("a")
		assert.Equal(t, types.UID("w0"), <-got, "the earliest waiter gets the freed slot")
		b.release("a")
		b.release("b")
		assert.Equal(t, types.UID("w1"), <-got)

		cctx, cancel := context.WithCancel(ctx)
		done := make(chan error)
		go func() { done <- b.acquire(cctx, "cancelled") }()
		synctest.Wait()
		cancel()
		require.ErrorIs(t, <-done, context.Canceled)
		b.release("w0")
		assert.Equal(t, types.UID("w2"), <-got, "the cancelled waiter took nothing")
		b.release("w1")
		b.release("w2")
		assert.Equal(t, 0, len(b.slots))
	})
}
