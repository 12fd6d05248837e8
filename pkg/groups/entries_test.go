package groups

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	v1alpha1 "github.com/phalanx-sched/phalanx/apis/scheduling/v1alpha1"
)

func TestEntriesListGroupsPlaceholdersAndMembers(t *testing.T) {
	c := NewCache()
	parent := Key{Kind: CompositeKind, Namespace: "ns", Name: "job"}
	leaf := Key{Kind: PodGroupKind, Namespace: "ns", Name: "w"}
	native := Key{Dialect: Native, Kind: PodGroupKind, Namespace: "ns", Name: "w"}
	c.SetGroup(leaf, Spec{Gang: true, MinCount: 2, Parent: "job"})
	c.SetGroup(native, Spec{Gang: true, MinCount: 1})
	for i, name := range []string{"w-1", "w-0"} {
		c.AddOrUpdatePod(&corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID(name), Labels: map[string]string{v1alpha1.PodGroupLabel: "w"}},
			Spec:       corev1.PodSpec{NodeName: []string{"", "n1"}[i]},
		})
	}

	all := c.Entries()
	require.Len(t, all, 3, "the leaf, the native group of the same name and the parent the leaf names")
	byKey := map[Key]Entry{}
	for _, e := range all {
		byKey[e.Key] = e
		assert.Nil(t, e.Members, "the listing carries no members")
	}
	assert.False(t, byKey[parent].Exists, "a parent no object defines is a placeholder")
	assert.Equal(t, []Key{leaf}, byKey[parent].Children)
	assert.Equal(t, 1, byKey[leaf].Pending)
	assert.Equal(t, 1, byKey[leaf].Bound)
	assert.Equal(t, "job", byKey[leaf].ParentName)

	e, ok := c.Entry(leaf)
	require.True(t, ok)
	require.Len(t, e.Members, 2)
	assert.Equal(t, "w-0", e.Members[0].Pod.Name, "members sorted by name")
	assert.Equal(t, Bound, e.Members[0].State)

	assert.Equal(t, []Key{leaf, native}, c.Find("ns", "w", nil), "both dialects' w")
	assert.Equal(t, []Key{native}, c.Find("ns", "w", func(k Key) bool { return k.Dialect == Native }))
	_, ok = c.Entry(Key{Namespace: "ns", Name: "missing"})
	assert.False(t, ok)
}
