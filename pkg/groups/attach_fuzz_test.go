package groups

import (
	"fmt"
	"maps"
	"strconv"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	v1alpha1 "github.com/phalanx-sched/phalanx/apis/scheduling/v1alpha1"
)

const specField = "spec.schedulingGroup.podGroupName"

// attachInput is one pod's attachment as the fuzzer sees it: each label
// may be absent or present (possibly empty), and spec.schedulingGroup may
// be absent, present without podGroupName, or present with it.
type attachInput struct {
	ns                        string
	hasGroup, hasName, hasMin bool
	group, name, min          string
	specMode                  uint8 // 0 no schedulingGroup, 1 without podGroupName, 2 with it
	spec                      string
}

func (in attachInput) pod() *corev1.Pod {
	p := newPod("p", func(p *corev1.Pod) { p.Namespace = in.ns })
	if in.hasGroup {
		p.Labels[v1alpha1.PodGroupLabel] = in.group
	}
	if in.hasName {
		p.Labels[v1alpha1.LightweightNameLabel] = in.name
	}
	if in.hasMin {
		p.Labels[v1alpha1.LightweightMinAvailableLabel] = in.min
	}
	switch in.specMode {
	case 1:
		p.Spec.SchedulingGroup = &corev1.PodSchedulingGroup{}
	case 2:
		p.Spec.SchedulingGroup = &corev1.PodSchedulingGroup{PodGroupName: ptr.To(in.spec)}
	}
	return p
}

// specName is what spec.schedulingGroup says, "" for nothing.
func (in attachInput) specName() string {
	if in.specMode == 2 {
		return in.spec
	}
	return ""
}

// FuzzAttach checks Attach against the rules its doc comment and the user
// guide state ("checked in this order; contradicting attachments are an
// error reported on the pod"):
//   - it never panics and never modifies the pod;
//   - a pod is ungrouped (ok false) exactly when it has neither group label
//     nor a non-empty spec.schedulingGroup.podGroupName, and then there is
//     no error;
//   - an error comes with ok true and a zero Attachment, and names the
//     offending label or field: each label or field it names is set on the
//     pod, and it names the one at fault (with its value where one is set);
//   - a success names the pod's namespace and a non-empty group that is one
//     of the inputs: the pod-group label or spec name for a PodGroup, the
//     name label for a label gang, whose MinAvailable is ≥ 1 and equals
//     strconv.Atoi of the min-available label;
//   - the pod-group label and spec.schedulingGroup.podGroupName naming
//     different groups is an error, naming the same one is not; the label
//     pair together with spec.schedulingGroup.podGroupName is always an
//     error (a label gang has no PodGroup object to name);
//   - the pod-group label is checked first: with it present the label pair
//     does not change the result.
//
// The checks are plain comparisons rather than testify's: reflection in the
// fuzzed function adds coverage noise that slows the search.
func FuzzAttach(f *testing.F) {
	// The seed corpus is in testdata/fuzz/FuzzAttach.
	f.Add("ns", true, "train", false, "", false, "", uint8(0), "")
	f.Fuzz(func(t *testing.T, ns string, hasGroup bool, group string, hasName bool, name string,
		hasMin bool, min string, specMode uint8, spec string) {
		in := attachInput{ns: ns, hasGroup: hasGroup, group: group, hasName: hasName, name: name,
			hasMin: hasMin, min: min, specMode: specMode % 3, spec: spec}
		pod := in.pod()
		a, ok, err := Attach(pod)
		if !maps.Equal(pod.Labels, in.pod().Labels) || specNameOf(pod) != specNameOf(in.pod()) {
			t.Fatalf("Attach modified the pod %+v", in)
		}
		if msg := checkAttach(in, a, ok, err); msg != "" {
			t.Fatalf("%s\ninput %+v\ngot %+v, ok %v, err %v", msg, in, a, ok, err)
		}

		if in.hasGroup {
			bare := in
			bare.hasName, bare.hasMin = false, false
			a2, ok2, err2 := Attach(bare.pod())
			if a2 != a || ok2 != ok || errText(err2) != errText(err) {
				t.Fatalf("the label pair changed the result for a pod with the pod-group label %+v: "+
					"%+v, %v, %v without it, %+v, %v, %v with it", in, a2, ok2, err2, a, ok, err)
			}
		}
	})
}

