package integration

import (
	"context"
	"fmt"
	"os"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1alpha1 "github.com/phalanx-sched/phalanx/apis/scheduling/v1alpha1"
	"github.com/phalanx-sched/phalanx/tools/sandbox"
)

// preferringGang is a gang that requires one domain of required (none when
// "") and prefers levels, narrowest first.
func preferringGang(name string, minCount int32, required string, levels ...string) *v1alpha1.PodGroup {
	pg := gangPG(name, minCount)
	pg.Spec.SchedulingConstraints = &v1alpha1.PodGroupSchedulingConstraints{PreferredTopology: topo(levels...)}
	if required != "" {
		pg.Spec.SchedulingConstraints.Topology = topo(required)
	}
	return pg
}

// gangMembers creates n members of group named <group>-<i> requesting cpu.
func gangMembers(t *testing.T, c *sandbox.Cluster, ns, group string, n int, cpu string) {
	t.Helper()
	for i := range n {
		createPods(t, c, ns, member{name: fmt.Sprintf("%s-%d", group, i), labels: inGroup(group), cpu: cpu})
	}
}

// emptyNamespace deletes every pod of ns and waits until they are gone, so
// the next case starts on an empty cluster.
func emptyNamespace(t *testing.T, c *sandbox.Cluster, ns string) {
	t.Helper()
	ctx := context.Background()
	zero := int64(0)
	require.NoError(t, c.Client.CoreV1().Pods(ns).DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: &zero}, metav1.ListOptions{}))
	eventually(t, 30*time.Second, "pods of "+ns+" gone", func() (bool, error) {
		pods, err := c.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		return err == nil && len(pods.Items) == 0, err
	})
}

