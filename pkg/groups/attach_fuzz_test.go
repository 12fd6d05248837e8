package groups

import (
	"fmt"
	"maps"
	"strconv"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
	xv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	v1alpha1 "github.com/phalanx-sched/phalanx/apis/scheduling/v1alpha1"
)

const specField = "spec.schedulingGroup.podGroupName"

// attachInput is one pod's attachment as the fuzzer sees it: each label
// may be absent or present (possibly empty). specMode says what carries
// the spec string: 0 nothing, 1 a spec.schedulingGroup without
// podGroupName, 2 spec.schedulingGroup.podGroupName, 3 the
// scheduling.x-k8s.io/pod-group label, 4 both of the last two. (Folding the
// scheduler-plugins label into specMode keeps the fuzz signature, and with
// it the seed corpus, unchanged.)
type attachInput struct {
	ns                        string
	hasGroup, hasName, hasMin bool
	group, name, min          string
	specMode                  uint8 // see above
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
	case 2, 4:
		p.Spec.SchedulingGroup = &corev1.PodSchedulingGroup{PodGroupName: ptr.To(in.spec)}
	}
	if in.xLabel() {
		p.Labels[xv1alpha1.PodGroupLabel] = in.spec
	}
	return p
}

// specName is what spec.schedulingGroup says, "" for nothing.
func (in attachInput) specName() string {
	if in.specMode == 2 || in.specMode == 4 {
		return in.spec
	}
	return ""
}

// xLabel reports whether the pod carries scheduler-plugins' label (with
// value spec).
func (in attachInput) xLabel() bool { return in.specMode == 3 || in.specMode == 4 }

// FuzzAttach checks Attach against the rules its doc comment and the user
// guide state ("checked in this order; contradicting attachments are an
// error reported on the pod"):
//   - it never panics and never modifies the pod;
//   - a pod is ungrouped (ok false) exactly when it has no group label and
//     no non-empty spec.schedulingGroup.podGroupName, and then there is no
//     error;
//   - an error comes with ok true and a zero Attachment, and names the
//     offending label or field: each label or field it names is set on the
//     pod, and it names the one at fault (with its value where one is set);
//   - a success names the pod's namespace and a non-empty group that is one
//     of the inputs, in its dialect: the pod-group label for a Phalanx
//     PodGroup, the name label for a label gang (whose MinAvailable is ≥ 1
//     and equals strconv.Atoi of the min-available label), the
//     scheduling.x-k8s.io label for a scheduler-plugins PodGroup, the spec
//     name for an upstream PodGroup;
//   - naming groups in two dialects is an error that names both, even with
//     equal names: they are different groups;
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
			hasMin: hasMin, min: min, specMode: specMode % 5, spec: spec}
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
	grouped := in.hasGroup || in.hasName || in.xLabel() || spec != ""
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
	type source struct{ where, value string }
	var sources []source
	switch {
	case in.hasGroup:
		sources = append(sources, source{v1alpha1.PodGroupLabel, in.group})
	case in.hasName:
		sources = append(sources, source{v1alpha1.LightweightNameLabel, in.name})
	}
	if in.xLabel() {
		sources = append(sources, source{xv1alpha1.PodGroupLabel, in.spec})
	}
	if spec != "" {
		sources = append(sources, source{specField, spec})
	}
	var want []string
	switch {
	case in.hasGroup && in.group == "":
		want = []string{v1alpha1.PodGroupLabel, "empty"}
	case in.hasGroup:
	case in.hasName && in.name == "":
		want = []string{v1alpha1.LightweightNameLabel, "empty"}
	case in.hasName && !in.hasMin:
		want = []string{v1alpha1.LightweightNameLabel, v1alpha1.LightweightMinAvailableLabel, "missing"}
	case in.hasName && !positiveInt(in.min):
		want = []string{v1alpha1.LightweightMinAvailableLabel, strconv.Quote(in.min), "positive integer"}
	}
	if want == nil && in.xLabel() && in.spec == "" {
		want = []string{xv1alpha1.PodGroupLabel, "empty"}
	}
	if want == nil && len(sources) > 1 {
		want = []string{sources[0].where, strconv.Quote(sources[0].value), sources[1].where, strconv.Quote(sources[1].value), "one group"}
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
		for _, v := range []string{in.group, in.name, in.min, in.spec} {
			msg = strings.ReplaceAll(msg, strconv.Quote(v), "")
		}
		msg = strings.ReplaceAll(msg, in.ns, "")
		for k, set := range map[string]bool{
			v1alpha1.PodGroupLabel:                in.hasGroup,
			v1alpha1.LightweightNameLabel:         in.hasName,
			v1alpha1.LightweightMinAvailableLabel: in.hasName, // named as missing or malformed
			xv1alpha1.PodGroupLabel:               in.xLabel(),
			specField:                             spec != "",
		} {
			if !set && strings.Contains(msg, k) {
				return fmt.Sprintf("the error names %s, which the pod does not set", k)
			}
		}
		return ""
	}

	var wantKey Key
	wantMin := 0
	switch {
	case err != nil:
		return "a well-formed attachment is no error"
	case in.hasGroup:
		wantKey = Key{Kind: PodGroupKind, Namespace: in.ns, Name: in.group}
	case in.hasName: // the label pair forms a label gang of min-available
		wantKey = Key{Kind: LabelKind, Namespace: in.ns, Name: in.name}
		n, convErr := strconv.Atoi(in.min)
		if convErr != nil || n < 1 {
			return "a label gang's min-available must be a positive integer"
		}
		wantMin = n
	case in.xLabel():
		wantKey = Key{Dialect: Coscheduling, Kind: PodGroupKind, Namespace: in.ns, Name: in.spec}
	default: // spec.schedulingGroup.podGroupName names an upstream PodGroup
		wantKey = Key{Dialect: Native, Kind: PodGroupKind, Namespace: in.ns, Name: spec}
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
