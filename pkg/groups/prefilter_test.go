package groups

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestPreFilterFactsListOnlyWhatNoMemoCovers: one read answers every
// PreFilter check, and lists a hierarchy's members only for the checks
// whose memo does not cover the revision it read; a member added moves the
// revision, and the next read lists again.
func TestPreFilterFactsListOnlyWhatNoMemoCovers(t *testing.T) {
	f := NewCache()
	f.SetPodGroup(podGroup("pg", 3, ""))
	pods := addMembers(f, inPodGroup("pg"), "m", Pending, Assumed, Bound, Finished)
	v := f.ResolveView(pods[0], nil)
	require.True(t, v.Resolved())

	all := f.PreFilterFacts(v, PreFilterAsk{Sized: &Memo{}, Room: &Memo{}, Mend: true})
	require.True(t, all.RevKnown)
	assert.True(t, all.Quorum, "three members exist")
	assert.Equal(t, pgKey("pg"), all.Root)
	require.True(t, all.LeafOK)
	assert.Equal(t, 3, all.Leaf.MinCount)
	assert.Equal(t, []string{"m-0", "m-1", "m-2"}, names(all.Members), "the live members, sorted")
	assert.Len(t, all.LeafMembers, 3)
	assert.Len(t, all.Placed, 2, "the assumed and the bound member")
	require.True(t, all.UnitOK)
	assert.Equal(t, pgKey("pg"), all.Unit)
	assert.False(t, all.UnitWhole)
	assert.Equal(t, [2]int{1, 3}, [2]int{all.UnitBound, all.UnitNeed})
	assert.Equal(t, 1, all.UnitAssumed)
	assert.Equal(t, []string{"m-2"}, names(all.ScheduledBound))
	assert.Equal(t, []string{"m-3"}, names(all.Finished))

	at := Memo{Rev: all.Rev, OK: true}
	none := f.PreFilterFacts(v, PreFilterAsk{Validated: at, Sized: &at, Room: &at})
	assert.Equal(t, all.Rev, none.Rev)
	assert.Nil(t, none.Members, "the validation memo covers the revision")
	assert.Nil(t, none.LeafMembers, "the size memo covers the revision")
	assert.Nil(t, none.Placed, "the minResources pass covers the revision")
	assert.Zero(t, none.UnitBound, "no recovery asked for")
	assert.True(t, none.Quorum)

	unasked := f.PreFilterFacts(v, PreFilterAsk{Validated: at})
	assert.Nil(t, unasked.LeafMembers)
	assert.Nil(t, unasked.Placed)

	addMembers(f, inPodGroup("pg"), "n", Pending)
	moved := f.PreFilterFacts(v, PreFilterAsk{Validated: at, Sized: &at})
	assert.Greater(t, moved.Rev, all.Rev, "a member added moves the revision")
	assert.Len(t, moved.Members, 4, "and the memo no longer covers it")
	assert.Len(t, moved.LeafMembers, 4)
}
