package gang

import (
	"context"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/profile"

	v1alpha1 "github.com/phalanx-sched/phalanx/apis/scheduling/v1alpha1"
	"github.com/phalanx-sched/phalanx/pkg/groups"
	"github.com/phalanx-sched/phalanx/pkg/plugins/pluginrt"
)

// recordingFramework is a profile's framework as far as the binding
// cycle's event goes: it only hands out its recorder.
type recordingFramework struct {
	framework.Framework
	rec *recorded
}

func (f *recordingFramework) EventRecorder() events.EventRecorderLogger { return f.rec }

// recorded keeps the pods and reasons of the events that reached the API
// server's side of the recorder.
type recorded struct {
	mu   sync.Mutex
	sent map[string][]string
}

func (r *recorded) Eventf(regarding, _ runtime.Object, _, reason, _, _ string, _ ...interface{}) {
	r.mu.Lock()
	defer r.mu.Unlock()
	name := regarding.(*corev1.Pod).Name
	r.sent[name] = append(r.sent[name], reason)
}

func (r *recorded) WithLogger(klog.Logger) events.EventRecorderLogger { return r }

// TestScheduledEventsOfGangMembers: binding a member of a gang that has a
// PodGroup object costs no Scheduled event (the group's condition reports
// the gang); plain pods, members of basic groups and of label gangs (no
// object to look at) keep theirs, other events of gang members still go
// out, and memberScheduledEvents brings the member events back.
func TestScheduledEventsOfGangMembers(t *testing.T) {
	for _, optIn := range []bool{false, true} {
		pl, _, fed := newHotPathGang(t)
		pl.args.MemberScheduledEvents = optIn
		gangPG := &v1alpha1.PodGroup{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "trainer", UID: "trainer"}}
		gangPG.Spec.SchedulingPolicy.Gang = &v1alpha1.GangSchedulingPolicy{MinCount: 2}
		basicPG := &v1alpha1.PodGroup{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "serving", UID: "serving"}}
		basicPG.Spec.SchedulingPolicy.Basic = &v1alpha1.BasicSchedulingPolicy{}
		fed.OnPodGroup(gangPG)
		fed.OnPodGroup(basicPG)
		member := func(name, group string) *corev1.Pod {
			p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID(name)}}
			if group != "" {
				p.Labels = map[string]string{v1alpha1.PodGroupLabel: group}
			}
			fed.OnPod(p)
			return p
		}
		pods := []*corev1.Pod{
			member("trainer-0", "trainer"), member("trainer-1", "trainer"),
			member("serving-0", "serving"),
			gangMember("label", 0, 2), gangMember("label", 1, 2),
			member("plain", ""),
		}
		for _, p := range pods[3:5] {
			fed.OnPod(p)
		}

		rec := &recorded{sent: map[string][]string{}}
		real := &recordingFramework{rec: rec}
		ctx, cancel := context.WithCancel(context.Background())
		rt := pluginrt.New()
		rt.Register(ctx, real, pl)
		profiles := profile.Map{"phalanx-scheduler": real}
		QuietMemberEvents(rt, profiles)

		got, ok := rt.Plugin(profiles["phalanx-scheduler"], Name)
		require.True(t, ok, "diagnostics still find the plugin behind the profile")
		assert.Same(t, pl, got)

		// What the binding cycle records once each pod is bound, then a
		// failure event on a gang member.
		for _, p := range pods {
			profiles["phalanx-scheduler"].EventRecorder().WithLogger(klog.Background()).
				Eventf(p, nil, corev1.EventTypeNormal, "Scheduled", "Binding", "Successfully assigned %s/%s to n", p.Namespace, p.Name)
		}
		profiles["phalanx-scheduler"].EventRecorder().Eventf(pods[0], nil, corev1.EventTypeWarning, "FailedScheduling", "Scheduling", "x")
		cancel()

		want := map[string][]string{
			"trainer-0": {"FailedScheduling"},
			"serving-0": {"Scheduled"},
			"label-0":   {"Scheduled"}, "label-1": {"Scheduled"},
			"plain": {"Scheduled"},
		}
		if optIn {
			want["trainer-0"] = []string{"Scheduled", "FailedScheduling"}
			want["trainer-1"] = []string{"Scheduled"}
		}
		assert.Equal(t, want, rec.sent, "memberScheduledEvents=%v", optIn)
	}
}

// eventsHandle is countingHandle with a recorder that keeps the events.
type eventsHandle struct {
	*countingHandle
	rec *recorded
}

func (h *eventsHandle) EventRecorder() events.EventRecorderLogger { return h.rec }

// TestInvalidGroupGetsItsOwnEventOnTheMember: the recorder folds every
// FailedScheduling event of a pod into the series of its first, note and
// all, so a label gang member that failed for lack of room before its
// siblings came to disagree would never show why it is now refused. The
// refusal goes out under its own reason, once per member and reason.
func TestInvalidGroupGetsItsOwnEventOnTheMember(t *testing.T) {
	pl, h, fed := newHotPathGang(t)
	rec := &recorded{sent: map[string][]string{}}
	pl.handle = &eventsHandle{countingHandle: h, rec: rec}
	a, b := gangMember("d", 0, 2), gangMember("d", 1, 1)
	fed.OnPod(a)
	fed.OnPod(b)
	for range 2 {
		_, st := pl.PreFilter(context.Background(), framework.NewCycleState(), a, nil)
		require.False(t, st.IsSuccess())
		assert.Contains(t, st.Message(), groups.MsgMinAvailableMismatch)
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	assert.Equal(t, []string{"GroupInvalid"}, rec.sent["d-0"], "one event for the same refusal")
}
