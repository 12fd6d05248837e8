package planinput

import (
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
)

// antiAffineSnapshot puts gangs×8 running pods, each repelling its own
// gang on hostname, one per node: the state of the 5,000-node anti-affinity
// bench as its last gangs are planned.
func antiAffineSnapshot(gangs int) []fwk.NodeInfo {
	var infos []fwk.NodeInfo
	for g := range gangs {
		for m := range 8 {
			name := fmt.Sprintf("node-%d-%d", g, m)
			ni := framework.NewNodeInfo()
			ni.SetNode(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{corev1.LabelHostname: name}}})
			gang := fmt.Sprintf("gang-%d", g)
			p := &corev1.Pod{
				ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-%d", gang, m), Namespace: "default", UID: types.UID(fmt.Sprintf("%s-%d", gang, m)), Labels: map[string]string{"gang": gang}},
				Spec: corev1.PodSpec{NodeName: name, Affinity: &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{
					RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
						TopologyKey:   corev1.LabelHostname,
						LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"gang": gang}},
					}},
				}}},
			}
			ni.AddPod(p)
			infos = append(infos, ni)
		}
	}
	return infos
}

func termIDs(ts []term) map[string]bool {
	out := map[string]bool{}
	for _, t := range ts {
		out[t.id] = true
	}
	return out
}

// The memo must give what formatting every pod gives, one term per gang,
// and forget the pods that left the snapshot.
func TestTermMemoMatchesFormatting(t *testing.T) {
	infos := antiAffineSnapshot(5)
	memo := &TermMemo{}
	want := termIDs(existingAntiAffinity(infos, nil))
	if len(want) != 5 {
		t.Fatalf("want one distinct term per gang (5), got %d", len(want))
	}
	for round := range 2 {
		got := termIDs(existingAntiAffinity(infos, memo))
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("round %d: memo gave %v, formatting gave %v", round, got, want)
		}
	}
	if len(memo.ids) != 40 {
		t.Fatalf("memo holds %d pods, want the 40 running", len(memo.ids))
	}
	// Gang 0's pods leave: their terms and memo entries go with them.
	rest := infos[8:]
	got := termIDs(existingAntiAffinity(rest, memo))
	if len(got) != 4 || len(memo.ids) != 32 {
		t.Fatalf("after gang-0 left: %d terms (want 4), memo holds %d pods (want 32)", len(got), len(memo.ids))
	}
}

// BenchmarkExistingAntiAffinity is the per-plan cost of listing running
// pods' anti-affinity terms with 8,000 anti-affine pods: formatting each
// term (nil memo) against the memo.
func BenchmarkExistingAntiAffinity(b *testing.B) {
	infos := antiAffineSnapshot(1000)
	b.Run("format", func(b *testing.B) {
		for b.Loop() {
			existingAntiAffinity(infos, nil)
		}
	})
	b.Run("memo", func(b *testing.B) {
		memo := &TermMemo{}
		for b.Loop() {
			existingAntiAffinity(infos, memo)
		}
	})
}
