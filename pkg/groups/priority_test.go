package groups

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	schedulinglisters "k8s.io/client-go/listers/scheduling/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	v1alpha1 "github.com/phalanx-sched/phalanx/apis/scheduling/v1alpha1"
)

func priorityClass(name string, value int32, globalDefault bool, policy *corev1.PreemptionPolicy, created time.Time) *schedulingv1.PriorityClass {
	return &schedulingv1.PriorityClass{
		ObjectMeta:       metav1.ObjectMeta{Name: name, CreationTimestamp: metav1.NewTime(created)},
		Value:            value,
		GlobalDefault:    globalDefault,
		PreemptionPolicy: policy,
	}
}

func classLister(t *testing.T, classes ...*schedulingv1.PriorityClass) schedulinglisters.PriorityClassLister {
	t.Helper()
	indexer := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	for _, pc := range classes {
		require.NoError(t, indexer.Add(pc))
	}
	return schedulinglisters.NewPriorityClassLister(indexer)
}

func TestResolvePriority(t *testing.T) {
	never := ptr.To(corev1.PreemptNever)
	lower := ptr.To(corev1.PreemptLowerPriority)
	root := cpgKey("root")
	tests := []struct {
		name       string
		root       Info
		classes    []*schedulingv1.PriorityClass
		want       int32
		wantPolicy corev1.PreemptionPolicy
		errHas     []string
	}{
		{
			name:       "nothing set and no classes gives 0 and PreemptLowerPriority",
			root:       Info{Key: root},
			want:       0,
			wantPolicy: corev1.PreemptLowerPriority,
		},
		{
			name:       "nothing set and no default class gives 0",
			root:       Info{Key: root},
			classes:    []*schedulingv1.PriorityClass{priorityClass("high", 1000, false, never, t0)},
			want:       0,
			wantPolicy: corev1.PreemptLowerPriority,
		},
		{
			name:       "spec.priority is used when no class is named",
			root:       Info{Key: root, Priority: ptr.To(int32(7))},
			want:       7,
			wantPolicy: corev1.PreemptLowerPriority,
		},
		{
			name:       "spec.priority wins over the globalDefault class",
			root:       Info{Key: root, Priority: ptr.To(int32(7))},
			classes:    []*schedulingv1.PriorityClass{priorityClass("default", 50, true, never, t0)},
			want:       7,
			wantPolicy: corev1.PreemptLowerPriority,
		},
		{
			name:       "spec.priority wins over the named class's value",
			root:       Info{Key: root, Priority: ptr.To(int32(7)), PriorityClassName: "high"},
			classes:    []*schedulingv1.PriorityClass{priorityClass("high", 1000, false, nil, t0)},
			want:       7,
			wantPolicy: corev1.PreemptLowerPriority,
		},
		{
			name:       "a negative spec.priority is kept",
			root:       Info{Key: root, Priority: ptr.To(int32(-5))},
			want:       -5,
			wantPolicy: corev1.PreemptLowerPriority,
		},
		{
			name: "priorityClassName resolves through the lister",
			root: Info{Key: root, PriorityClassName: "high"},
			classes: []*schedulingv1.PriorityClass{
				priorityClass("high", 1000, false, nil, t0),
				priorityClass("default", 50, true, nil, t0),
			},
			want:       1000,
			wantPolicy: corev1.PreemptLowerPriority,
		},
		{
			name:    "a priorityClassName that does not exist is an error naming the class",
			root:    Info{Key: root, PriorityClassName: "hihg"},
			classes: []*schedulingv1.PriorityClass{priorityClass("high", 1000, false, nil, t0)},
			errHas:  []string{`"hihg"`, "not found", "priorityClassName"},
		},
		{
			name:       "the globalDefault class applies when nothing is set",
			root:       Info{Key: root},
			classes:    []*schedulingv1.PriorityClass{priorityClass("other", 9, false, nil, t0), priorityClass("default", 50, true, nil, t0)},
			want:       50,
			wantPolicy: corev1.PreemptLowerPriority,
		},
		{
			name: "the oldest of several globalDefault classes applies",
			root: Info{Key: root},
			classes: []*schedulingv1.PriorityClass{
				priorityClass("newer", 60, true, nil, t0.Add(time.Hour)),
				priorityClass("older", 40, true, nil, t0),
				priorityClass("newest", 80, true, nil, t0.Add(2*time.Hour)),
			},
			want:       40,
			wantPolicy: corev1.PreemptLowerPriority,
		},
		{
			name:       "the preemption policy comes from the named class when the group has none",
			root:       Info{Key: root, PriorityClassName: "batch"},
			classes:    []*schedulingv1.PriorityClass{priorityClass("batch", 10, false, never, t0)},
			want:       10,
			wantPolicy: corev1.PreemptNever,
		},
		{
			name:       "the preemption policy comes from the globalDefault class when nothing is set",
			root:       Info{Key: root},
			classes:    []*schedulingv1.PriorityClass{priorityClass("default", 50, true, never, t0)},
			want:       50,
			wantPolicy: corev1.PreemptNever,
		},
		{
			name:       "the group's preemption policy wins over its class's",
			root:       Info{Key: root, PriorityClassName: "batch", PreemptionPolicy: lower},
			classes:    []*schedulingv1.PriorityClass{priorityClass("batch", 10, false, never, t0)},
			want:       10,
			wantPolicy: corev1.PreemptLowerPriority,
		},
		{
			name:       "the group's preemption policy applies without a class",
			root:       Info{Key: root, Priority: ptr.To(int32(3)), PreemptionPolicy: never},
			want:       3,
			wantPolicy: corev1.PreemptNever,
		},
		{
			name:       "spec.priority and the named class's policy combine",
			root:       Info{Key: root, Priority: ptr.To(int32(7)), PriorityClassName: "batch"},
			classes:    []*schedulingv1.PriorityClass{priorityClass("batch", 10, false, never, t0)},
			want:       7,
			wantPolicy: corev1.PreemptNever,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, policy, err := ResolvePriority(tt.root, classLister(t, tt.classes...))
			if tt.errHas != nil {
				require.Error(t, err)
				for _, s := range tt.errHas {
					assert.Contains(t, err.Error(), s)
				}
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, got, "priority")
			assert.Equal(t, tt.wantPolicy, policy, "preemption policy")
		})
	}
}

func TestResolvePriorityFromCachedRoot(t *testing.T) {
	c := NewCache()
	root := composite("root", 1, "")
	root.Spec.PriorityClassName = "batch"
	root.Spec.PreemptionPolicy = ptr.To(v1alpha1.PreemptNever)
	c.SetComposite(root)
	leaf := podGroup("leaf", 1, "root")
	leaf.Spec.Priority = ptr.To(int32(999)) // ignored: only the root counts
	c.SetPodGroup(leaf)
	pod := addMembers(c, inPodGroup("leaf"), "p", Pending)[0]

	ch, _, err := c.ChainOf(pod)
	require.NoError(t, err)
	got, policy, err := ResolvePriority(ch.Root(), classLister(t, priorityClass("batch", 100, false, nil, t0)))
	require.NoError(t, err)
	assert.Equal(t, int32(100), got, "the root's class decides the hierarchy's priority")
	assert.Equal(t, corev1.PreemptNever, policy, "the root's PreemptNever is converted")
}
