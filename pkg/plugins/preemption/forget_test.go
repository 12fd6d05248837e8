package preemption

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	v1alpha1 "github.com/phalanx-sched/phalanx/apis/scheduling/v1alpha1"
	"github.com/phalanx-sched/phalanx/pkg/groupcache"
	"github.com/phalanx-sched/phalanx/pkg/groups"
	"github.com/phalanx-sched/phalanx/pkg/plugins/probe"
)

// TestPendingEvictionsFollowGroupLifecycle: the victims remembered for a
// gang that preempted are forgotten when the gang is gone, even if it
// never asks again (it bound, or was deleted).
func TestPendingEvictionsFollowGroupLifecycle(t *testing.T) {
	const n = 10000
	fed := groupcache.NewFed()
	p := &Preemption{groups: fed, pending: map[groups.Key]*pendingEviction{}, prober: probe.New(nil)}
	fed.SubscribeGone(p.forgetGroup)
	member := func(gang string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: gang + "-0", UID: types.UID(gang),
			Labels: map[string]string{v1alpha1.LightweightNameLabel: gang, v1alpha1.LightweightMinAvailableLabel: "1"}}}
	}
	for i := 0; i < n; i++ {
		gang := fmt.Sprintf("g%05d", i)
		fed.OnPod(member(gang))
		victim := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "victim-" + gang, UID: types.UID("victim-" + gang)}}
		p.remember(groups.Key{Kind: groups.LabelKind, Namespace: "ns", Name: gang}, []*corev1.Pod{victim}, nil)
	}
	pending := func() int {
		p.mu.Lock()
		defer p.mu.Unlock()
		return len(p.pending)
	}
	require.Equal(t, n, pending())
	for i := 0; i < n; i++ {
		fed.OnPodDeleted(member(fmt.Sprintf("g%05d", i)))
	}
	assert.Zero(t, pending())
}
