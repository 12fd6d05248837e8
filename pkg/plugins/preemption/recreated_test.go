package preemption

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/events"
)

// honourUIDs makes the fake client answer as the API server does when a
// request names a pod by UID: a delete whose UID precondition does not
// match is refused with Conflict, and a patch that sets metadata.uid to
// another UID than the stored pod's is refused as Invalid (the UID is
// immutable), so it cannot touch another pod of the same name.
func honourUIDs(client *fake.Clientset) {
	stored := func(ns, name string) (*corev1.Pod, error) {
		obj, err := client.Tracker().Get(corev1.SchemeGroupVersion.WithResource("pods"), ns, name)
		if err != nil {
			return nil, err
		}
		return obj.(*corev1.Pod), nil
	}
	client.PrependReactor("delete", "pods", func(action k8stesting.Action) (bool, runtime.Object, error) {
		del := action.(k8stesting.DeleteAction)
		pre := del.GetDeleteOptions().Preconditions
		if pre == nil || pre.UID == nil {
			return false, nil, nil
		}
		pod, err := stored(del.GetNamespace(), del.GetName())
		if err != nil {
			return true, nil, err
		}
		if pod.UID != *pre.UID {
			return true, nil, apierrors.NewConflict(corev1.Resource("pods"), del.GetName(),
				fmt.Errorf("precondition failed: UID in precondition: %s, UID in object meta: %s", *pre.UID, pod.UID))
		}
		return false, nil, nil
	})
	client.PrependReactor("patch", "pods", func(action k8stesting.Action) (bool, runtime.Object, error) {
		patch := action.(k8stesting.PatchAction)
		var sent struct {
			Metadata struct {
				UID types.UID `json:"uid"`
			} `json:"metadata"`
		}
		if err := json.Unmarshal(patch.GetPatch(), &sent); err != nil || sent.Metadata.UID == "" {
			return false, nil, nil
		}
		pod, err := stored(patch.GetNamespace(), patch.GetName())
		if err != nil {
			return true, nil, err
		}
		if pod.UID != sent.Metadata.UID {
			return true, nil, apierrors.NewInvalid(schema.GroupKind{Kind: "Pod"}, patch.GetName(), field.ErrorList{
				field.Invalid(field.NewPath("metadata", "uid"), sent.Metadata.UID, "field is immutable"),
			})
		}
		return false, nil, nil
	})
}

// A victim chosen from the scheduler's snapshot may be gone by the time it
// is evicted, and a StatefulSet may have created a new pod under its name.
// The new pod is no victim: it is neither marked nor deleted, and the
// preemption carries on as if the victim had already left, while a victim
// that is still the pod the decision saw is evicted.
func TestEvictionSparesAPodRecreatedUnderAVictimsName(t *testing.T) {
	tests := []struct {
		name string
		// evict evicts victims the way one preemption path does, and
		// returns the error it ends with.
		evict func(t *testing.T, p *Preemption, victims []*corev1.Pod) error
		// clearsNominations: the path clears lower-priority nominations to
		// the victims' nodes itself, once every eviction has succeeded.
		clearsNominations bool
	}{
		{
			name: "group preemption evicts its victims through the plugin's executor",
			evict: func(t *testing.T, p *Preemption, victims []*corev1.Pod) error {
				p.evict(context.Background(), trainer(), victims, nil)
				return nil
			},
			clearsNominations: true,
		},
		{
			name: "pod preemption evicts its victims through the evaluator's executor",
			evict: func(t *testing.T, p *Preemption, victims []*corev1.Pod) error {
				_, exec, err := newPodEvaluator(context.Background(), p.handle, p)
				require.NoError(t, err)
				preemptor := trainer().pod
				for _, v := range victims {
					if _, err := exec.PreemptPod(context.Background(), victimNode(v.Spec.NodeName), podPreemptor{preemptor}, v, Name); err != nil {
						return err
					}
				}
				return nil
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			web0 := &corev1.Pod{
				ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web-0", UID: "web-0-old", ResourceVersion: "1"},
				Spec:       corev1.PodSpec{NodeName: "node-a"},
			}
			web1 := &corev1.Pod{
				ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web-1", UID: "web-1-uid", ResourceVersion: "1"},
				Spec:       corev1.PodSpec{NodeName: "node-a"},
			}
			// web-0 was recreated, on another node, after the snapshot the
			// victims were chosen from.
			recreated := &corev1.Pod{
				ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web-0", UID: "web-0-new", ResourceVersion: "7"},
				Spec:       corev1.PodSpec{NodeName: "node-b"},
			}
			prio := int32(10)
			low := &corev1.Pod{
				ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "low", UID: "low-uid"},
				Spec:       corev1.PodSpec{Priority: &prio},
				Status:     corev1.PodStatus{NominatedNodeName: "node-a"},
			}
			client := fake.NewClientset(recreated, web1.DeepCopy(), low.DeepCopy())
			honourUIDs(client)
			recorder := events.NewFakeRecorder(10)
			p := evictor(&evictHandle{client: client, recorder: recorder, nominated: map[string][]*corev1.Pod{"node-a": {low}}})

			err := tt.evict(t, p, []*corev1.Pod{web0, web1})

			require.NoError(t, err, "a victim that is gone is no failure")
			now, err := client.CoreV1().Pods("ns").Get(context.Background(), "web-0", metav1.GetOptions{})
			require.NoError(t, err, "the pod recreated as web-0 was deleted")
			assert.Equal(t, types.UID("web-0-new"), now.UID)
			assert.False(t, hasCondition(now, corev1.DisruptionTarget), "the pod recreated as web-0 is marked DisruptionTarget")
			_, err = client.CoreV1().Pods("ns").Get(context.Background(), "web-1", metav1.GetOptions{})
			assert.True(t, apierrors.IsNotFound(err), "the victim still the pod the decision saw is deleted: %v", err)

			var got []string
			for len(recorder.Events) > 0 {
				got = append(got, <-recorder.Events)
			}
			assert.Len(t, got, 1, "one Preempted event, for web-1 only: %v", got)

			if tt.clearsNominations {
				pod, err := client.CoreV1().Pods("ns").Get(context.Background(), "low", metav1.GetOptions{})
				require.NoError(t, err)
				assert.Empty(t, pod.Status.NominatedNodeName, "the eviction was counted as failed")
			}
		})
	}
}

// podPreemptor is a single pod preempting, as the pod path's evaluator
// describes it to the executor.
type podPreemptor struct{ *corev1.Pod }

func (p podPreemptor) UID() types.UID        { return p.Pod.UID }
func (p podPreemptor) SchedulerName() string { return p.Spec.SchedulerName }
func (p podPreemptor) Obj() runtime.Object   { return p.Pod }
func (p podPreemptor) Pods() map[string]*corev1.Pod {
	return map[string]*corev1.Pod{p.Name: p.Pod}
}
func (p podPreemptor) Priority() int32 { return 1000 }
func (p podPreemptor) Type() string    { return "pod" }
