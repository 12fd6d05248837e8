package schedperf

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// upstreamDir is scheduler_perf's directory in the k8s.io/kubernetes
// module of this repository's go.mod.
func upstreamDir(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "k8s.io/kubernetes").Output()
	require.NoError(t, err, "locate the k8s.io/kubernetes module")
	dir := filepath.Join(strings.TrimSpace(string(out)), Dir)
	_, err = os.Stat(dir)
	require.NoError(t, err)
	return dir
}

func selectOne(t *testing.T, root, name string) *Expanded {
	t.Helper()
	sel, err := Select(root, Acceptance, "", []string{name})
	require.NoError(t, err)
	for _, s := range sel {
		if s.Name() == name {
			e, err := s.Expand()
			require.NoError(t, err)
			return e
		}
	}
	t.Fatalf("no workload %s", name)
	return nil
}

// The four acceptance configurations of the module load, with the label
// filters upstream's two runners use, and their integration-sized
// workloads expand (the 5,000-node ones take seconds each, too long here;
// `phalanx-sim upstream-perf --list --labels performance` expands them).
func TestUpstreamConfigsLoad(t *testing.T) {
	root := upstreamDir(t)
	integration, err := Select(root, Acceptance, IntegrationFilter, nil)
	require.NoError(t, err)
	performance, err := Select(root, Acceptance, PerformanceFilter, nil)
	require.NoError(t, err)
	assert.NotEmpty(t, integration)
	assert.NotEmpty(t, performance)
	for _, s := range performance {
		assert.Contains(t, s.Labels(), "performance")
		assert.NotEmpty(t, s.Case.WorkloadTemplate)
	}
	for _, s := range integration {
		e, err := s.Expand()
		require.NoError(t, err, s.Name())
		assert.Positive(t, e.NodeCount(), s.Name())
		assert.Positive(t, e.MeasuredPods(), s.Name())
		assert.True(t, e.Gates["GenericWorkload"], "%s runs with the workload API", s.Name())
	}
	for _, s := range integration {
		assert.NotContains(t, s.Labels(), "performance")
		assert.Contains(t, s.Labels(), "integration-test")
	}
}

func TestExpandGangScheduling(t *testing.T) {
	e := selectOne(t, upstreamDir(t), "GangScheduling/10Nodes_3Gangs")
	require.Len(t, e.Steps, 4)
	nodes, ns, groups, pods := e.Steps[0], e.Steps[1], e.Steps[2], e.Steps[3]
	require.Len(t, nodes.Nodes, 10)
	for _, n := range nodes.Nodes {
		assert.NotEmpty(t, n.Name)
		assert.Equal(t, n.Name, n.Labels[HostnameLabel])
		assert.Equal(t, "4", n.Status.Allocatable.Cpu().String())
	}
	assert.Equal(t, []string{"gang-ns-0"}, ns.Namespaces)
	require.Len(t, groups.PodGroups, 3)
	for i, pg := range groups.PodGroups {
		assert.Equal(t, fmt.Sprintf("gang-%d", i), pg.Name)
		require.NotNil(t, pg.Spec.SchedulingPolicy.Gang)
		assert.EqualValues(t, 3, pg.Spec.SchedulingPolicy.Gang.MinCount)
	}
	assert.Equal(t, "gang-ns-0", pods.Namespace)
	assert.True(t, pods.CollectMetrics)
	require.Len(t, pods.Pods, 9)
	for i, p := range pods.Pods {
		require.NotNil(t, p.Spec.SchedulingGroup)
		assert.Equal(t, fmt.Sprintf("gang-%d", i/3), *p.Spec.SchedulingGroup.PodGroupName, "pods 0-2 join gang-0, 3-5 gang-1, ...")
		assert.Empty(t, p.Spec.SchedulerName, "upstream's pods go to default-scheduler")
		assert.Equal(t, "100m", p.Spec.Containers[0].Resources.Requests.Cpu().String())
	}
	assert.Equal(t, 9, e.MeasuredPods())
}

