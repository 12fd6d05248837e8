package planinput

import (
	"fmt"
	"math/rand"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"

	"github.com/phalanx-sched/phalanx/pkg/placement"
)

func snapshotNode(name string, cpu string) *framework.NodeInfo {
	ni := framework.NewNodeInfo()
	ni.SetNode(&corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"rack": "r-" + name[:1]}},
		Status: corev1.NodeStatus{Allocatable: corev1.ResourceList{
			corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse("8Gi"), corev1.ResourcePods: resource.MustParse("10"),
		}},
	})
	return ni
}

// fresh is what converting the snapshot from scratch gives, in name order.
func fresh(infos []fwk.NodeInfo, nominated func(string) []fwk.PodInfo, in map[types.UID]bool) []placement.Node {
	out := NodesFromSnapshot(infos, nominated, in)
	slices.SortFunc(out, func(a, b placement.Node) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// withUsage applies reserved usage to a table's nodes, as the planner does.
func withUsage(nodes []placement.Node, reserved []placement.Usage) []placement.Node {
	for _, u := range reserved {
		for i := range nodes {
			if nodes[i].Name != u.Node {
				continue
			}
			req := placement.Resources{}
			for k, v := range nodes[i].Requested {
				req[k] = v
			}
			for k, v := range u.Requested {
				req[k] += v
			}
			nodes[i].Requested = req
			nodes[i].PodCount += u.Pods
		}
	}
	return nodes
}

// TestSnapshotNodesMatchesAFreshConversion drives a SnapshotNodes through
// random snapshot changes (pods bound and removed, nodes added, replaced
// and removed, nominations coming and going) and checks after every step
// that it answers exactly what a from-scratch conversion does, and that
// nominations never leak into what it remembers.
func TestSnapshotNodesMatchesAFreshConversion(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	var infos []fwk.NodeInfo
	for i := range 12 {
		infos = append(infos, snapshotNode(fmt.Sprintf("%c%02d", 'a'+rune(i%3), i), "4"))
	}
	nominations := map[string][]fwk.PodInfo{}
	nominated := func(n string) []fwk.PodInfo { return nominations[n] }
	members := map[types.UID]bool{}
	var cache SnapshotNodes
	pods := 0
	for step := range 400 {
		switch op := rng.Intn(10); {
		case op < 4: // a pod bound
			ni := infos[rng.Intn(len(infos))].(*framework.NodeInfo)
			pods++
			ni.AddPod(testPod(fmt.Sprintf("p%d", pods), fmt.Sprintf("%dm", 10*(1+rng.Intn(5))), ni.Node().Name))
		case op < 5: // a pod removed
			ni := infos[rng.Intn(len(infos))].(*framework.NodeInfo)
			if ps := ni.GetPods(); len(ps) > 0 {
				require.NoError(t, ni.RemovePod(klog.Background(), ps[0].GetPod()))
			}
		case op < 6: // a node replaced (new object, maybe new capacity)
			i := rng.Intn(len(infos))
			infos[i] = snapshotNode(infos[i].Node().Name, fmt.Sprint(2+rng.Intn(6)))
		case op < 7: // a node added or removed
			if rng.Intn(2) == 0 && len(infos) > 1 {
				i := rng.Intn(len(infos))
				infos = append(infos[:i:i], infos[i+1:]...)
			} else {
				infos = append(infos, snapshotNode(fmt.Sprintf("%c%02d", 'a'+rune(rng.Intn(3)), 12+step), "4"))
			}
		case op < 9: // a nomination, inside or outside the planned hierarchy
			n := infos[rng.Intn(len(infos))].Node().Name
			pods++
			p := testPod(fmt.Sprintf("nom%d", pods), "100m", "")
			if rng.Intn(3) == 0 {
				members[p.UID] = true
			}
			nominations[n] = append(nominations[n], &framework.PodInfo{Pod: p})
		default:
			clear(nominations)
		}
		// The snapshot's own order is not name order, and it changes
		// now and then.
		if step == 0 || rng.Intn(8) == 0 {
			rng.Shuffle(len(infos), func(i, j int) { infos[i], infos[j] = infos[j], infos[i] })
		}
		table, reserved, err := cache.Table(infos, nominated, members)
		require.NoError(t, err)
		// What the table holds is the snapshot alone; nominations are
		// reserved usage on top.
		require.Equal(t, fresh(infos, func(string) []fwk.PodInfo { return nil }, nil), table.Nodes(), "step %d", step)
		require.Equal(t, fresh(infos, nominated, members), withUsage(table.Nodes(), reserved), "step %d", step)
	}
	assert.Positive(t, pods)
}
