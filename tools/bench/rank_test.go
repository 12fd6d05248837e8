package bench

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	v1alpha1 "github.com/phalanx-sched/phalanx/apis/scheduling/v1alpha1"
)

// The ranked bench case gives member i of a gang rank i, and its twin
// differs in nothing else: the ring is read in the same member order.
func TestRankCasesDifferOnlyInRanks(t *testing.T) {
	ranked := findCase(t, Cases(false), "_Ranked")
	unranked := findCase(t, Cases(false), "_Unranked")
	require.NotEmpty(t, ranked.RingKeys)
	assert.Equal(t, ranked.RingKeys, unranked.RingKeys)
	for _, name := range []string{"gang-7-0", "gang-7-31"} {
		p := benchPod(ranked, name, "gang-7", ArmPhalanx, "")
		q := benchPod(unranked, name, "gang-7", ArmPhalanx, "")
		assert.Equal(t, name[len("gang-7-"):], p.Annotations[v1alpha1.RankAnnotation], "%s's rank", name)
		assert.NotContains(t, q.Annotations, v1alpha1.RankAnnotation, "the twin's %s has no rank", name)
		p.Annotations = nil
		assert.Equal(t, q, p)
	}
}
