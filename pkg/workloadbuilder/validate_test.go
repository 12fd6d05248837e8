package workloadbuilder_test

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/phalanx-sched/phalanx/apis/scheduling/v1alpha1"
	wb "github.com/phalanx-sched/phalanx/pkg/workloadbuilder"
)

// wantErr is the part of a field.Error a case pins down. An empty detail
// means the message is apimachinery's and not worth repeating here.
type wantErr struct {
	typ    field.ErrorType
	field  string
	detail string
}

func summarize(errs field.ErrorList, want []wantErr) []wantErr {
	out := []wantErr{}
	for i, e := range errs {
		w := wantErr{typ: e.Type, field: e.Field, detail: e.Detail}
		if i < len(want) && want[i].detail == "" {
			w.detail = ""
		}
		out = append(out, w)
	}
	return out
}

func TestValidate(t *testing.T) {
	onlyBasic := everything
	onlyBasic.AllowedPolicies = []wb.PolicyKind{wb.BasicPolicy}
	onlyGang := everything
	onlyGang.AllowedPolicies = []wb.PolicyKind{wb.GangPolicy}
	onlySingle := everything
	onlySingle.AllowedDisruptionModes = []wb.DisruptionModeKind{wb.SingleMode}
	noDV := everything
	noDV.DisableDeclarativeValidation = true
	noDVOnlyBasic := onlyBasic
	noDVOnlyBasic.DisableDeclarativeValidation = true

	annotation := field.NewPath("metadata", "annotations").Key("scheduling.phalanx.dev/min-count")
	podSpec := field.NewPath("spec", "template", "spec")
	claimName := func(s string) *string { return &s }

	// storedJob is the compiled Workload of jobItem (a gang of 4, no
	// constraints), as the API server would hold it.
	storedJob := &v1alpha1.Workload{Spec: v1alpha1.WorkloadSpec{PodGroupTemplates: []v1alpha1.PodGroupTemplate{{
		Name:             "workers",
		SchedulingPolicy: v1alpha1.PodGroupSchedulingPolicy{Gang: &v1alpha1.GangSchedulingPolicy{MinCount: 4}},
	}}}}
	storedComposite := &v1alpha1.Workload{Spec: v1alpha1.WorkloadSpec{CompositePodGroupTemplates: []v1alpha1.CompositePodGroupTemplate{{
		CompositePodGroupTemplateFields: v1alpha1.CompositePodGroupTemplateFields{
			Name:             "root",
			SchedulingPolicy: v1alpha1.CompositePodGroupSchedulingPolicy{Gang: &v1alpha1.CompositeGangSchedulingPolicy{MinGroupCount: 2}},
			DisruptionMode:   &v1alpha1.CompositeDisruptionMode{Single: &v1alpha1.SingleCompositeDisruptionMode{}},
			PodGroupTemplates: []v1alpha1.PodGroupTemplate{
				{Name: "a", SchedulingPolicy: v1alpha1.PodGroupSchedulingPolicy{Gang: &v1alpha1.GangSchedulingPolicy{MinCount: 4}}},
				{Name: "b", SchedulingPolicy: v1alpha1.PodGroupSchedulingPolicy{Gang: &v1alpha1.GangSchedulingPolicy{MinCount: 4}}},
			},
		},
	}}}}

	cases := []struct {
		name  string
		item  func() *wb.WorkloadItem
		opts  *wb.BuildOptions // nil: everything allowed
		input wb.ValidationInput
		want  []wantErr
	}{
		// ---- valid trees
		{
			name: "a Job-like gang with every block set and valid passes",
			item: func() *wb.WorkloadItem {
				it := jobItem()
				it.Input.SchedulingConstraints.Value = &wb.WorkloadPodGroupSchedulingConstraints{Topology: topology("topology.example.com/rack")}
				it.Input.DisruptionMode.Value = allMode()
				it.Input.ResourceClaims.Value = []wb.WorkloadPodGroupResourceClaim{{Name: "gpus", ResourceClaimTemplateName: claimName("gpu-template")}}
				never := v1alpha1.PreemptNever
				it.Input.Priority = wb.At(podSpec, &wb.WorkloadPriority{PriorityClassName: "high", PreemptionPolicy: &never})
				return it
			},
		},
		{
			name: "a tree of three composite levels over leaves at the fourth level passes",
			item: fourLevels,
		},
		{
			name: "children that set no priority inherit their parent's and pass",
			item: func() *wb.WorkloadItem {
				it := gangOfGangs()
				it.Input.Priority.Value = &wb.WorkloadPriority{PriorityClassName: "high", Priority: int32p(1000)}
				return it
			},
		},

		// ---- names
		{
			name: "an empty template name is required at the item's name path",
			item: func() *wb.WorkloadItem { it := jobItem(); it.Name = ""; return it },
			want: []wantErr{{field.ErrorTypeRequired, "spec.scheduling.name", ""}},
		},
		{
			name: "a template name that is not a DNS label is reported where the controller read it",
			item: func() *wb.WorkloadItem {
				it := jobItem()
				it.Name, it.NamePath = "Workers", field.NewPath("metadata", "name")
				return it
			},
			want: []wantErr{{field.ErrorTypeInvalid, "metadata.name", ""}},
		},
		{
			name: "a template name longer than 63 characters is invalid",
			item: func() *wb.WorkloadItem { it := jobItem(); it.Name = strings.Repeat("a", 64); return it },
			want: []wantErr{{field.ErrorTypeInvalid, "spec.scheduling.name", "must be no more than 63 characters"}},
		},
		{
			name: "a template name reused anywhere in the tree is a duplicate at the later item",
			item: func() *wb.WorkloadItem {
				it := fourLevels()
				it.Children[0].Children[0].Children[0].Name = "l2"
				return it
			},
			want: []wantErr{{field.ErrorTypeDuplicate, "spec.groups[0].groups[0].groups[0].name", ""}},
		},

		// ---- leaf blocks
		{
			name: "a policy with neither basic nor gang is invalid at the policy",
			item: func() *wb.WorkloadItem {
				it := jobItem()
				it.Input.SchedulingPolicy.Value = &wb.WorkloadPodGroupSchedulingPolicy{}
				return it
			},
			want: []wantErr{{field.ErrorTypeInvalid, "spec.scheduling.schedulingPolicy", wb.MsgPolicyUnion}},
		},
		{
			name: "a policy with both basic and gang is invalid at the policy",
			item: func() *wb.WorkloadItem {
				it := jobItem()
				it.Input.SchedulingPolicy.Value.Basic = &wb.WorkloadPodGroupBasicSchedulingPolicy{}
				return it
			},
			want: []wantErr{{field.ErrorTypeInvalid, "spec.scheduling.schedulingPolicy", wb.MsgPolicyUnion}},
		},
		{
			name: "a gang minCount of zero is invalid at gang.minCount",
			item: func() *wb.WorkloadItem { it := jobItem(); it.Input.SchedulingPolicy.Value = gangOf(0); return it },
			want: []wantErr{{field.ErrorTypeInvalid, "spec.scheduling.schedulingPolicy.gang.minCount", wb.MsgMinimum}},
		},
		{
			name: "a minCount read from an annotation is reported at the annotation",
			item: func() *wb.WorkloadItem {
				it := jobItem()
				it.Input.SchedulingPolicy = wb.At(jobPath.Child("schedulingPolicy"), gangOf(-1)).WithFieldPath("gang.minCount", annotation)
				return it
			},
			want: []wantErr{{field.ErrorTypeInvalid, "metadata.annotations[scheduling.phalanx.dev/min-count]", wb.MsgMinimum}},
		},
		{
			name: "two topology constraints are one more than a group may have",
			item: func() *wb.WorkloadItem {
				it := jobItem()
				it.Input.SchedulingConstraints.Value = &wb.WorkloadPodGroupSchedulingConstraints{Topology: topology("zone", "rack")}
				return it
			},
			want: []wantErr{{field.ErrorTypeTooMany, "spec.scheduling.schedulingConstraints.topology", ""}},
		},
		{
			name: "an empty topology key is required",
			item: func() *wb.WorkloadItem {
				it := jobItem()
				it.Input.SchedulingConstraints.Value = &wb.WorkloadPodGroupSchedulingConstraints{Topology: topology("")}
				return it
			},
			want: []wantErr{{field.ErrorTypeRequired, "spec.scheduling.schedulingConstraints.topology[0].key", ""}},
		},
		{
			name: "a topology key that is not a qualified name is invalid",
			item: func() *wb.WorkloadItem {
				it := jobItem()
				it.Input.SchedulingConstraints = wb.At(field.NewPath("spec", "placement"),
					&wb.WorkloadPodGroupSchedulingConstraints{Topology: topology("bad key!")})
				return it
			},
			want: []wantErr{{field.ErrorTypeInvalid, "spec.placement.topology[0].key", ""}},
		},
		{
			name: "a disruption mode with both single and all is invalid",
			item: func() *wb.WorkloadItem {
				it := jobItem()
				d := allMode()
				d.Single = &wb.WorkloadPodGroupSingleDisruptionMode{}
				it.Input.DisruptionMode.Value = d
				return it
			},
			want: []wantErr{{field.ErrorTypeInvalid, "spec.scheduling.disruptionMode", wb.MsgDisruptionModeUnion}},
		},
		{
			name: "five resource claims are one more than a group may have",
			item: func() *wb.WorkloadItem {
				it := jobItem()
				for _, n := range []string{"a", "b", "c", "d", "e"} {
					it.Input.ResourceClaims.Value = append(it.Input.ResourceClaims.Value,
						wb.WorkloadPodGroupResourceClaim{Name: n, ResourceClaimName: claimName("claim-" + n)})
				}
				return it
			},
			want: []wantErr{{field.ErrorTypeTooMany, "spec.scheduling.resourceClaims", "must have at most 4 items"}},
		},
		{
			name: "a repeated resource claim name is a duplicate",
			item: func() *wb.WorkloadItem {
				it := jobItem()
				it.Input.ResourceClaims.Value = []wb.WorkloadPodGroupResourceClaim{
					{Name: "gpus", ResourceClaimName: claimName("a")},
					{Name: "gpus", ResourceClaimName: claimName("b")},
				}
				return it
			},
			want: []wantErr{{field.ErrorTypeDuplicate, "spec.scheduling.resourceClaims[1].name", ""}},
		},
		{
			name: "a resource claim naming both a claim and a template is invalid",
			item: func() *wb.WorkloadItem {
				it := jobItem()
				it.Input.ResourceClaims.Value = []wb.WorkloadPodGroupResourceClaim{
					{Name: "gpus", ResourceClaimName: claimName("a"), ResourceClaimTemplateName: claimName("t")},
				}
				return it
			},
			want: []wantErr{{field.ErrorTypeInvalid, "spec.scheduling.resourceClaims[0]", wb.MsgClaimSourceUnion}},
		},
		{
			name: "a resource claim naming neither a claim nor a template is invalid",
			item: func() *wb.WorkloadItem {
				it := jobItem()
				it.Input.ResourceClaims.Value = []wb.WorkloadPodGroupResourceClaim{{Name: "gpus"}}
				return it
			},
			want: []wantErr{{field.ErrorTypeInvalid, "spec.scheduling.resourceClaims[0]", wb.MsgClaimSourceUnion}},
		},
		{
			name: "a resource claim name that is not a DNS label is invalid",
			item: func() *wb.WorkloadItem {
				it := jobItem()
				it.Input.ResourceClaims.Value = []wb.WorkloadPodGroupResourceClaim{{Name: "GPUs", ResourceClaimName: claimName("a")}}
				return it
			},
			want: []wantErr{{field.ErrorTypeInvalid, "spec.scheduling.resourceClaims[0].name", ""}},
		},
		{
			name: "an unsupported preemption policy is rejected where the controller read it",
			item: func() *wb.WorkloadItem {
				it := jobItem()
				sometimes := v1alpha1.PreemptionPolicy("Sometimes")
				it.Input.Priority = wb.At(podSpec, &wb.WorkloadPriority{PreemptionPolicy: &sometimes})
				return it
			},
			want: []wantErr{{field.ErrorTypeNotSupported, "spec.template.spec.preemptionPolicy", `supported values: "PreemptLowerPriority", "Never"`}},
		},
		{
			name: "a priority class name that is not a DNS subdomain is invalid",
			item: func() *wb.WorkloadItem {
				it := jobItem()
				it.Input.Priority = wb.At(podSpec, &wb.WorkloadPriority{PriorityClassName: "High_Priority"})
				return it
			},
			want: []wantErr{{field.ErrorTypeInvalid, "spec.template.spec.priorityClassName", ""}},
		},

		// ---- composite blocks and tree shape
		{
			name: "a composite minGroupCount of zero is invalid at gang.minGroupCount",
			item: func() *wb.WorkloadItem {
				it := gangOfGangs()
				it.Input.CompositeSchedulingPolicy.Value = compositeGang(0)
				return it
			},
			want: []wantErr{{field.ErrorTypeInvalid, "spec.schedulingPolicy.gang.minGroupCount", wb.MsgMinimum}},
		},
		{
			name: "a composite policy with both basic and gang is invalid",
			item: func() *wb.WorkloadItem {
				it := gangOfGangs()
				it.Input.CompositeSchedulingPolicy.Value.Basic = &wb.WorkloadCompositePodGroupBasicSchedulingPolicy{}
				return it
			},
			want: []wantErr{{field.ErrorTypeInvalid, "spec.schedulingPolicy", wb.MsgPolicyUnion}},
		},
		{
			name: "a composite topology key that is not a qualified name is invalid",
			item: func() *wb.WorkloadItem {
				it := gangOfGangs()
				it.Input.CompositeSchedulingConstraints.Value = &wb.WorkloadCompositePodGroupSchedulingConstraints{Topology: topology("bad key!")}
				return it
			},
			want: []wantErr{{field.ErrorTypeInvalid, "spec.schedulingConstraints.topology[0].key", ""}},
		},
		{
			name: "a composite disruption mode with neither member is invalid",
			item: func() *wb.WorkloadItem {
				it := gangOfGangs()
				it.Input.CompositeDisruptionMode.Value = &wb.WorkloadCompositePodGroupDisruptionMode{}
				return it
			},
			want: []wantErr{{field.ErrorTypeInvalid, "spec.disruptionMode", wb.MsgDisruptionModeUnion}},
		},
		{
			name: "a composite with no children is told it needs one, at its children list",
			item: func() *wb.WorkloadItem {
				it := gangOfGangs()
				it.Children, it.ChildrenPath = nil, field.NewPath("spec", "replicatedJobs")
				it.Input.CompositeSchedulingPolicy.Value = compositeBasic()
				return it
			},
			want: []wantErr{{field.ErrorTypeRequired, "spec.replicatedJobs", wb.MsgAtLeastOneChild}},
		},
		{
			name: "nine leaf children are one more than a composite may hold",
			item: func() *wb.WorkloadItem {
				it := compositeAt("root", specPath)
				it.ChildrenPath = field.NewPath("spec", "replicatedJobs")
				for i := range 9 {
					it.Children = append(it.Children, leafAt(string(rune('a'+i)), groupPath(specPath, i)))
				}
				return it
			},
			want: []wantErr{{field.ErrorTypeTooMany, "spec.replicatedJobs", "must have at most 8 items"}},
		},
		{
			name: "a composite at the fourth level exceeds the maximum depth",
			item: func() *wb.WorkloadItem {
				it := fourLevels()
				l3 := it.Children[0].Children[0]
				l4 := compositeAt("l4", groupPath(l3.Path, 0), leafAt("leaf", groupPath(groupPath(l3.Path, 0), 0)))
				l3.Children = []*wb.WorkloadItem{l4}
				return it
			},
			want: []wantErr{{field.ErrorTypeInvalid, "spec.groups[0].groups[0].groups[0]", wb.MsgMaxDepth}},
		},
		{
			name: "a child with a different priority than its parent is rejected at the child's priority",
			item: func() *wb.WorkloadItem {
				it := gangOfGangs()
				it.Input.Priority.Value = &wb.WorkloadPriority{Priority: int32p(1000)}
				it.Children[1].Input.Priority = wb.At(podSpec, &wb.WorkloadPriority{Priority: int32p(10)})
				return it
			},
			want: []wantErr{{field.ErrorTypeInvalid, "spec.template.spec.priority", wb.MsgPriorityMismatch}},
		},
		{
			name: "a child with a different priorityClassName than its parent is rejected",
			item: func() *wb.WorkloadItem {
				it := gangOfGangs()
				it.Children[0].Input.Priority.Value = &wb.WorkloadPriority{PriorityClassName: "low"}
				return it
			},
			want: []wantErr{{field.ErrorTypeInvalid, "spec.groups[0].priorityClassName", wb.MsgPriorityMismatch}},
		},

		// ---- immutability on update
		{
			name:  "changing the policy kind on update is rejected",
			item:  func() *wb.WorkloadItem { it := jobItem(); it.Input.SchedulingPolicy.Value = basic(); return it },
			input: wb.ValidationInput{OldRoot: jobItem()},
			want:  []wantErr{{field.ErrorTypeInvalid, "spec.scheduling.schedulingPolicy", wb.MsgPolicyKindImmutable}},
		},
		{
			name:  "changing minCount on update is allowed",
			item:  func() *wb.WorkloadItem { it := jobItem(); it.Input.SchedulingPolicy.Value = gangOf(8); return it },
			input: wb.ValidationInput{OldRoot: jobItem()},
		},
		{
			name: "changing the topology constraint on update is rejected",
			item: func() *wb.WorkloadItem {
				it := jobItem()
				it.Input.SchedulingConstraints.Value = &wb.WorkloadPodGroupSchedulingConstraints{Topology: topology("zone")}
				return it
			},
			input: wb.ValidationInput{OldRoot: func() *wb.WorkloadItem {
				it := jobItem()
				it.Input.SchedulingConstraints.Value = &wb.WorkloadPodGroupSchedulingConstraints{Topology: topology("rack")}
				return it
			}()},
			want: []wantErr{{field.ErrorTypeInvalid, "spec.scheduling.schedulingConstraints", wb.MsgConstraintsImmutable}},
		},
		{
			name:  "adding a disruption mode on update is rejected",
			item:  func() *wb.WorkloadItem { it := jobItem(); it.Input.DisruptionMode.Value = allMode(); return it },
			input: wb.ValidationInput{OldRoot: jobItem()},
			want:  []wantErr{{field.ErrorTypeInvalid, "spec.scheduling.disruptionMode", wb.MsgDisruptionModeImmutable}},
		},
		{
			name: "changing minGroupCount on update is rejected",
			item: func() *wb.WorkloadItem {
				it := gangOfGangs()
				it.Input.CompositeSchedulingPolicy.Value = compositeGang(1)
				return it
			},
			input: wb.ValidationInput{OldRoot: gangOfGangs()},
			want:  []wantErr{{field.ErrorTypeInvalid, "spec.schedulingPolicy.gang.minGroupCount", wb.MsgMinGroupCountImmutable}},
		},
		{
			name: "a template added by the update has nothing to be immutable against",
			item: func() *wb.WorkloadItem {
				it := gangOfGangs()
				c := leafAt("c", groupPath(specPath, 2))
				c.Input.SchedulingPolicy.Value = basic()
				it.Children = append(it.Children, c)
				return it
			},
			input: wb.ValidationInput{OldRoot: gangOfGangs()},
		},
		{
			name:  "changing the policy kind against the stored Workload is rejected",
			item:  func() *wb.WorkloadItem { it := jobItem(); it.Input.SchedulingPolicy.Value = basic(); return it },
			input: wb.ValidationInput{OldWorkload: storedJob},
			want:  []wantErr{{field.ErrorTypeInvalid, "spec.scheduling.schedulingPolicy", wb.MsgPolicyKindImmutable}},
		},
		{
			name:  "changing minCount against the stored Workload is allowed",
			item:  func() *wb.WorkloadItem { it := jobItem(); it.Input.SchedulingPolicy.Value = gangOf(6); return it },
			input: wb.ValidationInput{OldWorkload: storedJob},
		},
		{
			name: "changing a composite's disruption mode against the stored Workload is rejected",
			item: func() *wb.WorkloadItem {
				it := gangOfGangs()
				it.Input.CompositeDisruptionMode.Value = &wb.WorkloadCompositePodGroupDisruptionMode{All: &wb.WorkloadCompositePodGroupAllDisruptionMode{}}
				return it
			},
			input: wb.ValidationInput{OldWorkload: storedComposite},
			want:  []wantErr{{field.ErrorTypeInvalid, "spec.disruptionMode", wb.MsgDisruptionModeImmutable}},
		},

		// ---- controller policy
		{
			name: "a gang is rejected at the policy block when the controller allows only basic",
			item: jobItem,
			opts: &onlyBasic,
			want: []wantErr{{field.ErrorTypeNotSupported, "spec.scheduling.schedulingPolicy", `supported values: "basic"`}},
		},
		{
			name: "a composite gang is rejected at its policy block when the controller allows only basic",
			item: func() *wb.WorkloadItem {
				it := gangOfGangs()
				for _, c := range it.Children {
					c.Input.SchedulingPolicy.Value = basic()
				}
				return it
			},
			opts: &onlyBasic,
			want: []wantErr{{field.ErrorTypeNotSupported, "spec.schedulingPolicy", `supported values: "basic"`}},
		},
		{
			name: "the basic policy an item falls back to is rejected when the controller allows only gang",
			item: func() *wb.WorkloadItem { it := jobItem(); it.Input.SchedulingPolicy.Value = nil; return it },
			opts: &onlyGang,
			want: []wantErr{{field.ErrorTypeNotSupported, "spec.scheduling.schedulingPolicy", `supported values: "gang"`}},
		},
		{
			name: "an empty allow-list allows nothing",
			item: jobItem,
			opts: &wb.BuildOptions{AllowedDisruptionModes: everything.AllowedDisruptionModes},
			want: []wantErr{{field.ErrorTypeNotSupported, "spec.scheduling.schedulingPolicy", ""}},
		},
		{
			name: "the all disruption mode is rejected when the controller allows only single",
			item: func() *wb.WorkloadItem { it := jobItem(); it.Input.DisruptionMode.Value = allMode(); return it },
			opts: &onlySingle,
			want: []wantErr{{field.ErrorTypeNotSupported, "spec.scheduling.disruptionMode", `supported values: "single"`}},
		},
		{
			name: "all with basic is rejected with the upstream message",
			item: func() *wb.WorkloadItem {
				it := jobItem()
				it.Input.SchedulingPolicy.Value = basic()
				it.Input.DisruptionMode.Value = allMode()
				return it
			},
			want: []wantErr{{field.ErrorTypeInvalid, "spec.scheduling.disruptionMode", wb.MsgAllWithBasic}},
		},
		{
			name: "all with basic is rejected on a composite too",
			item: func() *wb.WorkloadItem {
				it := gangOfGangs()
				it.Input.CompositeSchedulingPolicy.Value = compositeBasic()
				it.Input.CompositeDisruptionMode.Value = &wb.WorkloadCompositePodGroupDisruptionMode{All: &wb.WorkloadCompositePodGroupAllDisruptionMode{}}
				return it
			},
			want: []wantErr{{field.ErrorTypeInvalid, "spec.disruptionMode", wb.MsgAllWithBasic}},
		},
		{
			name: "all with basic made by an Adjust callback is rejected at the disruption mode",
			item: func() *wb.WorkloadItem {
				it := jobItem()
				it.Input.SchedulingPolicy.Value = basic()
				it.Adjust = []wb.AdjustFunc{func(c *wb.Config) { c.DisruptionMode = wb.AllMode }}
				return it
			},
			want: []wantErr{{field.ErrorTypeInvalid, "spec.scheduling.disruptionMode", wb.MsgAllWithBasic}},
		},
		{
			name: "a gang with no minCount and no controller default needs one",
			item: func() *wb.WorkloadItem {
				it := jobItem()
				it.Input.SchedulingPolicy.Value.Gang.MinCount = nil
				return it
			},
			want: []wantErr{{field.ErrorTypeRequired, "spec.scheduling.schedulingPolicy.gang.minCount", wb.MsgMinCountUnresolved}},
		},
		{
			name: "a composite gang with no minGroupCount and no controller default needs one",
			item: func() *wb.WorkloadItem {
				it := gangOfGangs()
				it.Input.CompositeSchedulingPolicy.Value.Gang.MinGroupCount = nil
				return it
			},
			want: []wantErr{{field.ErrorTypeRequired, "spec.schedulingPolicy.gang.minGroupCount", wb.MsgMinGroupCountUnresolved}},
		},
		{
			name: "a gang with no minCount takes the controller's default",
			item: func() *wb.WorkloadItem {
				it := jobItem()
				it.Input.SchedulingPolicy.Value.Gang.MinCount = nil
				it.Defaults = &wb.Config{MinCount: int32p(4)}
				return it
			},
		},
		{
			name: "a controller default minCount of zero is rejected even without declarative validation",
			item: func() *wb.WorkloadItem {
				it := jobItem()
				it.Input.SchedulingPolicy.Value.Gang.MinCount = nil
				it.Defaults = &wb.Config{MinCount: int32p(0)}
				return it
			},
			opts: &noDV,
			want: []wantErr{{field.ErrorTypeInvalid, "spec.scheduling.schedulingPolicy.gang.minCount", wb.MsgMinimum}},
		},
		{
			name: "a PodGroup block on an item with children is forbidden",
			item: func() *wb.WorkloadItem {
				it := gangOfGangs()
				it.Input.DisruptionMode.Value = allMode()
				return it
			},
			want: []wantErr{{field.ErrorTypeForbidden, "spec.disruptionMode", wb.MsgPodGroupBlockOnComposite}},
		},

		{
			name: "a PodGroup policy and resource claims on an item with children are each forbidden",
			item: func() *wb.WorkloadItem {
				it := gangOfGangs()
				it.Input.SchedulingPolicy.Value = gangOf(2)
				it.Input.ResourceClaims = wb.At(specPath.Child("claims"), []wb.WorkloadPodGroupResourceClaim{{Name: "gpus", ResourceClaimName: claimName("a")}})
				return it
			},
			opts: &noDV,
			want: []wantErr{
				{field.ErrorTypeForbidden, "spec.schedulingPolicy", wb.MsgPodGroupBlockOnComposite},
				{field.ErrorTypeForbidden, "spec.claims", wb.MsgPodGroupBlockOnComposite},
			},
		},

		// ---- DisableDeclarativeValidation
		{
			name: "disabling declarative validation skips the structural layer",
			item: func() *wb.WorkloadItem {
				it := jobItem()
				it.Name = "Not A Label"
				it.Input.SchedulingPolicy.Value = gangOf(0)
				it.Input.SchedulingConstraints.Value = &wb.WorkloadPodGroupSchedulingConstraints{Topology: topology("bad key!")}
				return it
			},
			opts: &noDV,
		},
		{
			name: "disabling declarative validation still enforces the allow-lists",
			item: func() *wb.WorkloadItem { it := jobItem(); it.Input.SchedulingPolicy.Value = gangOf(0); return it },
			opts: &noDVOnlyBasic,
			want: []wantErr{{field.ErrorTypeNotSupported, "spec.scheduling.schedulingPolicy", `supported values: "basic"`}},
		},
		{
			name:  "disabling declarative validation skips the immutability checks",
			item:  func() *wb.WorkloadItem { it := jobItem(); it.Input.SchedulingPolicy.Value = basic(); return it },
			opts:  &noDV,
			input: wb.ValidationInput{OldRoot: jobItem()},
		},

		// ---- malformed trees
		{
			name: "a nil root is an internal error",
			item: func() *wb.WorkloadItem { return nil },
			want: []wantErr{{field.ErrorTypeInternal, "<nil>", ""}},
		},
		{
			name: "a nil child is an internal error at its place in the children list",
			item: func() *wb.WorkloadItem {
				it := gangOfGangs()
				it.Children[1] = nil
				return it
			},
			want: []wantErr{{field.ErrorTypeInternal, "spec.podGroupTemplates[1]", ""}},
		},
	}

	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			opts := everything
			if tc.opts != nil {
				opts = *tc.opts
			}
			got := wb.NewBuilder(tc.item(), opts).Validate(context.Background(), tc.input)

			want := tc.want
			if want == nil {
				want = []wantErr{}
			}
			assert.Equal(t, want, summarize(got, tc.want), "errors: %v", got)
		})
	}
}