func keys(m map[string]int) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// TestPreferredTopology: gangs that require a zone and prefer a rack, then
// a block, on 2 zones × 2 blocks × 2 racks × 2 nodes of 4 cpu (a rack holds
// 2 pods of 4 cpu, a block 4, a zone 8). The scheduler packs a gang into
// one rack when one holds it, else into the fewest racks of one block, else
// the fewest blocks of one zone, never across zones, keeps a re-created
// member in its gang's racks, and says why in a PreferredTopology
// condition.
func TestPreferredTopology(t *testing.T) {
	c := startCluster(t, sandbox.Options{Scheduler: true, NodeAgent: true, Controllers: true, Topology: &sandbox.Topology{
		Zones: 2, RacksPerZone: 4, RacksPerBlock: 2, NodesPerRack: 2, CPU: "4", Memory: "32Gi", Pods: 110}})
	ctx := context.Background()
	ladder := []string{sandbox.RackLabel, sandbox.BlockLabel}

	t.Run("one rack when one holds the gang", func(t *testing.T) {
		ns := namespace(t, c)
		defer emptyNamespace(t, c, ns)
		createPodGroup(t, c, ns, preferringGang("pair", 2, sandbox.ZoneLabel, ladder...))
		gangMembers(t, c, ns, "pair", 2, "4")
		eventually(t, 30*time.Second, "the pair bound", func() (bool, error) { return boundWithPrefix(t, c, ns, "pair-") == 2, nil })
		racks := domainsOf(t, c, ns, "pair-", sandbox.RackLabel)
		assert.Len(t, racks, 1)
		cond := waitGroupCondition(t, c, ns, "pair", v1alpha1.PodGroupPreferredTopology, "its preferred level")
		assert.Equal(t, metav1.ConditionTrue, cond.Status)
		assert.Equal(t, v1alpha1.ReasonPreferred, cond.Reason)
		assert.Equal(t, fmt.Sprintf("placed in %s %s, its preferred level", sandbox.RackLabel, keys(racks)[0]), cond.Message)
	})

	t.Run("the fewest racks inside one block when no rack holds it", func(t *testing.T) {
		ns := namespace(t, c)
		defer emptyNamespace(t, c, ns)
		createPodGroup(t, c, ns, preferringGang("trio", 3, sandbox.ZoneLabel, ladder...))
		gangMembers(t, c, ns, "trio", 3, "4")
		eventually(t, 30*time.Second, "the trio bound", func() (bool, error) { return boundWithPrefix(t, c, ns, "trio-") == 3, nil })
		assert.Len(t, domainsOf(t, c, ns, "trio-", sandbox.RackLabel), 2, "two racks")
		blocks := domainsOf(t, c, ns, "trio-", sandbox.BlockLabel)
		assert.Len(t, blocks, 1, "of one block")
		cond := waitGroupCondition(t, c, ns, "trio", v1alpha1.PodGroupPreferredTopology, "placed in 2 "+sandbox.RackLabel+" domains of "+sandbox.BlockLabel+" "+keys(blocks)[0])
		t.Logf("condition: %s: %s", cond.Reason, cond.Message)
		assert.Equal(t, metav1.ConditionFalse, cond.Status)
		assert.Equal(t, v1alpha1.ReasonFellBack, cond.Reason)
		assert.Contains(t, cond.Message, "no single "+sandbox.RackLabel+" domain fits 3 pods: best")
		assert.Contains(t, cond.Message, "fits 2 (short 4 cpu)")
	})

	t.Run("the fewest blocks inside one zone when no block holds it", func(t *testing.T) {
		ns := namespace(t, c)
		defer emptyNamespace(t, c, ns)
		createPodGroup(t, c, ns, preferringGang("six", 6, sandbox.ZoneLabel, ladder...))
		gangMembers(t, c, ns, "six", 6, "4")
		eventually(t, 30*time.Second, "the six bound", func() (bool, error) { return boundWithPrefix(t, c, ns, "six-") == 6, nil })
		assert.Len(t, domainsOf(t, c, ns, "six-", sandbox.BlockLabel), 2, "two blocks")
		assert.Len(t, domainsOf(t, c, ns, "six-", sandbox.ZoneLabel), 1, "of one zone")
		cond := waitGroupCondition(t, c, ns, "six", v1alpha1.PodGroupPreferredTopology, "no single "+sandbox.BlockLabel+" domain fits 6 pods: best")
		assert.Equal(t, v1alpha1.ReasonFellBack, cond.Reason)
	})

	t.Run("never beyond the highest allowed level, though the cluster has room", func(t *testing.T) {
		ns := namespace(t, c)
		defer emptyNamespace(t, c, ns)
		createPodGroup(t, c, ns, preferringGang("nine", 9, sandbox.ZoneLabel, ladder...))
		gangMembers(t, c, ns, "nine", 9, "4")
		cond := waitGroupCondition(t, c, ns, "nine", v1alpha1.PodGroupSchedulable, "no "+sandbox.ZoneLabel+" domain fits 9 pods: best")
		assert.Equal(t, v1alpha1.ReasonUnschedulable, cond.Reason)
		assert.Contains(t, cond.Message, "fits 8")
		consistently(t, 2*time.Second, "no member of nine bound", func() bool { return boundWithPrefix(t, c, ns, "nine-") == 0 })
	})

	t.Run("a re-created member stays in its gang's racks, where best fit alone would take it elsewhere", func(t *testing.T) {
		ns := namespace(t, c)
		defer emptyNamespace(t, c, ns)
		// Five members of 2 cpu: no rack holds them (4 each), so they take
		// two racks of one block, 4 + 1.
		createPodGroup(t, c, ns, preferringGang("keep", 5, sandbox.ZoneLabel, ladder...))
		gangMembers(t, c, ns, "keep", 5, "2")
		eventually(t, 30*time.Second, "keep bound", func() (bool, error) { return boundWithPrefix(t, c, ns, "keep-") == 5, nil })
		racks := domainsOf(t, c, ns, "keep-", sandbox.RackLabel)
		require.Len(t, racks, 2)
		labels := nodeLabels(t, c)
		var lone, loneRack, zone string
		for pod, node := range boundPods(t, c, ns) {
			if rack := labels[node][sandbox.RackLabel]; racks[rack] == 1 {
				lone, loneRack, zone = pod, rack, labels[node][sandbox.ZoneLabel]
			}
		}
		require.NotEmpty(t, lone)

		// In the other block of the same zone, leave a rack exactly one
		// member of room: the tightest fit for a lone pod.
		var tight []string
		for node, l := range labels {
			if l[sandbox.ZoneLabel] == zone && racks[l[sandbox.RackLabel]] == 0 && len(tight) < 2 {
				if len(tight) == 0 || labels[tight[0]][sandbox.RackLabel] == l[sandbox.RackLabel] {
					tight = append(tight, node)
				}
			}
		}
		sort.Strings(tight)
		require.Len(t, tight, 2)
		for i, cpu := range []string{"4", "2"} {
			_, err := c.Client.CoreV1().Pods(ns).Create(ctx, pinnedFiller(fmt.Sprintf("fill-%d", i), tight[i], cpu), metav1.CreateOptions{})
			require.NoError(t, err)
		}
		eventually(t, 30*time.Second, "fillers bound", func() (bool, error) { return boundWithPrefix(t, c, ns, "fill-") == 2, nil })

		zero := int64(0)
		require.NoError(t, c.Client.CoreV1().Pods(ns).Delete(ctx, lone, metav1.DeleteOptions{GracePeriodSeconds: &zero}))
		eventually(t, 30*time.Second, lone+" gone", func() (bool, error) {
			_, err := c.Client.CoreV1().Pods(ns).Get(ctx, lone, metav1.GetOptions{})
			return err != nil, nil
		})
		createPods(t, c, ns, member{name: lone, labels: inGroup("keep"), cpu: "2"})
		eventually(t, 30*time.Second, "the replacement bound", func() (bool, error) { return boundWithPrefix(t, c, ns, "keep-") == 5, nil })
		assert.Equal(t, keys(racks), keys(domainsOf(t, c, ns, "keep-", sandbox.RackLabel)), "the gang keeps its two racks")
		assert.Equal(t, 1, domainsOf(t, c, ns, "keep-", sandbox.RackLabel)[loneRack])
	})

	t.Run("a level no node carries keeps the group pending and is named", func(t *testing.T) {
		ns := namespace(t, c)
		defer emptyNamespace(t, c, ns)
		createPodGroup(t, c, ns, preferringGang("slice", 2, sandbox.ZoneLabel, "example.com/pod-slice", sandbox.RackLabel))
		gangMembers(t, c, ns, "slice", 2, "1")
		cond := waitGroupCondition(t, c, ns, "slice", v1alpha1.PodGroupSchedulable, "no node has the example.com/pod-slice label")
		assert.Equal(t, v1alpha1.ReasonUnschedulable, cond.Reason)
		consistently(t, time.Second, "nothing bound", func() bool { return boundWithPrefix(t, c, ns, "slice-") == 0 })
	})

	t.Run("a preferred level wider than the required one is refused as invalid", func(t *testing.T) {
		ns := namespace(t, c)
		defer emptyNamespace(t, c, ns)
		createPodGroup(t, c, ns, preferringGang("wide", 2, sandbox.RackLabel, sandbox.BlockLabel))
		gangMembers(t, c, ns, "wide", 2, "1")
		cond := waitGroupCondition(t, c, ns, "wide", v1alpha1.PodGroupSchedulable,
			"preferred topology level "+sandbox.BlockLabel+" is wider than "+sandbox.RackLabel+", the required level")
		assert.Equal(t, v1alpha1.ReasonInvalid, cond.Reason)
		consistently(t, time.Second, "nothing bound", func() bool { return boundWithPrefix(t, c, ns, "wide-") == 0 })
	})

	t.Run("a Workload template's levels reach its PodGroup and are planned", func(t *testing.T) {
		ns := namespace(t, c)
		defer emptyNamespace(t, c, ns)
		_, err := c.Phalanx.SchedulingV1alpha1().Workloads(ns).Create(ctx, workload("train", func(s *v1alpha1.WorkloadSpec) {
			s.PodGroupTemplates[0].SchedulingPolicy.Gang.MinCount = 3
			s.PodGroupTemplates[0].SchedulingConstraints = &v1alpha1.PodGroupSchedulingConstraints{
				Topology: topo(sandbox.ZoneLabel), PreferredTopology: topo(ladder...)}
		}), metav1.CreateOptions{})
		require.NoError(t, err)
		var pg *v1alpha1.PodGroup
		eventually(t, 30*time.Second, "the controller creates train-workers", func() (bool, error) {
			pg, err = c.Phalanx.SchedulingV1alpha1().PodGroups(ns).Get(ctx, "train-workers", metav1.GetOptions{})
			return err == nil, nil
		})
		assert.Equal(t, topo(ladder...), pg.Spec.SchedulingConstraints.PreferredTopology)
		gangMembers(t, c, ns, "train-workers", 3, "4")
		eventually(t, 30*time.Second, "the workers bound", func() (bool, error) { return boundWithPrefix(t, c, ns, "train-workers-") == 3, nil })
		assert.Len(t, domainsOf(t, c, ns, "train-workers-", sandbox.BlockLabel), 1)
		waitGroupCondition(t, c, ns, "train-workers", v1alpha1.PodGroupPreferredTopology, "placed in 2 "+sandbox.RackLabel+" domains")
	})

	t.Run("an upstream PodGroup takes its levels from the annotation", func(t *testing.T) {
		ns := namespace(t, c)
		defer emptyNamespace(t, c, ns)
		pg := nativeGang("native", 3, sandbox.ZoneLabel)
		pg.Annotations = map[string]string{v1alpha1.PreferredTopologyAnnotation: sandbox.RackLabel + "," + sandbox.BlockLabel}
		_, err := c.Client.SchedulingV1beta1().PodGroups(ns).Create(ctx, pg, metav1.CreateOptions{})
		require.NoError(t, err)
		nativeMembers(t, c, ns, "native", 3, "4")
		eventually(t, 60*time.Second, "the native gang bound", func() (bool, error) { return boundWithPrefix(t, c, ns, "native-") == 3, nil })
		assert.Len(t, domainsOf(t, c, ns, "native-", sandbox.RackLabel), 2)
		assert.Len(t, domainsOf(t, c, ns, "native-", sandbox.BlockLabel), 1)
		bad := nativeGang("badnative", 1, sandbox.ZoneLabel)
		bad.Annotations = map[string]string{v1alpha1.PreferredTopologyAnnotation: sandbox.RackLabel + "," + sandbox.ZoneLabel}
		_, err = c.Client.SchedulingV1beta1().PodGroups(ns).Create(ctx, bad, metav1.CreateOptions{})
		require.NoError(t, err)
		nativeMembers(t, c, ns, "badnative", 1, "1")
		cond := nativeSchedulable(t, c, ns, "badnative", `annotation scheduling.phalanx.dev/preferred-topology="topology.phalanx.dev/rack,topology.kubernetes.io/zone": "topology.kubernetes.io/zone" is the required topology key`)
		assert.Equal(t, v1alpha1.ReasonInvalid, cond.Reason)
		eventually(t, 30*time.Second, "upstream's PodGroup gets the PreferredTopology condition", func() (bool, error) {
			got, err := c.Client.SchedulingV1beta1().PodGroups(ns).Get(ctx, "native", metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			cond := meta.FindStatusCondition(got.Status.Conditions, v1alpha1.PodGroupPreferredTopology)
			return cond != nil && cond.Reason == v1alpha1.ReasonFellBack, nil
		})
	})
}

// nativeSchedulable waits for upstream's PodGroup name to carry a
// Schedulable condition whose message contains substring.
func nativeSchedulable(t *testing.T, c *sandbox.Cluster, ns, name, substring string) *metav1.Condition {
	t.Helper()
	var cond *metav1.Condition
	eventually(t, 30*time.Second, "Schedulable of "+name+" containing "+substring, func() (bool, error) {
		got, err := c.Client.SchedulingV1beta1().PodGroups(ns).Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		t.Logf("conditions: %+v", got.Status.Conditions)
		cond = meta.FindStatusCondition(got.Status.Conditions, v1alpha1.PodGroupSchedulable)
		return cond != nil && strings.Contains(cond.Message, substring), nil
	})
	return cond
}

// TestPreferredTopologyValidation: what the API server refuses, with the
// field path.
func TestPreferredTopologyValidation(t *testing.T) {
	c := startCluster(t, sandbox.Options{})
	ctx := context.Background()
	ns := namespace(t, c)
	for i, tc := range []struct {
		name     string
		required string
		levels   []string
		want     []string
	}{
		{"the required key as a level", sandbox.ZoneLabel, []string{sandbox.RackLabel, sandbox.ZoneLabel},
			[]string{"spec.schedulingConstraints.preferredTopology", "a preferred topology level cannot be the required key"}},
		{"a level twice", "", []string{sandbox.RackLabel, sandbox.RackLabel},
			[]string{"spec.schedulingConstraints.preferredTopology[1]", "Duplicate value"}},
		{"five levels", "", []string{"a", "b", "c", "d", "e"},
			[]string{"spec.schedulingConstraints.preferredTopology", "must have at most 4 items"}},
		{"a level that is not a label key", "", []string{"not a key!"},
			[]string{"spec.schedulingConstraints.preferredTopology[0].key", "should match"}},
	} {
		t.Run("rejects "+tc.name, func(t *testing.T) {
			_, err := c.Phalanx.SchedulingV1alpha1().PodGroups(ns).Create(ctx, preferringGang(fmt.Sprintf("bad-%d", i), 2, tc.required, tc.levels...), metav1.CreateOptions{})
			require.Error(t, err)
			for _, w := range tc.want {
				assert.Contains(t, err.Error(), w)
			}
		})
	}
	t.Run("rejects a Workload template with a level twice", func(t *testing.T) {
		_, err := c.Phalanx.SchedulingV1alpha1().Workloads(ns).Create(ctx, workload("bad", func(s *v1alpha1.WorkloadSpec) {
			s.PodGroupTemplates[0].SchedulingConstraints = &v1alpha1.PodGroupSchedulingConstraints{PreferredTopology: topo("a", "a")}
		}), metav1.CreateOptions{})
		require.Error(t, err)
		assert.Contains(t, err.Error(), "spec.podGroupTemplates[0].schedulingConstraints.preferredTopology[1]")
	})
	t.Run("freezes the levels with the rest of the constraints", func(t *testing.T) {
		pg, err := c.Phalanx.SchedulingV1alpha1().PodGroups(ns).Create(ctx, preferringGang("frozen", 2, sandbox.ZoneLabel, sandbox.RackLabel), metav1.CreateOptions{})
		require.NoError(t, err)
		pg.Spec.SchedulingConstraints.PreferredTopology = topo(sandbox.RackLabel, sandbox.BlockLabel)
		_, err = c.Phalanx.SchedulingV1alpha1().PodGroups(ns).Update(ctx, pg, metav1.UpdateOptions{})
		require.Error(t, err)
		assert.Contains(t, err.Error(), "schedulingConstraints is immutable")
	})
}

// TestPreferredGangSample applies manifests/samples/preferred-gang.yaml on
// the `make run` sandbox's nodes and checks what its comment promises.
func TestPreferredGangSample(t *testing.T) {
	topo := sandbox.DefaultTopology()
	c := startCluster(t, sandbox.Options{Scheduler: true, NodeAgent: true, Topology: &topo})
	ns := namespace(t, c)
	data, err := os.ReadFile("../../manifests/samples/preferred-gang.yaml")
	require.NoError(t, err)
	require.NoError(t, applyYAML(context.Background(), c, ns, data))
	eventually(t, 60*time.Second, "the sample gang bound", func() (bool, error) { return boundWithPrefix(t, c, ns, "preferred-gang-") == 6, nil })
	assert.Len(t, domainsOf(t, c, ns, "preferred-gang-", sandbox.RackLabel), 2, "two racks")
	assert.Len(t, domainsOf(t, c, ns, "preferred-gang-", sandbox.BlockLabel), 1, "of one block")
	cond := waitGroupCondition(t, c, ns, "preferred-gang", v1alpha1.PodGroupPreferredTopology, "placed in 2 "+sandbox.RackLabel+" domains of "+sandbox.BlockLabel)
	assert.Equal(t, v1alpha1.ReasonFellBack, cond.Reason)
}