func TestExpandTopologyAndPreemption(t *testing.T) {
	root := upstreamDir(t)
	tas := selectOne(t, root, "TopologyAwareScheduling/100Nodes_10Gangs")
	assert.True(t, tas.Gates["TopologyAwareWorkloadScheduling"])
	assert.Equal(t, "rack-0", tas.Steps[0].Nodes[99].Labels["topology.kubernetes.io/rack"])
	pg := tas.Steps[2].PodGroups[0]
	require.NotNil(t, pg.Spec.SchedulingConstraints)
	assert.Equal(t, "topology.kubernetes.io/rack", pg.Spec.SchedulingConstraints.Topology[0].Key)

	pre := selectOne(t, root, "GangPreemptionPodGroups/2Nodes_1PreemptorGang_2Pods_Evicting_2LowPriorityGangs")
	var low, high Step
	for _, s := range pre.Steps {
		if s.Opcode == OpCreatePods && s.CollectMetrics {
			high = s
		} else if s.Opcode == OpCreatePods {
			low = s
		}
	}
	require.Len(t, low.Pods, 4)
	require.Len(t, high.Pods, 2)
	assert.EqualValues(t, 1000, *low.Pods[0].Spec.Priority, "the template's priority parameter")
	assert.EqualValues(t, 9999999, *high.Pods[0].Spec.Priority)
	assert.Equal(t, "3500m", high.Pods[0].Spec.Containers[0].Resources.Requests.Cpu().String())
	assert.EqualValues(t, 8000, low.Pods[0].Spec.Containers[0].Ports[0].HostPort, "hostPortBase + gang index")
	assert.EqualValues(t, 8001, low.Pods[2].Spec.Containers[0].Ports[0].HostPort)

	basic := selectOne(t, root, "GangPreemptionBasic/2Nodes_1PreemptorGang_2Pods_Evicting_10InitPods")
	fill := basic.Steps[2]
	require.Len(t, fill.Pods, 10)
	assert.Equal(t, "pod-low-priority-0-", fill.Pods[0].GenerateName, "generated names are left to the API server")
	assert.EqualValues(t, 0, *fill.Pods[0].Spec.Priority)
	assert.Empty(t, basic.Steps[4].Pods[0].Spec.Containers[0].Ports, "no hostPortBase: no ports")
}

func writeConfig(t *testing.T, config string, templates map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, ConfigFile), []byte(config), 0o644))
	for name, body := range templates {
		require.NoError(t, os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644))
	}
	return dir
}

// What this package cannot replay is refused by name, never skipped.
func TestUnsupportedIsRefused(t *testing.T) {
	dir := writeConfig(t, `
- name: Churn
  workloadTemplate:
  - opcode: churn
    mode: recreate
  workloads:
  - name: w
`, nil)
	_, err := Load(filepath.Join(dir, ConfigFile))
	require.Error(t, err)
	assert.Contains(t, err.Error(), `"churn"`)

	dir = writeConfig(t, `
- name: Volumes
  workloadTemplate:
  - opcode: createPods
    count: 1
    persistentVolumeTemplatePath: pv.yaml
  workloads:
  - name: w
`, nil)
	_, err = Load(filepath.Join(dir, ConfigFile))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "persistentVolumeTemplatePath")

	// A steady state without its duration cannot be replayed as upstream
	// runs it.
	dir = writeConfig(t, `
- name: Steady
  workloadTemplate:
  - opcode: createPods
    count: 1
    steadyState: true
  workloads:
  - name: w
`, nil)
	cases, err := Load(filepath.Join(dir, ConfigFile))
	require.NoError(t, err)
	_, err = Expand(cases[0], &cases[0].Workloads[0])
	require.Error(t, err)
	assert.Contains(t, err.Error(), "duration")
}

// Upstream's dra workloads load and expand: objects of any kind from
// templates, claims allocated without pods, steady states with their
// durations, and windows bracketed by operations of their own.
func TestUpstreamDRAConfigsLoad(t *testing.T) {
	root := upstreamDir(t)
	integration, err := Select(root, DRA, IntegrationFilter, nil)
	require.NoError(t, err)
	require.NotEmpty(t, integration)
	// Two of the performance set: expanding all of it takes minutes.
	performance, err := Select(root, DRA, PerformanceFilter, []string{"SchedulingWithResourceClaimTemplate/empty_500nodes", "PublishResourceSlices/500nodes"})
	require.NoError(t, err)
	require.Len(t, performance, 2)
	kinds := map[string]bool{}
	for _, s := range integration {
		e, err := s.Expand()
		require.NoError(t, err, s.Name())
		assert.Positive(t, e.NodeCount(), s.Name())
		assert.True(t, e.Gates["DynamicResourceAllocation"], "%s runs with DRA", s.Name())
		for _, st := range e.Steps {
			for _, o := range st.Objects {
				kinds[o.GetKind()] = true
			}
			assert.False(t, st.SteadyState, "%s: integration sizes do not run in a steady state", s.Name())
		}
	}
	for _, k := range []string{"ResourceSlice", "DeviceClass", "ResourceClaim", "ResourceClaimTemplate", "DeviceTaintRule"} {
		assert.True(t, kinds[k], "some integration workload creates a %s", k)
	}
	var steady, windows int
	for _, s := range performance {
		e, err := s.Expand()
		require.NoError(t, err, s.Name())
		for _, st := range e.Steps {
			if st.SteadyState {
				steady++
				assert.Positive(t, st.Duration, s.Name())
				p, err := st.NewPod(len(st.Pods))
				require.NoError(t, err, s.Name())
				assert.NotEmpty(t, p.Spec.ResourceClaims, "%s: a further pod of the steady state claims devices", s.Name())
			}
			if st.Opcode == OpStartCollectingMetrics {
				windows++
			}
		}
	}
	assert.Positive(t, steady, "the performance set keeps clusters in a steady state")
	assert.Positive(t, windows, "PublishResourceSlices measures a window of its own")
}

