package groups

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	xv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	v1alpha1 "github.com/phalanx-sched/phalanx/apis/scheduling/v1alpha1"
)

func TestAttach(t *testing.T) {
	const spec = "spec.schedulingGroup.podGroupName"
	tests := []struct {
		name    string
		pod     *corev1.Pod
		want    Attachment
		wantOK  bool
		wantErr []string // substrings the error must contain; nil for no error
	}{
		{
			name:   "a pod without labels or schedulingGroup is in no group",
			pod:    newPod("p"),
			wantOK: false,
		},
		{
			name:   "a pod with unrelated labels is in no group",
			pod:    newPod("p", withLabel("app", "web")),
			wantOK: false,
		},
		{
			name:   "the pod-group label attaches the pod to that PodGroup",
			pod:    newPod("p", inPodGroup("train")),
			want:   Attachment{Key: pgKey("train")},
			wantOK: true,
		},
		{
			name:   "the name and min-available label pair forms a label gang of that size",
			pod:    newPod("p", inLabelGang("train", "3")),
			want:   Attachment{Key: labelKey("train"), MinAvailable: 3},
			wantOK: true,
		},
		{
			name:   "spec.schedulingGroup.podGroupName attaches the pod to that upstream scheduling.k8s.io PodGroup",
			pod:    newPod("p", inSpecGroup("train")),
			want:   Attachment{Key: Key{Dialect: Native, Kind: PodGroupKind, Namespace: testNS, Name: "train"}},
			wantOK: true,
		},
		{
			name:   "the scheduling.x-k8s.io/pod-group label attaches the pod to that scheduler-plugins PodGroup",
			pod:    newPod("p", withLabel(xv1alpha1.PodGroupLabel, "train")),
			want:   Attachment{Key: Key{Dialect: Coscheduling, Kind: PodGroupKind, Namespace: testNS, Name: "train"}},
			wantOK: true,
		},
		{
			name:    "an empty scheduling.x-k8s.io/pod-group label is an error naming the label",
			pod:     newPod("p", withLabel(xv1alpha1.PodGroupLabel, "")),
			wantOK:  true,
			wantErr: []string{xv1alpha1.PodGroupLabel, "empty"},
		},
		{
			name:    "the scheduler-plugins label and spec.schedulingGroup name groups in two APIs: an error naming both",
			pod:     newPod("p", withLabel(xv1alpha1.PodGroupLabel, "train"), inSpecGroup("train")),
			wantOK:  true,
			wantErr: []string{xv1alpha1.PodGroupLabel, spec, "PodGroup.scheduling.x-k8s.io", "PodGroup.scheduling.k8s.io", "one group"},
		},
		{
			name:    "the Phalanx label and the scheduler-plugins label are an error naming both",
			pod:     newPod("p", inPodGroup("train"), withLabel(xv1alpha1.PodGroupLabel, "train")),
			wantOK:  true,
			wantErr: []string{v1alpha1.PodGroupLabel, xv1alpha1.PodGroupLabel, "one group"},
		},
		{
			name:   "the pod-group label takes precedence over the label pair",
			pod:    newPod("p", inPodGroup("explicit"), inLabelGang("implicit", "2")),
			want:   Attachment{Key: pgKey("explicit")},
			wantOK: true,
		},
		{
			name:    "the pod-group label and a schedulingGroup with the same name are two groups in two APIs: an error",
			pod:     newPod("p", inPodGroup("train"), inSpecGroup("train")),
			wantOK:  true,
			wantErr: []string{v1alpha1.PodGroupLabel, spec, "PodGroup.scheduling.phalanx.dev", "PodGroup.scheduling.k8s.io"},
		},
		{
			name:   "the attachment is in the pod's own namespace",
			pod:    newPod("p", inPodGroup("train"), func(p *corev1.Pod) { p.Namespace = "other" }),
			want:   Attachment{Key: Key{Kind: PodGroupKind, Namespace: "other", Name: "train"}},
			wantOK: true,
		},
		{
			name:    "the pod-group label and a schedulingGroup naming another group are an error naming both",
			pod:     newPod("p", inPodGroup("a"), inSpecGroup("b")),
			wantOK:  true,
			wantErr: []string{v1alpha1.PodGroupLabel, `"a"`, spec, `"b"`, "one group"},
		},
		{
			name:    "the label pair together with a schedulingGroup is an error naming both",
			pod:     newPod("p", inLabelGang("a", "2"), inSpecGroup("b")),
			wantOK:  true,
			wantErr: []string{v1alpha1.LightweightNameLabel, spec},
		},
		{
			name:    "an empty pod-group label is an error naming the label",
			pod:     newPod("p", inPodGroup("")),
			wantOK:  true,
			wantErr: []string{v1alpha1.PodGroupLabel, "empty"},
		},
		{
			name:    "an empty gang name label is an error naming the label",
			pod:     newPod("p", inLabelGang("", "2")),
			wantOK:  true,
			wantErr: []string{v1alpha1.LightweightNameLabel, "empty"},
		},
		{
			name:    "a gang name without min-available is an error naming both labels",
			pod:     newPod("p", withLabel(v1alpha1.LightweightNameLabel, "train")),
			wantOK:  true,
			wantErr: []string{v1alpha1.LightweightNameLabel, v1alpha1.LightweightMinAvailableLabel, "missing"},
		},
		{
			name:    "a non-numeric min-available is an error naming the label and value",
			pod:     newPod("p", inLabelGang("train", "abc")),
			wantOK:  true,
			wantErr: []string{v1alpha1.LightweightMinAvailableLabel, `"abc"`, "positive integer"},
		},
		{
			name:    "a min-available of zero is an error naming the label and value",
			pod:     newPod("p", inLabelGang("train", "0")),
			wantOK:  true,
			wantErr: []string{v1alpha1.LightweightMinAvailableLabel, `"0"`, "positive integer"},
		},
		{
			name:    "a negative min-available is an error naming the label and value",
			pod:     newPod("p", inLabelGang("train", "-1")),
			wantOK:  true,
			wantErr: []string{v1alpha1.LightweightMinAvailableLabel, `"-1"`, "positive integer"},
		},
		{
			name:    "an empty min-available is an error naming the label",
			pod:     newPod("p", inLabelGang("train", "")),
			wantOK:  true,
			wantErr: []string{v1alpha1.LightweightMinAvailableLabel, "positive integer"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok, err := Attach(tt.pod)
			assert.Equal(t, tt.wantOK, ok, "ok")
			if tt.wantErr != nil {
				require.Error(t, err)
				for _, s := range tt.wantErr {
					assert.Contains(t, err.Error(), s)
				}
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
}
