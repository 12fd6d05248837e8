package report

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
)

func TestComputeSpread(t *testing.T) {
	nodes := []*corev1.Node{node("a1", "a"), node("a2", "a"), node("b1", "b"), node("c1", "c")}
	pods := []*corev1.Pod{
		pod("one-0", "a1", "100m"), pod("one-1", "a2", "100m"), // one rack
		pod("two-0", "a1", "100m"), pod("two-1", "b1", "100m"), // two racks
		pod("three-0", "a2", "100m"), pod("three-1", "b1", "100m"), pod("three-2", "c1", "100m"),
		pod("late-0", "c1", "100m"), pod("late-1", "", "100m"), // not placed
	}
	groups := []Group{
		{Name: "one", Members: []string{"one-0", "one-1"}},
		{Name: "two", Members: []string{"two-0", "two-1"}},
		{Name: "three", Members: []string{"three-0", "three-1", "three-2"}},
		{Name: "late", Members: []string{"late-0", "late-1"}},
	}
	s := ComputeSpread(groups, nodes, pods, "rack")
	assert.Equal(t, Spread{Key: "rack", Gangs: 4, Placed: 3, OneDomain: 1, MeanDomains: 2, MaxDomains: 3}, s)

	sums := Summarize([]Result{
		{Case: "c", Arm: "phalanx", Run: 1, Spread: &Spread{Key: "rack", MeanDomains: 3}},
		{Case: "c", Arm: "phalanx", Run: 2, Spread: &s},
		{Case: "c", Arm: "phalanx", Run: 3, Spread: &Spread{Key: "rack", MeanDomains: 1}},
	})
	require.Len(t, sums, 1)
	assert.Equal(t, &s, sums[0].Spread, "the median run by mean domains")
	var out bytes.Buffer
	require.NoError(t, writeSpread(&out, sums))
	assert.Contains(t, out.String(), "Spread of the gangs")
	assert.Regexp(t, `c\s+precreated\s+phalanx\s+3/4\s+1\s+2\.00\s+3\s+rack`, out.String())
}
