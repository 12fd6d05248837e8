package groups

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
)

// disagreeing is a label gang "lg" whose pods a..d say min-available 5 and
// whose pod e says 1.
func disagreeing() []*corev1.Pod {
	var pods []*corev1.Pod
	for _, name := range []string{"a", "b", "c", "d"} {
		pods = append(pods, newPod(name, inLabelGang("lg", "5")))
	}
	return append(pods, newPod("e", inLabelGang("lg", "1")))
}

func TestLabelGangMembersMustAgreeOnMinAvailable(t *testing.T) {
	orders := map[string][]int{
		"the odd pod arrives last":  {0, 1, 2, 3, 4},
		"the odd pod arrives first": {4, 0, 1, 2, 3},
		"the odd pod arrives amid":  {0, 1, 4, 2, 3},
	}
	for order, idx := range orders {
		t.Run("when "+order+", the group is invalid, names the pods and keeps the largest minimum", func(t *testing.T) {
			c := NewCache()
			pods := disagreeing()
			for _, i := range idx {
				c.AddOrUpdatePod(pods[i])
			}
			info, ok := c.Get(labelKey("lg"))
			require.True(t, ok)
			assert.Equal(t, 5, info.MinCount)
			assert.Equal(t, MsgMinAvailableMismatch+": pods a, b, c and 1 more "+
				"pod-group.scheduling.sigs.k8s.io/min-available=5; pod e pod-group.scheduling.sigs.k8s.io/min-available=1", info.Invalid)
			assertConsistent(t, c)
		})
	}

	t.Run("no member passes quorum while they disagree, even with every member placed", func(t *testing.T) {
		c := NewCache()
		pods := disagreeing()
		for _, p := range pods {
			c.AddOrUpdatePod(p)
		}
		for n, p := range pods {
			c.MarkAssumedOn(p, "node")
			for _, q := range pods {
				ok, _, err := c.Quorum(q, ByPlaced)
				var invalid *InvalidError
				assert.ErrorAs(t, err, &invalid, "%d placed, pod %s", n+1, q.Name)
				assert.False(t, ok, "%d placed, pod %s passed quorum", n+1, q.Name)
			}
		}
	})

	t.Run("the group is valid again once the odd pod agrees, and needs all five", func(t *testing.T) {
		c := NewCache()
		pods := disagreeing()
		for _, p := range pods {
			c.AddOrUpdatePod(p)
		}
		c.AddOrUpdatePod(with(pods[4], inLabelGang("lg", "5")))
		info, _ := c.Get(labelKey("lg"))
		assert.Empty(t, info.Invalid)
		assert.Equal(t, 5, info.MinCount)
		c.MarkAssumedOn(pods[0], "node")
		ok, short, err := c.Quorum(pods[0], ByPlaced)
		require.NoError(t, err)
		assert.False(t, ok)
		assert.Equal(t, Shortfall{Key: labelKey("lg"), Leaf: true, Have: 1, Need: 5}, short)
		assertConsistent(t, c)
	})

	t.Run("the group is valid again once the odd pod is deleted or finishes", func(t *testing.T) {
		for name, gone := range map[string]func(*Cache, *corev1.Pod){
			"deleted":  func(c *Cache, p *corev1.Pod) { c.DeletePod(p) },
			"finished": func(c *Cache, p *corev1.Pod) { c.AddOrUpdatePod(with(p, inPhase(corev1.PodSucceeded))) },
		} {
			c := NewCache()
			pods := disagreeing()
			for _, p := range pods {
				c.AddOrUpdatePod(p)
			}
			gone(c, pods[4])
			info, _ := c.Get(labelKey("lg"))
			assert.Empty(t, info.Invalid, name)
			assert.Equal(t, 5, info.MinCount, name)
			assertConsistent(t, c)
		}
	})

	t.Run("the minimum does not flap with updates of members that disagree", func(t *testing.T) {
		c := NewCache()
		pods := disagreeing()
		for _, p := range pods {
			c.AddOrUpdatePod(p)
		}
		for i := range 10 {
			p := pods[i%len(pods)]
			c.AddOrUpdatePod(with(p, withLabel("touched", fmt.Sprint(i))))
			info, _ := c.Get(labelKey("lg"))
			assert.Equal(t, 5, info.MinCount, "after update %d of %s", i, p.Name)
			assert.NotEmpty(t, info.Invalid)
		}
	})
}