// The allow-list error is the one a controller's users see most; pin all of
// it, bad value included.
func TestValidateRejectsGangWithTheExactNotSupportedError(t *testing.T) {
	opts := everything
	opts.AllowedPolicies = []wb.PolicyKind{wb.BasicPolicy}

	errs := wb.NewBuilder(jobItem(), opts).Validate(context.Background(), wb.ValidationInput{})

	require.Len(t, errs, 1)
	want := field.NotSupported(jobPath.Child("schedulingPolicy"), "gang", []wb.PolicyKind{wb.BasicPolicy})
	assert.Equal(t, want.Error(), errs[0].Error())
	assert.Equal(t, `spec.scheduling.schedulingPolicy: Unsupported value: "gang": supported values: "basic"`, errs[0].Error())
}

func TestValidateRefusesABuilderMadeFromAnExistingWorkload(t *testing.T) {
	w := &v1alpha1.Workload{ObjectMeta: metav1.ObjectMeta{Name: "w"}}
	b, err := wb.NewBuilderFromExistingWorkload(w, wb.BuildOptions{})
	require.NoError(t, err)

	errs := b.Validate(context.Background(), wb.ValidationInput{})

	require.Len(t, errs, 1)
	assert.Equal(t, field.ErrorTypeInternal, errs[0].Type)
}

func TestValidateRunsAdjustOncePerItem(t *testing.T) {
	calls := 0
	it := jobItem()
	it.Adjust = []wb.AdjustFunc{func(*wb.Config) { calls++ }}

	errs := wb.NewBuilder(it, everything).Validate(context.Background(), wb.ValidationInput{})

	require.Empty(t, errs)
	assert.Equal(t, 1, calls)
}

func TestMsgMaxDepthNamesTheLimit(t *testing.T) {
	assert.Equal(t, "maximum template hierarchy depth is 4", wb.MsgMaxDepth)
	assert.Equal(t, 4, v1alpha1.MaxTreeDepth, "MsgMaxDepth spells the limit out; update it with MaxTreeDepth")
}