// checkAttach returns what is wrong with Attach's answer for in, "" if
// nothing.
func checkAttach(in attachInput, a Attachment, ok bool, err error) string {
	spec := in.specName()
	grouped := in.hasGroup || in.hasName || spec != ""
	if ok != grouped {
		return "ok must say whether the pod carries any attachment"
	}
	if !ok {
		if err != nil || a != (Attachment{}) {
			return "an ungrouped pod has no attachment and no error"
		}
		return ""
	}

	// Which attachments contradict each other or are malformed, by the
	// documented rules, and what the error must name.
	var want []string
	switch {
	case in.hasGroup && in.group == "":
		want = []string{v1alpha1.PodGroupLabel, "empty"}
	case in.hasGroup && spec != "" && spec != in.group:
		want = []string{v1alpha1.PodGroupLabel, strconv.Quote(in.group), specField, strconv.Quote(spec)}
	case in.hasGroup:
	case in.hasName && in.name == "":
		want = []string{v1alpha1.LightweightNameLabel, "empty"}
	case in.hasName && !in.hasMin:
		want = []string{v1alpha1.LightweightNameLabel, v1alpha1.LightweightMinAvailableLabel, "missing"}
	case in.hasName && !positiveInt(in.min):
		want = []string{v1alpha1.LightweightMinAvailableLabel, strconv.Quote(in.min), "positive integer"}
	case in.hasName && spec != "":
		want = []string{v1alpha1.LightweightNameLabel, strconv.Quote(in.name), specField, strconv.Quote(spec)}
	}

	if want != nil {
		if err == nil {
			return fmt.Sprintf("a malformed or contradictory attachment must be an error naming %q", want)
		}
		if a != (Attachment{}) {
			return "an attachment error comes with no attachment"
		}
		msg := err.Error()
		for _, s := range want {
			if !strings.Contains(msg, s) {
				return fmt.Sprintf("the error must name the offending label or field and value: no %q", s)
			}
		}
		// It names nothing that is not on the pod. The values it quotes
		// and the namespace are the user's strings: leave them out.
		for _, v := range []string{in.group, in.name, in.min, spec} {
			msg = strings.ReplaceAll(msg, strconv.Quote(v), "")
		}
		msg = strings.ReplaceAll(msg, in.ns, "")
		for k, set := range map[string]bool{
			v1alpha1.PodGroupLabel:                in.hasGroup,
			v1alpha1.LightweightNameLabel:         in.hasName,
			v1alpha1.LightweightMinAvailableLabel: in.hasName, // named as missing or malformed
			specField:                             spec != "",
		} {
			if !set && strings.Contains(msg, k) {
				return fmt.Sprintf("the error names %s, which the pod does not set", k)
			}
		}
		if (in.hasGroup && spec == in.group || !in.hasGroup && spec == in.name) && strings.Contains(msg, "disagree") {
			return "equal names do not disagree"
		}
		return ""
	}

	var wantKey Key
	wantMin := 0
	switch {
	case err != nil:
		return "a well-formed attachment is no error"
	case in.hasGroup: // the pod-group label wins; a spec name agrees with it
		wantKey = Key{Kind: PodGroupKind, Namespace: in.ns, Name: in.group}
	case in.hasName: // the label pair forms a label gang of min-available
		wantKey = Key{Kind: LabelKind, Namespace: in.ns, Name: in.name}
		n, convErr := strconv.Atoi(in.min)
		if convErr != nil || n < 1 {
			return "a label gang's min-available must be a positive integer"
		}
		wantMin = n
	default: // spec.schedulingGroup.podGroupName names a PodGroup
		wantKey = Key{Kind: PodGroupKind, Namespace: in.ns, Name: spec}
	}
	if a.Key.Name == "" {
		return "an attachment names a group"
	}
	if a != (Attachment{Key: wantKey, MinAvailable: wantMin}) {
		return fmt.Sprintf("want %+v, MinAvailable %d: the group named by the input that wins, in the pod's namespace", wantKey, wantMin)
	}
	return ""
}

func specNameOf(p *corev1.Pod) string {
	if sg := p.Spec.SchedulingGroup; sg != nil && sg.PodGroupName != nil {
		return "set:" + *sg.PodGroupName
	}
	if p.Spec.SchedulingGroup != nil {
		return "empty"
	}
	return ""
}

func positiveInt(s string) bool {
	n, err := strconv.Atoi(s)
	return err == nil && n >= 1
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
