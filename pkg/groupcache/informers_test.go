package groupcache

import (
	"testing"

	"github.com/stretchr/testify/assert"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	v1alpha1 "github.com/phalanx-sched/phalanx/apis/scheduling/v1alpha1"
)

// TestSpecChanged: the cache ignores the scheduler's own status writes
// (same generation), and takes spec changes and re-created objects.
func TestSpecChanged(t *testing.T) {
	pg := func(gen int64, uid string, cond string) *v1alpha1.PodGroup {
		p := &v1alpha1.PodGroup{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "g", Generation: gen, UID: types.UID(uid)}}
		if cond != "" {
			p.Status.Conditions = []metav1.Condition{{Type: cond}}
		}
		return p
	}
	assert.False(t, specChanged(pg(1, "a", ""), pg(1, "a", v1alpha1.PodGroupSchedulable)), "a status write")
	assert.True(t, specChanged(pg(1, "a", ""), pg(2, "a", "")), "a spec change")
	assert.True(t, specChanged(pg(1, "a", ""), pg(1, "b", "")), "a re-created object")
	assert.True(t, specChanged("not an object", pg(1, "a", "")), "an unexpected type is taken")
}
