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

	v1alpha1 "github.com/phalanx-sched/phalanx/apis/scheduling/v1alpha1"
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
// upstream reserves it, and the whole gang binds; so does a group whose
// claim kube-controller-manager makes from a template, and one whose
// members exist before their PodGroup (the plugin looks the PodGroup up
// in Phalanx's informer). A Phalanx PodGroup's claim can only be reserved
// for each pod (the kubelet accepts no other consumer for its pods), so
// that gang binds nothing and says why.
func TestDRAPodGroupClaimBeyondReservedFor(t *testing.T) {
	cfg, err := config.WithPodGroupClaimReservation(config.SecondScheduler)
	require.NoError(t, err)
	// Tiny members, many to a node: 6 nodes of 110 pods hold both gangs.
	// With the diagnostics on: their probes build the profile's filters,
	// PhalanxDynamicResources among them, and a name they did not know
	// kept the scheduler from starting.
	c := startCluster(t, sandbox.Options{Scheduler: true, ClaimController: true, SchedulerConfig: cfg, Diagnostics: true,
		ExtraGates: map[string]bool{"DRAWorkloadResourceClaims": true},
		Topology:   &sandbox.Topology{Zones: 1, RacksPerZone: 1, NodesPerRack: 6, CPU: "32", Memory: "64Gi", Pods: 110}})
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	require.NoError(t, sandbox.PublishDomainDevices(ctx, c.Client, "channel.phalanx.dev", sandbox.RackLabel, []string{"zone-0-rack-0"}, 4))
	ns := namespace(t, c)
	for _, name := range []string{"native-channel", "own-channel"} {
		_, err = c.Client.ResourceV1().ResourceClaims(ns).Create(ctx, &resourceapi.ResourceClaim{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{Requests: []resourceapi.DeviceRequest{{
				Name: "channel", Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: "channel.phalanx.dev"},
			}}}},
		}, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	withClaim := func(p *corev1.Pod, claim string) *corev1.Pod {
		p.Spec.ResourceClaims = []corev1.PodResourceClaim{{Name: "channel", ResourceClaimName: ptr.To(claim)}}
		p.Spec.Containers[0].Resources.Claims = []corev1.ResourceClaim{{Name: "channel"}}
		return p
	}

	t.Run("an upstream PodGroup's 300 members share its claim, reserved for the PodGroup, and bind whole", func(t *testing.T) {
		pg := nativeGang("native", overReservedForLimit, "")
		pg.Spec.ResourceClaims = []schedv1beta1.PodGroupResourceClaim{{Name: "channel", ResourceClaimName: ptr.To("native-channel")}}
		_, err := c.Client.SchedulingV1beta1().PodGroups(ns).Create(ctx, pg, metav1.CreateOptions{})
		require.NoError(t, err)
		createMembersInParallel(t, c, ns, overReservedForLimit, func(i int) *corev1.Pod {
			p := member{name: fmt.Sprintf("native-%d", i), cpu: "10m"}.pod()
			p.Spec.SchedulingGroup = &corev1.PodSchedulingGroup{PodGroupName: ptr.To("native")}
			return withClaim(p, "native-channel")
		})
		eventually(t, 90*time.Second, "the 300 members of native bound", func() (bool, error) {
			return countPrefix(boundPods(t, c, ns), "native-") == overReservedForLimit, nil
		})
		claim, err := c.Client.ResourceV1().ResourceClaims(ns).Get(ctx, "native-channel", metav1.GetOptions{})
		require.NoError(t, err)
		require.NotNil(t, claim.Status.Allocation, "the group's claim is allocated once")
		got, err := c.Client.SchedulingV1beta1().PodGroups(ns).Get(ctx, "native", metav1.GetOptions{})
		require.NoError(t, err)
		assert.Equal(t, []resourceapi.ResourceClaimConsumerReference{{APIGroup: "scheduling.k8s.io", Resource: "podgroups", Name: "native", UID: got.UID}},
			claim.Status.ReservedFor, "reserved for the PodGroup, not for its 300 pods")
		failures := claimWriteFailures(t, c, ns)
		assert.Zero(t, len(failures), "no member's PreBind was refused a reservation (the claim was reserved for the PodGroup before any member bound); the first: %v", firstOf(failures))
	})

	t.Run("an upstream PodGroup's claim made from a template by kube-controller-manager is shared by its members, reserved for the PodGroup", func(t *testing.T) {
		_, err := c.Client.ResourceV1().ResourceClaimTemplates(ns).Create(ctx, &resourceapi.ResourceClaimTemplate{
			ObjectMeta: metav1.ObjectMeta{Name: "channel"},
			Spec: resourceapi.ResourceClaimTemplateSpec{Spec: resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{Requests: []resourceapi.DeviceRequest{{
				Name: "channel", Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: "channel.phalanx.dev"},
			}}}}},
		}, metav1.CreateOptions{})
		require.NoError(t, err)
		pg := nativeGang("tmpl", 4, "")
		pg.Spec.ResourceClaims = []schedv1beta1.PodGroupResourceClaim{{Name: "channel", ResourceClaimTemplateName: ptr.To("channel")}}
		_, err = c.Client.SchedulingV1beta1().PodGroups(ns).Create(ctx, pg, metav1.CreateOptions{})
		require.NoError(t, err)
		createMembersInParallel(t, c, ns, 4, func(i int) *corev1.Pod {
			p := member{name: fmt.Sprintf("tmpl-%d", i), cpu: "10m"}.pod()
			p.Spec.SchedulingGroup = &corev1.PodSchedulingGroup{PodGroupName: ptr.To("tmpl")}
			p.Spec.ResourceClaims = []corev1.PodResourceClaim{{Name: "channel", ResourceClaimTemplateName: ptr.To("channel")}}
			p.Spec.Containers[0].Resources.Claims = []corev1.ResourceClaim{{Name: "channel"}}
			return p
		})
		eventually(t, 60*time.Second, "the 4 members of tmpl bound", func() (bool, error) { return countPrefix(boundPods(t, c, ns), "tmpl-") == 4, nil })
		got, err := c.Client.SchedulingV1beta1().PodGroups(ns).Get(ctx, "tmpl", metav1.GetOptions{})
		require.NoError(t, err)
		require.Len(t, got.Status.ResourceClaimStatuses, 1)
		made := got.Status.ResourceClaimStatuses[0].ResourceClaimName
		require.NotNil(t, made, "kube-controller-manager made the group's claim")
		claim, err := c.Client.ResourceV1().ResourceClaims(ns).Get(ctx, *made, metav1.GetOptions{})
		require.NoError(t, err)
		require.NotNil(t, claim.Status.Allocation)
		assert.Equal(t, []resourceapi.ResourceClaimConsumerReference{{APIGroup: "scheduling.k8s.io", Resource: "podgroups", Name: "tmpl", UID: got.UID}},
			claim.Status.ReservedFor, "one claim for the group, reserved for the PodGroup")
	})

	t.Run("members created before their upstream PodGroup bind once it exists, its claim reserved for it", func(t *testing.T) {
		_, err := c.Client.ResourceV1().ResourceClaims(ns).Create(ctx, &resourceapi.ResourceClaim{
			ObjectMeta: metav1.ObjectMeta{Name: "late-channel"},
			Spec: resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{Requests: []resourceapi.DeviceRequest{{
				Name: "channel", Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: "channel.phalanx.dev"},
			}}}},
		}, metav1.CreateOptions{})
		require.NoError(t, err)
		createMembersInParallel(t, c, ns, 4, func(i int) *corev1.Pod {
			p := member{name: fmt.Sprintf("late-%d", i), cpu: "10m"}.pod()
			p.Spec.SchedulingGroup = &corev1.PodSchedulingGroup{PodGroupName: ptr.To("late")}
			return withClaim(p, "late-channel")
		})
		// Long enough for the scheduler to try them without their PodGroup.
		time.Sleep(time.Second)
		assert.Zero(t, countPrefix(boundPods(t, c, ns), "late-"), "no PodGroup yet")
		pg := nativeGang("late", 4, "")
		pg.Spec.ResourceClaims = []schedv1beta1.PodGroupResourceClaim{{Name: "channel", ResourceClaimName: ptr.To("late-channel")}}
		_, err = c.Client.SchedulingV1beta1().PodGroups(ns).Create(ctx, pg, metav1.CreateOptions{})
		require.NoError(t, err)
		// Not the 5 minutes after which the queue retries every pod: the
		// PodGroup's arrival brings them back.
		eventually(t, 30*time.Second, "the 4 members of late bound", func() (bool, error) { return countPrefix(boundPods(t, c, ns), "late-") == 4, nil })
		claim, err := c.Client.ResourceV1().ResourceClaims(ns).Get(ctx, "late-channel", metav1.GetOptions{})
		require.NoError(t, err)
		require.Len(t, claim.Status.ReservedFor, 1)
		assert.Equal(t, "late", claim.Status.ReservedFor[0].Name)
		assert.Equal(t, "podgroups", claim.Status.ReservedFor[0].Resource)
	})

	t.Run("a Phalanx PodGroup whose 300 members share its claim binds none and names the reservedFor limit", func(t *testing.T) {
		pg := gangPG("own", overReservedForLimit)
		pg.Spec.ResourceClaims = []v1alpha1.PodGroupResourceClaim{{Name: "channel", ResourceClaimName: ptr.To("own-channel")}}
		createPodGroup(t, c, ns, pg)
		createMembersInParallel(t, c, ns, overReservedForLimit, func(i int) *corev1.Pod {
			return withClaim(member{name: fmt.Sprintf("own-%d", i), labels: inGroup("own"), cpu: "10m"}.pod(), "own-channel")
		})
		cond := waitGroupCondition(t, c, ns, "own", "Schedulable", "status.reservedFor holds at most 256")
		assert.Contains(t, cond.Message, "own-channel")
		assert.Zero(t, countPrefix(boundPods(t, c, ns), "own-"), "no member bound: 256 would be a gang below its minimum")
	})
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
