package placement_test

import (
	"runtime"
	"testing"

	"github.com/phalanx-sched/phalanx/pkg/placement"
)

// TestPlanAllocatesLittlePerNode guards what the scheduler pays per small
// gang on a large cluster: a table's plans share its node list and reuse
// its residual buffers, so a plan of 4 pods on 5,000 nodes allocates a few
// bytes per node (one eligibility flag per node and shape), not the rows
// of every resource and a heap of every node (before: 53 bytes per node
// with a rack key, 73 without).
func TestPlanAllocatesLittlePerNode(t *testing.T) {
	nodes := benchCluster(5000)
	table, err := placement.NewNodeTable(nodes)
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"", rackKey} {
		root := withKey(gang("ns/job", 4, 4, benchShape), key)
		if _, err := table.Plan(root, nil, placement.Options{}); err != nil {
			t.Fatal(err)
		}
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		if _, err := table.Plan(root, nil, placement.Options{}); err != nil {
			t.Fatal(err)
		}
		runtime.ReadMemStats(&after)
		perNode := float64(after.TotalAlloc-before.TotalAlloc) / float64(len(nodes))
		t.Logf("topology key %q: %.1f bytes allocated per node", key, perNode)
		if perNode > 12 {
			t.Errorf("topology key %q: a 4-pod plan allocated %.1f bytes per node, want at most 12", key, perNode)
		}
	}
}
