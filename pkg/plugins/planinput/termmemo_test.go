package planinput

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
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

func termIDs(ts *existingTerms) map[string]bool {
	out := map[string]bool{}
	for _, t := range ts.list {
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
	if memo.heldPods() != 40 {
		t.Fatalf("memo holds %d pods, want the 40 running", memo.heldPods())
	}
	// Gang 0's pods leave: their terms and memo entries go with them.
	rest := infos[8:]
	got := termIDs(existingAntiAffinity(rest, memo))
	if len(got) != 4 || memo.heldPods() != 32 {
		t.Fatalf("after gang-0 left: %d terms (want 4), memo holds %d pods (want 32)", len(got), memo.heldPods())
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
	// Between two plans of the bench, one gang's 8 members bound: 8 nodes
	// moved, and a new term appeared. Each plan then matches its 8
	// members against the running pods' terms.
	b.Run("memo-gang-bound-between-plans", func(b *testing.B) {
		memo := &TermMemo{}
		existingAntiAffinity(infos, memo)
		member := infos[0].GetPods()[0].GetPod().DeepCopy()
		member.Labels = map[string]string{"gang": "next"}
		g := 0
		for b.Loop() {
			g = (g + 1) % 1000
			for m := range 8 {
				ni := infos[g*8+m].(*framework.NodeInfo)
				ni.SetNode(ni.Node())
			}
			e := existingAntiAffinity(infos, memo)
			for range 8 {
				e.matching(member, nil)
			}
		}
	})
}

// heldPods counts the pods whose terms the memo holds.
func (m *TermMemo) heldPods() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := 0
	for _, ps := range m.pods {
		n += len(ps)
	}
	return n
}

// TestExistingTermsIndexFindsWhatMatchingEveryTermFinds: the label index
// only narrows which terms are tried; what a pod matches is what trying
// every term gives, for selectors with and without an indexable
// requirement, several values, and terms of other namespaces.
func TestExistingTermsIndexFindsWhatMatchingEveryTermFinds(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 31))
	keys, values := []string{"app", "gang", "tier"}, []string{"a", "b", "c"}
	randomSelector := func() *metav1.LabelSelector {
		sel := &metav1.LabelSelector{}
		for range 1 + rng.IntN(2) {
			k := keys[rng.IntN(len(keys))]
			switch rng.IntN(4) {
			case 0:
				sel.MatchLabels = map[string]string{k: values[rng.IntN(len(values))]}
			case 1:
				sel.MatchExpressions = append(sel.MatchExpressions, metav1.LabelSelectorRequirement{Key: k, Operator: metav1.LabelSelectorOpIn, Values: []string{values[rng.IntN(3)], values[rng.IntN(3)]}})
			case 2:
				sel.MatchExpressions = append(sel.MatchExpressions, metav1.LabelSelectorRequirement{Key: k, Operator: metav1.LabelSelectorOpNotIn, Values: []string{values[rng.IntN(3)]}})
			default:
				sel.MatchExpressions = append(sel.MatchExpressions, metav1.LabelSelectorRequirement{Key: k, Operator: metav1.LabelSelectorOpExists})
			}
		}
		return sel
	}
	randomLabels := func() map[string]string {
		l := map[string]string{}
		for _, k := range keys {
			if rng.IntN(3) > 0 {
				l[k] = values[rng.IntN(len(values))]
			}
		}
		return l
	}
	for round := range 50 {
		var infos []fwk.NodeInfo
		for n := range 20 {
			ni := framework.NewNodeInfo()
			name := fmt.Sprintf("n-%d", n)
			ni.SetNode(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{corev1.LabelHostname: name}}})
			for p := range rng.IntN(3) {
				ns := []string{"default", "other"}[rng.IntN(2)]
				pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("p-%d-%d", n, p), Namespace: ns, UID: types.UID(fmt.Sprintf("%d-%d-%d", round, n, p)), Labels: randomLabels()},
					Spec: corev1.PodSpec{NodeName: name, Affinity: &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{
						RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{TopologyKey: corev1.LabelHostname, LabelSelector: randomSelector()}},
					}}}}
				if rng.IntN(4) == 0 {
					pod.Spec.Affinity.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution[0].Namespaces = []string{"default", "other"}
				}
				ni.AddPod(pod)
			}
			infos = append(infos, ni)
		}
		existing := existingAntiAffinity(infos, &TermMemo{})
		for range 20 {
			pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "member", Namespace: []string{"default", "other"}[rng.IntN(2)], Labels: randomLabels()}}
			var want []int
			for i, e := range existing.list {
				if e.Matches(pod, nil) {
					want = append(want, i)
				}
			}
			if got := existing.matching(pod, nil); !slices.Equal(got, want) {
				t.Fatalf("round %d: pod %v matches terms %v by the index, %v by trying each", round, pod.Labels, got, want)
			}
		}
	}
}

// TestTermMemoFollowsTheSnapshot: kept node by node across plans, the
// memo lists exactly the terms a fresh read lists as pods bind and leave
// and nodes come and go, and the terms that stay keep their order (the
// shape keys of plans name terms by position).
func TestTermMemoFollowsTheSnapshot(t *testing.T) {
	infos := antiAffineSnapshot(20)
	memo := &TermMemo{}
	rng := rand.New(rand.NewPCG(3, 5))
	var previous []string
	for step := range 200 {
		switch rng.IntN(4) {
		case 0: // a pod of a new gang binds somewhere
			ni := infos[rng.IntN(len(infos))].(*framework.NodeInfo)
			gang := fmt.Sprintf("late-%d", step)
			ni.AddPod(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: gang, Namespace: "default", UID: types.UID(gang), Labels: map[string]string{"gang": gang}},
				Spec: corev1.PodSpec{NodeName: ni.Node().Name, Affinity: &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{
					RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{TopologyKey: corev1.LabelHostname, LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"gang": gang}}}},
				}}}})
		case 1: // a pod leaves
			ni := infos[rng.IntN(len(infos))].(*framework.NodeInfo)
			if pods := ni.GetPods(); len(pods) > 0 {
				if err := ni.RemovePod(klog.Background(), pods[rng.IntN(len(pods))].GetPod()); err != nil {
					t.Fatal(err)
				}
			}
		case 2: // a node goes
			if len(infos) > 1 {
				i := rng.IntN(len(infos))
				infos = slices.Delete(slices.Clone(infos), i, i+1)
			}
		default: // nothing moves
		}
		got := existingAntiAffinity(infos, memo)
		want := existingAntiAffinity(infos, nil)
		if fmt.Sprint(termIDs(got)) != fmt.Sprint(termIDs(want)) || got.len() != want.len() {
			t.Fatalf("step %d: the memo lists %d terms, a fresh read %d", step, got.len(), want.len())
		}
		var ids []string
		now := map[string]bool{}
		for _, e := range got.list {
			ids = append(ids, e.id)
			now[e.id] = true
		}
		kept := slices.DeleteFunc(slices.Clone(previous), func(id string) bool { return !now[id] })
		stayed := slices.DeleteFunc(slices.Clone(ids), func(id string) bool { return !slices.Contains(previous, id) })
		if !slices.Equal(kept, stayed) {
			t.Fatalf("step %d: the terms that stayed changed order", step)
		}
		previous = ids
	}
}
