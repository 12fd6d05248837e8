package bench

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"

	v1alpha1 "github.com/phalanx-sched/phalanx/apis/scheduling/v1alpha1"
	"github.com/phalanx-sched/phalanx/tools/sandbox"
)

// The two schedulers must be measured on the same constraint: if one arm's
// pods carried a different term or selector, the comparison would measure
// the difference, not the schedulers.
func TestAntiAffinityPodsMatchAcrossArms(t *testing.T) {
	c := Case{Gangs: 2, PodsPerGang: 8, AntiAffinity: true, Zones: 1, RacksPerZone: 1, NodesPerRack: 10}
	ph := benchPod(c, "gang-1-0", "gang-1", ArmPhalanx, "")
	up := benchPod(c, "gang-1-0", "gang-1", ArmUpstream, "")

	require.NotNil(t, ph.Spec.Affinity)
	assert.Equal(t, ph.Spec.Affinity, up.Spec.Affinity, "the same anti-affinity on both arms")
	assert.Equal(t, "gang-1", ph.Labels[GangLabel])
	assert.Equal(t, "gang-1", up.Labels[GangLabel])
	assert.Equal(t, "gang-1", ph.Labels[v1alpha1.PodGroupLabel], "Phalanx still finds the gang by its own label")

	terms := up.Spec.Affinity.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution
	require.Len(t, terms, 1)
	assert.Equal(t, sandbox.HostnameLabel, terms[0].TopologyKey)
	assert.Equal(t, map[string]string{GangLabel: "gang-1"}, terms[0].LabelSelector.MatchLabels, "selects its own gang only")

	for _, n := range c.topology().Nodes() {
		assert.Equal(t, n.Name, n.Labels[sandbox.HostnameLabel], "every bench node carries its hostname label")
	}
	for _, g := range c.groups() {
		assert.Equal(t, sandbox.HostnameLabel, g.OnePerValueKey, "the placement check looks for shared nodes")
	}
}

func TestPodsWithoutAntiAffinityUnchanged(t *testing.T) {
	c := Case{Gangs: 1, PodsPerGang: 3}
	up := benchPod(c, "gang-0-0", "gang-0", ArmUpstream, "")
	assert.Nil(t, up.Spec.Affinity)
	assert.Empty(t, up.Labels)
	ph := benchPod(c, "gang-0-0", "gang-0", ArmPhalanx, "")
	assert.Equal(t, map[string]string{v1alpha1.PodGroupLabel: "gang-0"}, ph.Labels)
	for _, g := range c.groups() {
		assert.Empty(t, g.OnePerValueKey)
	}
}

// The ceiling's round-robin must itself pass the anti-affinity check, or
// its row would read as a violation that no scheduler caused.
func TestCeilingPlanKeepsAntiAffineGangsOnePerNode(t *testing.T) {
	c := Case{Gangs: 30, PodsPerGang: 8, AntiAffinity: true, Zones: 1, RacksPerZone: 2, NodesPerRack: 10}
	pods, nodes := ceilingPlan(c)
	nodeOf := map[string]string{}
	for i, p := range pods {
		nodeOf[p] = nodes[i]
	}
	for _, g := range c.groups() {
		seen := map[string]bool{}
		for _, m := range g.Members {
			assert.False(t, seen[nodeOf[m]], "gang %s has two members on %s", g.Name, nodeOf[m])
			seen[nodeOf[m]] = true
		}
	}
}

// With the native dialect the Phalanx arms get the upstream arm's very
// objects: the same spec.schedulingGroup and no Phalanx label; only the
// scheduler name differs.
func TestNativeDialectPodsMatchUpstream(t *testing.T) {
	c := Case{Gangs: 1, PodsPerGang: 3, AntiAffinity: true, dialect: DialectNative}
	up := benchPod(c, "gang-0-0", "gang-0", ArmUpstream, "bench-high")
	for _, arm := range []Arm{ArmPhalanx, ArmPhalanxProcess} {
		ph := benchPod(c, "gang-0-0", "gang-0", arm, "bench-high")
		require.NotNil(t, ph.Spec.SchedulingGroup)
		assert.Equal(t, "gang-0", *ph.Spec.SchedulingGroup.PodGroupName)
		assert.NotContains(t, ph.Labels, v1alpha1.PodGroupLabel)
		assert.Equal(t, phalanxSchedulerName, ph.Spec.SchedulerName)
		ph.Spec.SchedulerName = up.Spec.SchedulerName
		assert.Equal(t, up, ph, "identical apart from the scheduler name")
	}
	plain := benchPod(c, "pod-0", "", ArmPhalanx, "")
	assert.Nil(t, plain.Spec.SchedulingGroup, "a plain pod joins no group")
}

