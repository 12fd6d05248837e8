package report

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
)

func TestComputeRing(t *testing.T) {
	nodes := []*corev1.Node{node("a1", "a"), node("a2", "a"), node("b1", "b")}
	pods := []*corev1.Pod{
		// In rank order: a1 a1 a2 a2 — one rack, 2 node crossings.
		pod("ordered-0", "a1", "1"), pod("ordered-1", "a1", "1"), pod("ordered-2", "a2", "1"), pod("ordered-3", "a2", "1"),
		// a1 b1 a1 b1 — every neighbour crosses both levels.
		pod("mixed-0", "a1", "1"), pod("mixed-1", "b1", "1"), pod("mixed-2", "a1", "1"), pod("mixed-3", "b1", "1"),
		pod("late-0", "", "1"),
	}
	groups := []Group{
		{Name: "ordered", Members: []string{"ordered-0", "ordered-1", "ordered-2", "ordered-3"}},
		{Name: "mixed", Members: []string{"mixed-0", "mixed-1", "mixed-2", "mixed-3"}},
		{Name: "late", Members: []string{"late-0"}},
	}
	r := ComputeRing(groups, nodes, pods, []string{"rack", "host"})
	assert.Equal(t, Ring{Keys: []string{"rack", "host"}, Gangs: 3, Placed: 2, Mean: []float64{2, 3}, Max: []int{4, 4}}, r)

	sums := Summarize([]Result{{Case: "c", Arm: "phalanx", Run: 1, Ring: &r}})
	var out bytes.Buffer
	require.NoError(t, writeRing(&out, sums))
	assert.Regexp(t, `c\s+precreated\s+phalanx\s+2/3\s+rack 2\.0 \(4\), host 3\.0 \(4\)`, out.String())
}