func TestDefaultsParamsAndTemplateFunctions(t *testing.T) {
	dir := writeConfig(t, `
- name: T
  labels: [base]
  featureGates: {GenericWorkload: true, Other: true}
  workloadTemplate:
  - opcode: createNodes
    countParam: $nodes
  - opcode: createPods
    count: 2
  - opcode: createPods
    countParam: $groups
    countMultiplierParam: $perGroup
    namespace: ns
    podTemplatePath: pod.yaml
    templateParams:
      perGroup: $perGroup
      priority: $priority|7
      big: $big
  - opcode: barrier
  - opcode: sleep
    duration: 10ms
  workloads:
  - name: small
    labels: [integration-test]
    featureGates: {Other: false}
    params: {nodes: 2, groups: 2, perGroup: 3, big: 9999999}
`, map[string]string{"pod.yaml": `
apiVersion: v1
kind: Pod
metadata:
  name: p-{{.Index}}-of-{{.Count}}
  labels:
    group: g-{{DivideInt .Index .perGroup}}
    mod: "{{Mod .Index .perGroup}}"
    sum: "{{AddInt .Index 10 .perGroup}}"
    product: "{{MultiplyInt .Index 2}}"
    diff: "{{SubtractInt .perGroup 1}}"
spec:
  priority: {{.priority}}
  containers:
  - name: c
    image: x
    env:
    - name: BIG
      value: "{{.big}}"
`})
	sel, err := Select(dir, []string{"."}, "integration-test,-performance", nil)
	require.NoError(t, err)
	require.Len(t, sel, 1)
	assert.Equal(t, []string{"base", "integration-test"}, sel[0].Labels())
	e, err := sel[0].Expand()
	require.NoError(t, err)
	assert.Equal(t, map[string]bool{"GenericWorkload": true, "Other": false}, e.Gates, "a workload's gates override its test case's")

	require.Len(t, e.Steps[0].Nodes, 2)
	assert.Equal(t, "node-0-00001", e.Steps[0].Nodes[1].Name, "the default node, named by op and index")
	assert.Equal(t, "110", e.Steps[0].Nodes[0].Status.Allocatable.Pods().String())

	def := e.Steps[1]
	assert.Equal(t, "namespace-1", def.Namespace, "the default namespace is namespace-<op index>")
	require.Len(t, def.Pods, 2)
	assert.Equal(t, "pod-", def.Pods[0].GenerateName)
	assert.Equal(t, "500Mi", def.Pods[0].Spec.Containers[0].Resources.Requests.Memory().String())

	pods := e.Steps[2].Pods
	require.Len(t, pods, 6)
	p := pods[4]
	assert.Equal(t, "p-4-of-6", p.Name)
	assert.Equal(t, map[string]string{"group": "g-1", "mod": "1", "sum": "17", "product": "8", "diff": "2", "signature": "signature-label-4"}, p.Labels)
	assert.EqualValues(t, 7, *p.Spec.Priority, "the default of an absent parameter")
	assert.Equal(t, "9999999", p.Spec.Containers[0].Env[0].Value, "whole numbers print as integers")

	assert.Equal(t, StageScheduled, e.Steps[3].Stage)
	assert.Equal(t, "10ms", e.Steps[4].Sleep.String())
	assert.Zero(t, e.MeasuredPods(), "no operation collects metrics here")
}

func TestStrictTemplates(t *testing.T) {
	dir := writeConfig(t, `
- name: T
  workloadTemplate:
  - opcode: createPods
    count: 1
    podTemplatePath: pod.yaml
  workloads:
  - name: w
`, map[string]string{"pod.yaml": "apiVersion: v1\nkind: Pod\nspec:\n  noSuchField: 1\n"})
	sel, err := Select(dir, []string{"."}, "", nil)
	require.NoError(t, err)
	_, err = sel[0].Expand()
	require.Error(t, err, "a field the Pod type lacks is an error, as the API server's strict validation would make it")
	assert.Contains(t, err.Error(), "noSuchField")
}

func TestEnabled(t *testing.T) {
	assert.True(t, Enabled("integration-test,-performance", "integration-test", "short"))
	assert.False(t, Enabled("integration-test,-performance", "performance"))
	assert.False(t, Enabled("integration-test,-performance", "integration-test", "performance"))
	assert.True(t, Enabled("performance", "performance"))
	assert.True(t, Enabled("+short", "short"))
	assert.True(t, Enabled("", "anything"))
}

func TestTemplateArithmeticErrors(t *testing.T) {
	f := templateFuncs["DivideInt"].(func(a, b any) (int, error))
	_, err := f(1, 0)
	assert.Error(t, err)
	n, err := f("7", 2.0)
	require.NoError(t, err)
	assert.Equal(t, 3, n)
	_, err = f("x", 1)
	assert.Error(t, err)
}
