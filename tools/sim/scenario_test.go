package sim

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	v1alpha1 "github.com/phalanx-sched/phalanx/apis/scheduling/v1alpha1"
)

// scenarioWith is a valid scenario whose steps are the given YAML.
func scenarioWith(steps string) string {
	return "name: t\ncluster: {zones: 1, racks: 1, nodesPerRack: 2}\nsteps:\n" + steps
}

func TestDecodeRejectsWithTheField(t *testing.T) {
	cases := []struct {
		name string
		yaml string
		want string
	}{
		{"a misspelt action names its whole path",
			scenarioWith("- name: s\n  create:\n    gang: [{name: g, size: 1}]\n"),
			`unknown field "steps[0].create.gang"`},
		{"a step with two actions says to split it",
			scenarioWith("- name: s\n  create: {gangs: [{name: g, size: 1}]}\n  wait: {for: bound, group: g}\n"),
			`steps[0]: Invalid value: "create, wait": a step does exactly one of create, addNodes, deleteNodes, delete, wait or stream`},
		{"a step with no action",
			scenarioWith("- name: s\n"),
			`steps[0]: Invalid value: "": a step does exactly one of`},
		{"a missing scenario name",
			"cluster: {zones: 1, racks: 1, nodesPerRack: 1}\nsteps: [{name: s, addNodes: {prefix: x, count: 1}}]\n",
			`name: Required value`},
		{"a scenario name that cannot prefix a namespace",
			"name: My_Scenario\ncluster: {zones: 1, racks: 1, nodesPerRack: 1}\nsteps: [{name: s, addNodes: {prefix: x, count: 1}}]\n",
			`name: Invalid value: "My_Scenario": a lowercase RFC 1123 label`},
		{"an empty cluster",
			"name: t\ncluster: {zones: 0, racks: 1, nodesPerRack: 1}\nsteps: [{name: s, addNodes: {prefix: x, count: 1}}]\n",
			`cluster.zones: Invalid value: 0: must be at least 1`},
		{"a cluster too big for a demo",
			"name: t\ncluster: {zones: 10, racks: 10, nodesPerRack: 100}\nsteps: [{name: s, addNodes: {prefix: x, count: 1}}]\n",
			`cluster: Invalid value: 10000: 10000 nodes is more than the 2000 a scenario may create`},
		{"a cpu that is not a quantity",
			"name: t\ncluster: {zones: 1, racks: 1, nodesPerRack: 1, cpu: four}\nsteps: [{name: s, addNodes: {prefix: x, count: 1}}]\n",
			`cluster.cpu: Invalid value: "four": must be a quantity such as 4, 500m or 64Gi`},
		{"a field of the wrong type names its path",
			"name: t\ncluster: {zones: one, racks: 1, nodesPerRack: 1}\nsteps: [{name: s, addNodes: {prefix: x, count: 1}}]\n",
			`cluster.zones`},
		{"no steps",
			"name: t\ncluster: {zones: 1, racks: 1, nodesPerRack: 1}\n",
			`steps: Required value: a scenario needs at least one step`},
		{"a step without a name",
			scenarioWith("- addNodes: {prefix: x, count: 1}\n"),
			`steps[0].name: Required value`},
		{"a bad timeout",
			scenarioWith("- name: s\n  wait: {for: bound, group: g, timeout: 3x}\n"),
			`steps[0].wait.timeout: Invalid value: "3x": must be a duration such as 30s, at most 10m0s`},
		{"an unknown wait",
			scenarioWith("- name: s\n  wait: {for: running, group: g}\n"),
			`steps[0].wait.for: Unsupported value: "running": supported values: "bound", "done", "pending"`},
		{"a wait with both group and prefix",
			scenarioWith("- name: s\n  wait: {for: bound, group: g, prefix: g-}\n"),
			`steps[0].wait: Invalid value: "": set exactly one of group and prefix`},
		{"a hold on a bound wait",
			scenarioWith("- name: s\n  wait: {for: bound, group: g, duration: 2s}\n"),
			`steps[0].wait.duration: Forbidden: only a wait for "pending" holds for a duration`},
		{"an undeclared PriorityClass",
			"name: t\ncluster: {zones: 1, racks: 1, nodesPerRack: 1}\npriorityClasses: [{name: high, value: 1000}]\nsteps:\n- name: s\n  create: {gangs: [{name: g, size: 1, priorityClass: hihg}]}\n",
			`steps[0].create.gangs[0].priorityClass: Invalid value: "hihg": no such PriorityClass; declare it under priorityClasses (declared: high)`},
		{"a reserved PriorityClass name",
			"name: t\ncluster: {zones: 1, racks: 1, nodesPerRack: 1}\npriorityClasses: [{name: system-mine, value: 1}]\nsteps: [{name: s, addNodes: {prefix: x, count: 1}}]\n",
			`priorityClasses[0].name: Invalid value: "system-mine": names starting with system- are reserved by Kubernetes`},
		{"an unknown preemption policy",
			"name: t\ncluster: {zones: 1, racks: 1, nodesPerRack: 1}\npriorityClasses: [{name: p, value: 1, preemptionPolicy: Sometimes}]\nsteps: [{name: s, addNodes: {prefix: x, count: 1}}]\n",
			`priorityClasses[0].preemptionPolicy: Unsupported value: "Sometimes"`},
		{"a label-pair gang with a topology key",
			scenarioWith("- name: s\n  create: {gangs: [{name: g, size: 2, labelPair: true, topologyKey: rack}]}\n"),
			`steps[0].create.gangs[0].topologyKey: Forbidden: a labelPair gang has no PodGroup object to carry it; set labelPair: false`},
		{"a gang of no pods",
			scenarioWith("- name: s\n  create: {gangs: [{name: g, size: 0}]}\n"),
			`steps[0].create.gangs[0].size: Invalid value: 0: must be between 1 and 1000`},
		{"a bad topology key",
			scenarioWith("- name: s\n  create: {gangs: [{name: g, size: 1, topologyKey: 'a b'}]}\n"),
			`steps[0].create.gangs[0].topologyKey: Invalid value: "a b"`},
		{"an inline object of an unsupported kind",
			scenarioWith("- name: s\n  create:\n    objects: [{apiVersion: apps/v1, kind: Deployment, metadata: {name: d}}]\n"),
			`steps[0].create.objects[0].kind: Unsupported value: "apps/v1 Deployment"`},
		{"a misspelt field inside an inline object",
			scenarioWith("- name: s\n  create:\n    objects: [{apiVersion: v1, kind: Pod, metadata: {name: p}, spec: {containerz: []}}]\n"),
			`steps[0].create.objects[0]: Invalid value: unknown field "spec.containerz"`},
		{"an inline object with a namespace",
			scenarioWith("- name: s\n  create:\n    objects: [{apiVersion: scheduling.phalanx.dev/v1alpha1, kind: PodGroup, metadata: {name: p, namespace: x}, spec: {schedulingPolicy: {basic: {}}}}]\n"),
			`steps[0].create.objects[0].metadata.namespace: Forbidden: objects go into the scenario's own namespace; remove it`},
		{"an inline object without a name",
			scenarioWith("- name: s\n  create:\n    objects: [{apiVersion: batch/v1, kind: Job, metadata: {generateName: j-}}]\n"),
			`steps[0].create.objects[0].metadata.name: Required value`},
		{"an expectation that checks nothing",
			scenarioWith("- name: s\n  addNodes: {prefix: x, count: 1}\n  expect: [{group: g}]\n"),
			`steps[0].expect[0]: Required value: set at least one of bound, pending, done, evicted, sameDomain, spans and crossings`},
		{"a negative expected count",
			scenarioWith("- name: s\n  addNodes: {prefix: x, count: 1}\n  expect: [{group: g, bound: -1}]\n"),
			`steps[0].expect[0].bound: Invalid value: -1: must not be negative`},
		{"deleting an unsupported kind",
			scenarioWith("- name: s\n  delete: {kind: Node, name: node-1}\n"),
			`steps[0].delete.kind: Unsupported value: "Node"`},
		{"deleting nodes by names and prefix at once",
			scenarioWith("- name: s\n  deleteNodes: {names: [a], prefix: b}\n"),
			`steps[0].deleteNodes: Invalid value: "": set exactly one of names and prefix`},
		{"adding nodes to an invalid rack",
			scenarioWith("- name: s\n  addNodes: {prefix: x, count: 1, rack: 'rack/1'}\n"),
			`steps[0].addNodes.rack: Invalid value: "rack/1"`},
		{"a duplicate YAML key",
			"name: t\nname: u\ncluster: {zones: 1, racks: 1, nodesPerRack: 1}\nsteps: [{name: s, addNodes: {prefix: x, count: 1}}]\n",
			`"name" already set in map`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Decode([]byte(tc.yaml))
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}

func TestDecodeListsEveryProblem(t *testing.T) {
	_, err := Decode([]byte(scenarioWith(
		"- name: s\n  wait: {for: soon, group: g, timeout: never}\n  expect: [{group: ''}]\n")))
	require.Error(t, err)
	lines := strings.Split(err.Error(), "\n")
	assert.Equal(t, "invalid scenario t:", lines[0])
	assert.Len(t, lines, 5, "a header and one line per problem:\n%s", err)
	var ve *ValidationError
	require.ErrorAs(t, err, &ve)
	assert.Len(t, ve.Problems, 4)
}

func TestDecodeFillsDefaults(t *testing.T) {
	sc, err := Decode([]byte(scenarioWith(`- name: gangs
  create:
    gangs:
    - {name: g, size: 3, cpu: 500m, gpus: 1, topologyKey: zone, disruptionAll: true, parent: root, priorityClass: high}
    pods:
    - {name: balloon, count: 2, cpu: 2}
- name: waits
  wait: {for: pending, prefix: g-}
`) + "priorityClasses: [{name: high, value: 100}]\n"))
	require.NoError(t, err)

	w := sc.Steps[1].Wait
	assert.Equal(t, 30*time.Second, w.timeout, "default timeout")
	assert.Equal(t, 2*time.Second, w.duration, "default hold for pending")

	g := sc.Steps[0].Create.Gangs[0]
	assert.Equal(t, 3, g.minCount(), "minCount defaults to size")
	pg := g.podGroup()
	require.NotNil(t, pg)
	assert.Equal(t, "g", pg.Name)
	require.NotNil(t, pg.Spec.SchedulingPolicy.Gang)
	assert.Equal(t, int32(3), pg.Spec.SchedulingPolicy.Gang.MinCount)
	assert.Equal(t, ZoneLabel, pg.Spec.SchedulingConstraints.Topology[0].Key, "the short key is expanded")
	assert.NotNil(t, pg.Spec.DisruptionMode.All)
	assert.Equal(t, "root", *pg.Spec.ParentCompositePodGroupName)
	assert.Equal(t, "high", pg.Spec.PriorityClassName)

	pods := g.pods()
	require.Len(t, pods, 3)
	assert.Equal(t, "g-2", pods[2].Name)
	assert.Equal(t, map[string]string{v1alpha1.PodGroupLabel: "g"}, pods[0].Labels)
	assert.Equal(t, SchedulerName, pods[0].Spec.SchedulerName)
	assert.Equal(t, "high", pods[0].Spec.PriorityClassName)
	req := pods[0].Spec.Containers[0].Resources
	assert.True(t, req.Requests.Cpu().Equal(resource.MustParse("500m")))
	assert.Equal(t, int64(1), req.Limits.Name(GPUResource, resource.DecimalSI).Value())

	balloons := sc.Steps[0].Create.Pods[0].pods()
	require.Len(t, balloons, 2)
	assert.Equal(t, "balloon-01", balloons[1].Name)
	assert.Equal(t, "balloon", balloons[1].Labels[PodSetLabel])
}

func TestAmountAcceptsNumbersAndStrings(t *testing.T) {
	sc, err := Decode([]byte("name: t\ncluster: {zones: 1, racks: 1, nodesPerRack: 1, cpu: 16, memory: \"128Gi\"}\nsteps: [{name: s, addNodes: {prefix: x, count: 1, cpu: 0.5}}]\n"))
	require.NoError(t, err)
	assert.Equal(t, Amount("16"), sc.Cluster.CPU)
	assert.Equal(t, Amount("128Gi"), sc.Cluster.Memory)
	assert.Equal(t, Amount("0.5"), sc.Steps[0].AddNodes.CPU)

	nodes := sc.Cluster.nodes()
	require.Len(t, nodes, 1)
	assert.Equal(t, "node-z0-r0-n0", nodes[0].Name)
	assert.Equal(t, map[string]string{ZoneLabel: "zone-0", RackLabel: "zone-0-rack-0", HostnameLabel: "node-z0-r0-n0"}, nodes[0].Labels)
	assert.True(t, nodes[0].Status.Allocatable.Cpu().Equal(resource.MustParse("16")))
	_, hasGPU := nodes[0].Status.Allocatable[GPUResource]
	assert.False(t, hasGPU, "no GPUs unless asked")
	added := sc.Steps[0].AddNodes.nodes(sc.Cluster)
	assert.True(t, added[0].Status.Allocatable.Cpu().Equal(resource.MustParse("500m")))
	assert.Equal(t, map[string]string{HostnameLabel: "x-0"}, added[0].Labels, "no zone or rack unless given")
	assert.Equal(t, corev1.ConditionTrue, added[0].Status.Conditions[0].Status)
}
