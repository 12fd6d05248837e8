package workloadbuilder

import (
	"context"
	"errors"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/phalanx-sched/phalanx/apis/scheduling/v1alpha1"
)

// Messages of the errors Validate reports, exported so controllers and tests
// can match them. Where a rule also exists in the CRD schema the text is the
// same, so a user sees one message whichever layer caught the mistake.
// Generic errors (required, too many, duplicate, DNS name and label key
// format) use apimachinery's standard wording.
const (
	// MsgAllWithBasic rejects the all disruption mode on a basic group: a
	// best-effort group has no "whole" to disrupt together.
	MsgAllWithBasic = "the disruptionMode `all` is not supported with the Basic scheduling policy"
	// MsgMaxDepth rejects a composite template at the last level, whose
	// children would sit below v1alpha1.MaxTreeDepth.
	MsgMaxDepth = "maximum template hierarchy depth is 4"
	// MsgAtLeastOneChild rejects a composite template with no children.
	MsgAtLeastOneChild = "must have at least one child PodGroupTemplate or CompositePodGroupTemplate"
	// MsgPriorityMismatch rejects a template whose priority or
	// priorityClassName differs from the root's.
	MsgPriorityMismatch = "all priority and priorityClassName values must be identical, detected multiple values"

	// MsgPolicyUnion, MsgDisruptionModeUnion and MsgClaimSourceUnion reject a
	// union with no member or more than one.
	MsgPolicyUnion         = "must specify exactly one of: `basic`, `gang`"
	MsgDisruptionModeUnion = "must specify exactly one of: `single`, `all`"
	MsgClaimSourceUnion    = "must specify exactly one of: `resourceClaimName`, `resourceClaimTemplateName`"
	// MsgMinimum rejects a minCount or minGroupCount below 1.
	MsgMinimum = "must be greater than or equal to 1"
	// MsgPreferredIsRequired matches the CRD rule on preferredTopology.
	MsgPreferredIsRequired = "a preferred topology level cannot be the required key: list only levels narrower than it"

	// Immutability on update, worded as in the CRD's transition rules.
	MsgPolicyKindImmutable     = "the scheduling policy kind (basic or gang) is immutable"
	MsgMinGroupCountImmutable  = "minGroupCount is immutable"
	MsgConstraintsImmutable    = "schedulingConstraints is immutable"
	MsgDisruptionModeImmutable = "disruptionMode is immutable"

	// MsgMinCountUnresolved and MsgMinGroupCountUnresolved report a gang
	// whose count neither the user nor the controller supplied.
	MsgMinCountUnresolved      = "gang scheduling needs minCount: set it here, or the controller must supply a default"
	MsgMinGroupCountUnresolved = "gang scheduling needs minGroupCount: set it here, or the controller must supply a default"
	// MsgPodGroupBlockOnComposite rejects a PodGroup building block on an
	// item that compiles to a composite template (it has child templates).
	MsgPodGroupBlockOnComposite = "this item has child templates, so it compiles to a compositePodGroupTemplate, which takes the WorkloadCompositePodGroup building blocks and holds no resource claims"
)

// ValidationInput carries what Validate needs beyond the Builder. Its zero
// value validates a create.
type ValidationInput struct {
	// OldRoot is the item tree built from the stored (pre-update) controller
	// object. Items are matched to it by name anywhere in the tree, and
	// their user blocks (Input) are compared; Defaults, Adjust and paths of
	// the old tree are ignored. A block that is added, removed or changed
	// counts as a change.
	OldRoot *WorkloadItem
	// OldWorkload is the stored Workload, for a controller that keeps the
	// compiled object rather than the old controller object. Templates are
	// matched by name and compared with the new resolved configuration.
	// Consulted only when OldRoot is nil.
	OldWorkload *v1alpha1.Workload
}

// Validate checks the tree in two layers and returns every error found, each
// at the field path where the user wrote the offending value.
//
// The structural layer (skipped with BuildOptions.DisableDeclarativeValidation)
// checks the user's blocks as written: required fields, ranges, unions,
// formats, list sizes, unique names, tree depth, a shared priority and, given
// a ValidationInput, immutability on update.
//
// The controller-policy layer always runs, on the resolved configuration
// (Defaults, Input and Adjust together): the allow-lists, the all-with-basic
// rule, a gang count the controller failed to default, and blocks that do
// not fit the item's kind.
//
// ctx is accepted for parity with upstream's declarative validators;
// validation here is pure and quick, so it does not consult it.
func (b *Builder) Validate(ctx context.Context, in ValidationInput) field.ErrorList {
	if b.existing {
		return field.ErrorList{field.InternalError(nil, errors.New(
			"a Builder made by NewBuilderFromExistingWorkload has no WorkloadItem tree to validate; the stored Workload was validated by the API server"))}
	}
	tree, err := resolveTree(b.root)
	if err != nil {
		var te *treeError
		if errors.As(err, &te) {
			return field.ErrorList{field.InternalError(te.path, errors.New(te.msg))}
		}
		return field.ErrorList{field.InternalError(nil, err)}
	}

	var errs field.ErrorList
	if !b.opts.DisableDeclarativeValidation {
		errs = append(errs, validateStructure(tree, oldStateFor(in))...)
	}
	errs = append(errs, b.validatePolicy(tree)...)
	return errs
}
