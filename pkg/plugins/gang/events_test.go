package gang

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/phalanx-sched/phalanx/pkg/groups"
)

// TestGroupObjectHint: the scheduler's own status writes on PodGroups must
// not requeue members (every write would otherwise wake every held member
// of the namespace); spec changes and new groups in the namespace must.
func TestGroupObjectHint(t *testing.T) {
	obj := func(ns string, gen int64, uid string) *unstructured.Unstructured {
		u := &unstructured.Unstructured{}
		u.SetNamespace(ns)
		u.SetName("g")
		u.SetGeneration(gen)
		u.SetUID(types.UID(uid))
		return u
	}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p"}}
	cases := []struct {
		name     string
		old, new interface{}
		want     fwk.QueueingHint
	}{
		{"a group added in the namespace", nil, obj("ns", 1, "a"), fwk.Queue},
		{"a group added elsewhere", nil, obj("other", 1, "a"), fwk.QueueSkip},
		{"a spec change", obj("ns", 1, "a"), obj("ns", 2, "a"), fwk.Queue},
		{"a status-only write", obj("ns", 2, "a"), obj("ns", 2, "a"), fwk.QueueSkip},
		{"a re-created group", obj("ns", 1, "a"), obj("ns", 1, "b"), fwk.Queue},
	}
	for _, tc := range cases {
		got, err := sameNamespace(klog.Background(), pod, tc.old, tc.new)
		require.NoError(t, err)
		assert.Equal(t, tc.want, got, tc.name)
	}
}

func TestEventDedup(t *testing.T) {
	d := newEventDedup()
	assert.True(t, d.first("a", "m1"))
	assert.False(t, d.first("a", "m1"), "the same note twice on one pod is one event")
	assert.True(t, d.first("a", "m2"))

	assert.True(t, d.schedule("a"))
	assert.False(t, d.schedule("a"), "one pending timer per pod")
	d.scheduled("a")
	assert.True(t, d.schedule("a"))

	k := groups.Key{Kind: groups.PodGroupKind, Namespace: "ns", Name: "g"}
	assert.True(t, d.groupTurn(k, time.Hour))
	assert.False(t, d.groupTurn(k, time.Hour), "one held event per group and interval")
	assert.True(t, d.groupTurn(groups.Key{Kind: groups.PodGroupKind, Namespace: "ns", Name: "other"}, time.Hour))
	assert.True(t, d.groupTurn(k, 0), "after the interval the group may have another")
}

// TestTrimmedGroupObjectsAnswerAlike: the scheduler's informers of the
// group resources keep only eventMetadata's copy of each object, which
// must answer sameNamespace as the whole object does, and hold none of
// its spec, status or managed fields.
func TestTrimmedGroupObjectsAnswerAlike(t *testing.T) {
	full := func(ns string, gen int64, uid string) *unstructured.Unstructured {
		u := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "scheduling.phalanx.dev/v1alpha1",
			"kind":       "PodGroup",
			"spec":       map[string]any{"minCount": int64(8)},
			"status":     map[string]any{"conditions": []any{map[string]any{"type": "Scheduled", "message": strings.Repeat("x", 512)}}},
		}}
		u.SetNamespace(ns)
		u.SetName("g")
		u.SetGeneration(gen)
		u.SetUID(types.UID(uid))
		u.SetResourceVersion("42")
		u.SetManagedFields([]metav1.ManagedFieldsEntry{{Manager: "phalanx-scheduler", Operation: metav1.ManagedFieldsOperationUpdate}})
		u.SetAnnotations(map[string]string{"a": strings.Repeat("y", 512)})
		return u
	}
	trim := func(u *unstructured.Unstructured) *unstructured.Unstructured {
		out, err := eventMetadata(u)
		require.NoError(t, err)
		return out.(*unstructured.Unstructured)
	}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p"}}
	pairs := [][2]*unstructured.Unstructured{
		{nil, full("ns", 1, "a")},
		{nil, full("other", 1, "a")},
		{full("ns", 1, "a"), full("ns", 2, "a")},
		{full("ns", 2, "a"), full("ns", 2, "a")},
		{full("ns", 1, "a"), full("ns", 1, "b")},
	}
	for i, p := range pairs {
		var old, trimmedOld interface{}
		if p[0] != nil {
			old, trimmedOld = p[0], trim(p[0])
		}
		want, err := sameNamespace(klog.Background(), pod, old, p[1])
		require.NoError(t, err)
		got, err := sameNamespace(klog.Background(), pod, trimmedOld, trim(p[1]))
		require.NoError(t, err)
		assert.Equal(t, want, got, "pair %d", i)
	}

	kept := trim(full("ns", 3, "a"))
	assert.Equal(t, map[string]any{
		"apiVersion": "scheduling.phalanx.dev/v1alpha1",
		"kind":       "PodGroup",
		"metadata": map[string]any{
			"namespace": "ns", "name": "g", "uid": "a", "generation": int64(3), "resourceVersion": "42",
		},
	}, kept.Object)
	tomb := cache.DeletedFinalStateUnknown{Key: "ns/g", Obj: full("ns", 1, "a")}
	same, err := eventMetadata(tomb)
	require.NoError(t, err)
	assert.Equal(t, tomb, same, "tombstones pass unchanged")
}
