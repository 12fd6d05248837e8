package topology

import (
	"testing"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	v1alpha1 "github.com/phalanx-sched/phalanx/apis/scheduling/v1alpha1"
	"github.com/phalanx-sched/phalanx/pkg/groups"
	"github.com/phalanx-sched/phalanx/pkg/placement"
)

func rankedPod(name, uid, rank string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: types.UID(uid),
		Annotations: map[string]string{v1alpha1.RankAnnotation: rank}}}
}

// A rank's node outlives the pod: the plugin remembers it from the plan
// (pending members) and from the cluster (bound ones), and a re-created
// member of the same leaf and rank, under a new UID, is given it as the
// node to prefer. Another leaf's rank 0 is not.
func TestRanksRememberedPerLeafAndRank(t *testing.T) {
	root := groups.Key{Kind: groups.PodGroupKind, Namespace: "ns", Name: "job"}
	tree := &groups.Tree{Info: groups.Info{Key: root}, Members: []groups.Member{
		{Pod: rankedPod("job-0", "uid-0", "0"), State: groups.Bound, Node: "n1"},
		{Pod: rankedPod("job-1", "uid-1", "1"), State: groups.Pending},
		{Pod: &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "launcher", UID: "uid-l"}}, State: groups.Pending},
	}}
	topo := &Topology{}
	topo.rememberRanks(root, tree, map[string]string{"uid-1": "n2", "uid-l": "n3"})

	input := &placement.Group{Name: root.String(), Pending: []placement.Pod{
		{Key: "uid-0-again", Rank: 0 << 32, Ranked: true},
		{Key: "uid-1-again", Rank: 1 << 32, Ranked: true},
		{Key: "uid-l-again"},
	}}
	assert.True(t, topo.preferRanks(root, input), "input has ranked members")
	assert.Equal(t, "n1", input.Pending[0].Prefer, "rank 0 ran on n1")
	assert.Equal(t, "n2", input.Pending[1].Prefer, "rank 1 was planned on n2")
	assert.Empty(t, input.Pending[2].Prefer, "an unranked member has no place of its own")

	other := &placement.Group{Name: "ns/other", Pending: []placement.Pod{{Key: "x", Ranked: true}}}
	topo.preferRanks(root, other)
	assert.Empty(t, other.Pending[0].Prefer, "ranks are per leaf")
	assert.False(t, topo.preferRanks(root, &placement.Group{Name: "ns/plain", Pending: []placement.Pod{{Key: "y"}}}), "nothing ranked to remember")

}
