package integration

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	schedv1beta1 "k8s.io/api/scheduling/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/phalanx-sched/phalanx/config"
	"github.com/phalanx-sched/phalanx/tools/sandbox"
)

// overReservedForLimit is more members than a claim's status.reservedFor
// holds (256).
const overReservedForLimit = 300

// TestDRAPodGroupClaimBeyondReservedFor: gangs of 300 members sharing one
// claim of their PodGroup, more than the 256 consumers a claim's
// status.reservedFor holds. Under PhalanxDynamicResources an upstream
// scheduling.k8s.io PodGroup's claim is reserved for the PodGroup, as
// upstream reserves it, and the whole gang binds.
func TestDRAPodGroupClaimBeyondReservedFor(t *testing.T) {
	cfg, err := config.WithPodGroupClaimReservation(config.SecondScheduler)
	require.NoError(t, err)
	// Tiny members, many to a node: 4 nodes of 110 pods hold the gang.
	c := startCluster(t, sandbox.Options{Scheduler: true, ClaimController: true, SchedulerConfig: cfg,
		ExtraGates: map[string]bool{"DRAWorkloadResourceClaims": true},
		Topology:   &sandbox.Topology{Zones: 1, RacksPerZone: 1, NodesPerRack: 4, CPU: "32", Memory: "64Gi", Pods: 110}})
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	require.NoError(t, sandbox.PublishDomainDevices(ctx, c.Client, "channel.phalanx.dev", sandbox.RackLabel, []string{"zone-0-rack-0"}, 1))
	ns := namespace(t, c)
	_, err = c.Client.ResourceV1().ResourceClaims(ns).Create(ctx, &resourceapi.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "channel"},
		Spec: resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{Requests: []resourceapi.DeviceRequest{{
			Name: "channel", Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: "channel.phalanx.dev"},
		}}}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)

	pg := nativeGang("wide", overReservedForLimit, "")
	pg.Spec.ResourceClaims = []schedv1beta1.PodGroupResourceClaim{{Name: "channel", ResourceClaimName: ptr.To("channel")}}
	_, err = c.Client.SchedulingV1beta1().PodGroups(ns).Create(ctx, pg, metav1.CreateOptions{})
	require.NoError(t, err)
	createMembersInParallel(t, c, ns, overReservedForLimit, func(i int) *corev1.Pod {
		p := member{name: fmt.Sprintf("wide-%d", i), cpu: "10m"}.pod()
		p.Spec.SchedulingGroup = &corev1.PodSchedulingGroup{PodGroupName: ptr.To("wide")}
		p.Spec.ResourceClaims = []corev1.PodResourceClaim{{Name: "channel", ResourceClaimName: ptr.To("channel")}}
		p.Spec.Containers[0].Resources.Claims = []corev1.ResourceClaim{{Name: "channel"}}
		return p
	})
	eventually(t, 90*time.Second, "the 300 members of wide bound", func() (bool, error) {
		return countPrefix(boundPods(t, c, ns), "wide-") == overReservedForLimit, nil
	})
	claim, err := c.Client.ResourceV1().ResourceClaims(ns).Get(ctx, "channel", metav1.GetOptions{})
	require.NoError(t, err)
	require.NotNil(t, claim.Status.Allocation, "the group's claim is allocated once")
	got, err := c.Client.SchedulingV1beta1().PodGroups(ns).Get(ctx, "wide", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, []resourceapi.ResourceClaimConsumerReference{{APIGroup: "scheduling.k8s.io", Resource: "podgroups", Name: "wide", UID: got.UID}},
		claim.Status.ReservedFor, "reserved for the PodGroup, not for its 300 pods")
	failures := claimWriteFailures(t, c, ns)
	assert.Zero(t, len(failures), "no member's PreBind was refused a reservation (the claim was reserved for the PodGroup before any member bound); the first: %v", firstOf(failures))
}

// claimWriteFailures lists the events of ns that report a member whose
// PreBind could not reserve its claim.
func claimWriteFailures(t *testing.T, c *sandbox.Cluster, ns string) []string {
	evs, err := c.Client.EventsV1().Events(ns).List(context.Background(), metav1.ListOptions{})
	require.NoError(t, err)
	var out []string
	for _, e := range evs.Items {
		if strings.Contains(e.Note, "reservation to claim") {
			out = append(out, e.Regarding.Name+": "+e.Note)
		}
	}
	return out
}

func firstOf(s []string) string {
	if len(s) == 0 {
		return ""
	}
	return s[0]
}

// createMembersInParallel creates n pods made by pod, a few requests at a
// time: one after another, 300 creations take longer than the gang does.
func createMembersInParallel(t *testing.T, c *sandbox.Cluster, ns string, n int, pod func(i int) *corev1.Pod) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, n)
	next := make(chan int)
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				if _, err := c.Client.CoreV1().Pods(ns).Create(context.Background(), pod(i), metav1.CreateOptions{}); err != nil {
					errs <- err
				}
			}
		}()
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
}
