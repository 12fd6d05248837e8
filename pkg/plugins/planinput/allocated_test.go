package planinput

import (
	"context"
	"errors"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/dynamic-resource-allocation/structured"
)

// racingTracker fails its first lists as the scheduler's claim tracker
// does when a claim leaves the in-flight allocations during the list.
type racingTracker struct {
	races int
	err   error
	calls int
}

func (r *racingTracker) ListAllAllocatedDevices() (sets.Set[structured.DeviceID], error) {
	r.calls++
	if r.calls <= r.races {
		return nil, errors.New("conflicting concurrent modification")
	}
	if r.err != nil {
		return nil, r.err
	}
	return sets.New(structured.MakeDeviceID("gpu.example.com", "node-1", "gpu-0")), nil
}

// TestAllocatedDevicesOutlastTheTrackersRace: the tracker's list races
// with allocations in flight by design; a plan that failed on it put the
// gang into error backoff. The list is tried again until it holds, and
// other errors still fail at once.
func TestAllocatedDevicesOutlastTheTrackersRace(t *testing.T) {
	ctx := context.Background()
	racing := &racingTracker{races: 3}
	got, err := allocatedDevices(ctx, racing)
	if err != nil || got.Len() != 1 || racing.calls != 4 {
		t.Fatalf("after 3 races: %v, %v, %d calls; want the one device after 4 calls", got, err, racing.calls)
	}

	broken := &racingTracker{err: errors.New("informer gone")}
	if _, err := allocatedDevices(ctx, broken); err == nil || broken.calls != 1 {
		t.Fatalf("another error: %v after %d calls; want it after 1", err, broken.calls)
	}

	short, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel()
	if _, err := allocatedDevices(short, &racingTracker{races: 1 << 30}); err == nil {
		t.Fatal("a race that never ends must end the plan with an error")
	}
}
