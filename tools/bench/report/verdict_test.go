package report

import (
	"testing"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func node(name, rack string) *corev1.Node {
	alloc := corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse("1"),
		corev1.ResourceMemory: resource.MustParse("1Gi"),
		corev1.ResourcePods:   resource.MustParse("3"),
	}
	labels := map[string]string{}
	if rack != "" {
		labels["rack"] = rack
		labels["host"] = name
	}
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}, Status: corev1.NodeStatus{Allocatable: alloc}}
}

func pod(name, nodeName, cpu string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.PodSpec{NodeName: nodeName, Containers: []corev1.Container{{
			Name:      "c",
			Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu)}},
		}}},
	}
}

func TestCheck(t *testing.T) {
	nodes := []*corev1.Node{node("a1", "a"), node("a2", "a"), node("b1", "b"), node("x", "")}
	gang := func(key string, members ...string) []Group {
		return []Group{{Name: "g", Members: members, MinCount: len(members), TopologyKey: key}}
	}
	onePerNode := func(members ...string) []Group {
		return []Group{{Name: "g", Members: members, MinCount: len(members), OnePerValueKey: "host"}}
	}
	tests := []struct {
		name   string
		groups []Group
		pods   []*corev1.Pod
		want   Verdict
	}{{
		name:   "a gang bound inside one rack is complete and fine",
		groups: gang("rack", "p0", "p1"),
		pods:   []*corev1.Pod{pod("p0", "a1", "100m"), pod("p1", "a2", "100m")},
		want:   Verdict{Pods: 2, Bound: 2, Groups: 1, CompleteGroups: 1},
	}, {
		name:   "a gang with no member bound is empty, not a violation",
		groups: gang("rack", "p0", "p1"),
		pods:   []*corev1.Pod{pod("p0", "", "100m"), pod("p1", "", "100m")},
		want:   Verdict{Pods: 2, Groups: 1, EmptyGroups: 1},
	}, {
		name:   "a gang bound below minCount is partial",
		groups: gang("", "p0", "p1"),
		pods:   []*corev1.Pod{pod("p0", "a1", "100m"), pod("p1", "", "100m")},
		want:   Verdict{Pods: 2, Bound: 1, Groups: 1, PartialGroups: 1},
	}, {
		name:   "a constrained gang across two racks violates its topology",
		groups: gang("rack", "p0", "p1"),
		pods:   []*corev1.Pod{pod("p0", "a1", "100m"), pod("p1", "b1", "100m")},
		want:   Verdict{Pods: 2, Bound: 2, Groups: 1, CompleteGroups: 1, TopologyViolations: 1},
	}, {
		name:   "a constrained gang on a node without the label violates its topology",
		groups: gang("rack", "p0"),
		pods:   []*corev1.Pod{pod("p0", "x", "100m")},
		want:   Verdict{Pods: 1, Bound: 1, Groups: 1, CompleteGroups: 1, TopologyViolations: 1},
	}, {
		name:   "an unconstrained gang may spread",
		groups: gang("", "p0", "p1"),
		pods:   []*corev1.Pod{pod("p0", "a1", "100m"), pod("p1", "b1", "100m")},
		want:   Verdict{Pods: 2, Bound: 2, Groups: 1, CompleteGroups: 1},
	}, {
		name:   "a one-per-node gang on distinct nodes is fine",
		groups: onePerNode("p0", "p1", "p2"),
		pods:   []*corev1.Pod{pod("p0", "a1", "100m"), pod("p1", "a2", "100m"), pod("p2", "b1", "100m")},
		want:   Verdict{Pods: 3, Bound: 3, Groups: 1, CompleteGroups: 1},
	}, {
		name:   "two members of a one-per-node gang on one node violate its anti-affinity",
		groups: onePerNode("p0", "p1", "p2"),
		pods:   []*corev1.Pod{pod("p0", "a1", "100m"), pod("p1", "a1", "100m"), pod("p2", "b1", "100m")},
		want:   Verdict{Pods: 3, Bound: 3, Groups: 1, CompleteGroups: 1, AntiAffinityViolations: 1},
	}, {
		name:   "a one-per-node member on a node without the label is not confirmed",
		groups: onePerNode("p0", "p1"),
		pods:   []*corev1.Pod{pod("p0", "a1", "100m"), pod("p1", "x", "100m")},
		want:   Verdict{Pods: 2, Bound: 2, Groups: 1, CompleteGroups: 1, AntiAffinityViolations: 1},
	}, {
		name: "two gangs may share a node under their own anti-affinity",
		groups: []Group{
			{Name: "g", Members: []string{"p0", "p1"}, MinCount: 2, OnePerValueKey: "host"},
			{Name: "h", Members: []string{"q0", "q1"}, MinCount: 2, OnePerValueKey: "host"},
		},
		pods: []*corev1.Pod{pod("p0", "a1", "100m"), pod("p1", "a2", "100m"), pod("q0", "a1", "100m"), pod("q1", "a2", "100m")},
		want: Verdict{Pods: 4, Bound: 4, Groups: 2, CompleteGroups: 2},
	}, {
		name: "more cpu than allocatable overcommits a node",
		pods: []*corev1.Pod{pod("p0", "a1", "600m"), pod("p1", "a1", "600m")},
		want: Verdict{Pods: 2, Bound: 2, OvercommittedNodes: 1},
	}, {
		name: "more pods than allocatable overcommits a node",
		pods: []*corev1.Pod{pod("p0", "a1", "1m"), pod("p1", "a1", "1m"), pod("p2", "a1", "1m"), pod("p3", "a1", "1m")},
		want: Verdict{Pods: 4, Bound: 4, OvercommittedNodes: 1},
	}, {
		name: "exactly full is not overcommitted",
		pods: []*corev1.Pod{pod("p0", "a1", "500m"), pod("p1", "a1", "500m")},
		want: Verdict{Pods: 2, Bound: 2},
	}, {
		name: "a pod on a node that does not exist is flagged",
		pods: []*corev1.Pod{pod("p0", "ghost", "1m")},
		want: Verdict{Pods: 1, Bound: 1, UnknownNodes: 1},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Check(tt.groups, nodes, tt.pods)
			wantOK := tt.want.PartialGroups == 0 && tt.want.TopologyViolations == 0 && tt.want.AntiAffinityViolations == 0 &&
				tt.want.OvercommittedNodes == 0 && tt.want.UnknownNodes == 0
			assert.Equal(t, wantOK, got.OK(), "OK(); problems: %v", got.Problems)
			assert.Equal(t, !wantOK, len(got.Problems) > 0, "problems are named exactly when something is wrong: %v", got.Problems)
			got.Problems = nil
			assert.Equal(t, tt.want, got)
		})
	}
}