// A scheduler_perf workload's pods name no scheduler (or the profiles of
// the workload's own configuration): Phalanx's profile serves those names.
func TestPhalanxPerfConfigServesTheWorkloadsProfiles(t *testing.T) {
	parse := func(data []byte) []map[string]any {
		var cfg struct {
			Profiles []map[string]any `json:"profiles"`
		}
		require.NoError(t, yaml.Unmarshal(data, &cfg))
		return cfg.Profiles
	}
	out, err := phalanxPerfConfig(phalanxConfig(), "")
	require.NoError(t, err)
	profiles := parse(out)
	require.Len(t, profiles, 1)
	assert.Equal(t, "default-scheduler", profiles[0]["schedulerName"])
	assert.Equal(t, parse(phalanxConfig())[0]["plugins"], profiles[0]["plugins"], "Phalanx's plugins, unchanged")

	own := filepath.Join(t.TempDir(), "config.yaml")
	require.NoError(t, os.WriteFile(own, []byte("apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\nprofiles:\n- schedulerName: a\n  plugins: {score: {disabled: [{name: '*'}]}}\n- plugins: {}\n"), 0o644))
	out, err = phalanxPerfConfig(phalanxConfig(), own)
	require.NoError(t, err)
	profiles = parse(out)
	require.Len(t, profiles, 2)
	assert.Equal(t, "a", profiles[0]["schedulerName"])
	assert.Equal(t, "default-scheduler", profiles[1]["schedulerName"], "a profile without a name is default-scheduler")
	assert.Equal(t, parse(phalanxConfig())[0]["plugins"], profiles[0]["plugins"], "the workload's in-tree plugin settings are not carried over")
}

// TestPhalanxProcessArmRunsWithoutUpstreamWorkloadScheduling: the
// phalanx-proc child gets upstream's workload gates off (phalanx-scheduler
// refuses to start beside GenericWorkload) and its diagnostics port off
// (concurrent runs would collide on the default port); kube-scheduler gets
// neither flag.
func TestPhalanxProcessArmRunsWithoutUpstreamWorkloadScheduling(t *testing.T) {
	gates := PhalanxProcessGates()
	assert.Equal(t, map[string]bool{"GenericWorkload": false, "TopologyAwareWorkloadScheduling": false, "CompositePodGroup": false,
		"DRAWorkloadResourceClaims": false}, gates, "and DRA claims of PodGroups, which depend on GenericWorkload")
	h := &Harness{phalanxScheduler: "/bin/phalanx-scheduler", kubeScheduler: "/bin/kube-scheduler"}
	assert.Equal(t, []string{"--phalanx-port=0"}, h.childFlags(h.phalanxScheduler))
	assert.Empty(t, h.childFlags(h.kubeScheduler))
}

// Every case's ceiling plan must itself be a valid placement: no node over
// its capacity, and each constrained gang inside one domain. Before, with
// mixed gang sizes, "gang index modulo racks" put two large gangs in one
// rack and the bench reported PLACEMENT VIOLATED on the ceiling's own row
// (TopologyAwareScheduling/128Nodes_12Gangs_86Pods_RequiredRack).
func TestCeilingPlanIsAValidPlacement(t *testing.T) {
	for _, quick := range []bool{true, false} {
		for _, c := range Cases(quick) {
			if c.Starvation != nil {
				continue
			}
			pods, nodes := ceilingPlan(c)
			require.Len(t, nodes, len(pods))
			labels := map[string]map[string]string{}
			for _, n := range c.topology().Nodes() {
				labels[n.Name] = n.Labels
			}
			used := map[string]int{}
			nodeOf := map[string]string{}
			for i, p := range pods {
				if nodes[i] == "" {
					continue
				}
				used[nodes[i]]++
				nodeOf[p] = nodes[i]
			}
			placed := 0
			for _, g := range c.groups() {
				n := 0
				for _, m := range g.Members {
					if nodeOf[m] != "" {
						n++
					}
				}
				assert.Contains(t, []int{0, len(g.Members)}, n, "%s: gang %s placed in part", c.Name, g.Name)
				placed += n
			}
			if len(c.groups()) == 0 {
				placed = len(nodeOf)
			}
			assert.Positive(t, placed, "%s: the ceiling binds something", c.Name)
			for n, k := range used {
				assert.LessOrEqual(t, k, c.slotsPerNode(), "%s: node %s overcommitted", c.Name, n)
			}
			if c.TopologyKey == "" {
				continue
			}
			for _, g := range c.groups() {
				domains := map[string]bool{}
				for _, m := range g.Members {
					if nodeOf[m] != "" {
						domains[labels[nodeOf[m]][c.TopologyKey]] = true
					}
				}
				assert.LessOrEqual(t, len(domains), 1, "%s: gang %s spans %v", c.Name, g.Name, domains)
			}
		}
	}
}

// TestWholeCaseNameSelectsThatCaseAlone: a case's name is the start of
// another's (the anti-affinity twin), and asking for the first by its
// whole name ran both, three minutes more per run.
func TestWholeCaseNameSelectsThatCaseAlone(t *testing.T) {
	all := Cases(false)
	got, err := SelectCases(all, []string{"GangScheduling/5000Nodes_1000Gangs_8000Pods"})
	require.NoError(t, err)
	require.Len(t, got, 1)
	assert.Equal(t, "GangScheduling/5000Nodes_1000Gangs_8000Pods", got[0].Name)

	got, err = SelectCases(all, []string{"5000Nodes_1000Gangs_8000Pods"})
	require.NoError(t, err)
	names := make([]string, len(got))
	for i, c := range got {
		names[i] = c.Name
	}
	assert.ElementsMatch(t, []string{"GangScheduling/5000Nodes_1000Gangs_8000Pods", "GangScheduling/5000Nodes_1000Gangs_8000Pods_AntiAffinity", "GangScheduling/15000Nodes_1000Gangs_8000Pods"}, names, "a part of a name still selects every case containing it")
}
