package controller

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/phalanx-sched/phalanx/apis/scheduling/v1alpha1"
	wb "github.com/phalanx-sched/phalanx/pkg/workloadbuilder"
)

// Field paths of the Job integration's inputs, so every error names the
// annotation or field the user has to edit.
var (
	annotationsPath   = field.NewPath("metadata", "annotations")
	gangPath          = annotationsPath.Key(v1alpha1.GangAnnotation)
	minCountPath      = annotationsPath.Key(MinCountAnnotation)
	topologyKeyPath   = annotationsPath.Key(TopologyKeyAnnotation)
	preferredPath     = annotationsPath.Key(PreferredTopologyAnnotation)
	parallelismPath   = field.NewPath("spec", "parallelism")
	completionsPath   = field.NewPath("spec", "completions")
	podSpecPath       = field.NewPath("spec", "template", "spec")
	templateLabelPath = field.NewPath("spec", "template", "metadata", "labels").Key(v1alpha1.PodGroupLabel)
)

// gangRequested reads the opt-in annotation. Anything but "true" or "false"
// is an error rather than a silent no, since the user clearly meant
// something.
func gangRequested(job *batchv1.Job) (bool, *field.Error) {
	v, ok := job.Annotations[v1alpha1.GangAnnotation]
	if !ok {
		return false, nil
	}
	switch v {
	case "true":
		return true, nil
	case "false":
		return false, nil
	}
	return false, field.NotSupported(gangPath, v, []string{"true", "false"})
}

// jobGang is what a gang Job asks for.
type jobGang struct {
	// item is the Job's one-template tree for workloadbuilder.
	item *wb.WorkloadItem
	// errs are problems found while reading the annotations, which the
	// builder cannot see (a count that is not a number, say).
	errs field.ErrorList
	// podsAtOnce is how many pods the Job runs at the same time,
	// min(parallelism, completions); 0 for a Job scaled to zero.
	podsAtOnce int32
	// explicitMinCount is set when the min-count annotation is present.
	explicitMinCount bool
}

// ready reports whether the gang's size is known. A Job scaled to zero
// without a min-count has none, which is not an error: its Workload is
// created, or its minCount updated, once it scales up.
func (g *jobGang) ready() bool {
	return g.explicitMinCount || g.podsAtOnce > 0
}

// jobPodsStillToRun caps a gang size by what the Job has left to do. The
// gang is the set of pods that must run together now: pods that succeeded
// have left it (the scheduler no longer counts finished pods), so keeping
// the original size would hold the last pods, or a retry of a failed one,
// waiting for members that will never be created. With completions set,
// completions - succeeded pods remain; without (a work queue), the Job
// starts no new pod once one succeeded and the others finish on their own,
// so parallelism - succeeded is what still runs. Never below 1: a group of
// 0 would let any pod through alone, and a finished Job has no pods left to
// hold anyway.
func jobPodsStillToRun(job *batchv1.Job, size int32) int32 {
	total := int32(1)
	if p := job.Spec.Parallelism; p != nil {
		total = *p
	}
	if c := job.Spec.Completions; c != nil {
		total = *c
	}
	left := total - job.Status.Succeeded
	if left < size {
		size = left
	}
	return max(size, 1)
}

// jobPodsAtOnce is the default gang size: parallelism (1 when unset), or
// completions when that is smaller, because the Job controller never runs
// more pods than it still needs and a larger gang would wait forever.
func jobPodsAtOnce(job *batchv1.Job) (int32, *field.Path) {
	n, path := int32(1), parallelismPath
	if p := job.Spec.Parallelism; p != nil {
		n = *p
	}
	if c := job.Spec.Completions; c != nil && *c < n {
		n, path = *c, completionsPath
	}
	return n, path
}

// readJobGang turns a gang Job's annotations and spec into building
// blocks. Each block records where it came from, so workloadbuilder's
// errors name annotations, e.g.
//
//	metadata.annotations[scheduling.phalanx.dev/min-count]: Invalid value: 0: must be greater than or equal to 1
func readJobGang(job *batchv1.Job) jobGang {
	podsAtOnce, countPath := jobPodsAtOnce(job)
	g := jobGang{podsAtOnce: podsAtOnce}

	// The policy comes from the gang annotation; its count from min-count
	// if set, else from the Job spec field that decided podsAtOnce.
	gang := &wb.WorkloadPodGroupGangSchedulingPolicy{}
	policy := wb.At(gangPath, &wb.WorkloadPodGroupSchedulingPolicy{Gang: gang}).WithFieldPath("gang.minCount", countPath)
	if raw, ok := job.Annotations[MinCountAnnotation]; ok {
		g.explicitMinCount = true
		policy = policy.WithFieldPath("gang.minCount", minCountPath)
		n, err := strconv.ParseInt(strings.TrimSpace(raw), 10, 32)
		switch {
		case err != nil:
			g.errs = append(g.errs, field.Invalid(minCountPath, raw, `must be a positive integer, such as "4"`))
		default:
			v := int32(n)
			gang.MinCount = &v
			// The builder rejects v < 1 at this path; a count above what the
			// Job ever runs is this controller's rule. A Job scaled to zero
			// is paused, not shrunk, so it is not held against the count.
			if v > podsAtOnce && podsAtOnce > 0 {
				g.errs = append(g.errs, field.Invalid(minCountPath, v, fmt.Sprintf(
					"must not exceed the %d pods the Job runs at once (%s): a gang of %d would never be complete; lower it to at most %d or raise %s",
					podsAtOnce, countPath, v, podsAtOnce, countPath)))
			}
		}
	}

	// The constraints block sits at the annotation even when it is absent,
	// so that removing the annotation from a running gang is reported there.
	in := wb.Input{
		SchedulingPolicy:      policy,
		SchedulingConstraints: wb.Block[*wb.WorkloadPodGroupSchedulingConstraints]{Path: topologyKeyPath},
	}
	if key, ok := job.Annotations[TopologyKeyAnnotation]; ok {
		in.SchedulingConstraints = wb.At(topologyKeyPath, &wb.WorkloadPodGroupSchedulingConstraints{
			Topology: []v1alpha1.TopologyConstraint{{Key: strings.TrimSpace(key)}},
		}).WithFieldPath("topology[0].key", topologyKeyPath)
	}
	if raw, ok := job.Annotations[PreferredTopologyAnnotation]; ok {
		c := in.SchedulingConstraints.Value
		if c == nil {
			c = &wb.WorkloadPodGroupSchedulingConstraints{}
			in.SchedulingConstraints.Value = c
		}
		// Every error about a level names the annotation it came from.
		in.SchedulingConstraints = in.SchedulingConstraints.WithFieldPath("preferredTopology", preferredPath)
		for i, k := range strings.Split(raw, ",") {
			c.PreferredTopology = append(c.PreferredTopology, v1alpha1.TopologyConstraint{Key: strings.TrimSpace(k)})
			in.SchedulingConstraints = in.SchedulingConstraints.
				WithFieldPath(fmt.Sprintf("preferredTopology[%d]", i), preferredPath).
				WithFieldPath(fmt.Sprintf("preferredTopology[%d].key", i), preferredPath)
		}
	}
	// The group's priority must match its pods' (the scheduler refuses a
	// group whose pods disagree with it), so it is read from the pod
	// template, where the pods get theirs.
	pod := job.Spec.Template.Spec
	if pod.PriorityClassName != "" || pod.PreemptionPolicy != nil {
		p := &wb.WorkloadPriority{PriorityClassName: pod.PriorityClassName}
		if pod.PreemptionPolicy != nil {
			pp := v1alpha1.PreemptionPolicy(*pod.PreemptionPolicy)
			p.PreemptionPolicy = &pp
		}
		in.Priority = wb.At(podSpecPath, p)
	}

	want := JobPodGroupName(job.Name)
	if v, ok := job.Spec.Template.Labels[v1alpha1.PodGroupLabel]; ok && v != want {
		g.errs = append(g.errs, field.Invalid(templateLabelPath, v, fmt.Sprintf(
			"a gang Job's pods join the PodGroup %q that Phalanx creates for it: set the label to %q or remove it", want, want)))
	}

	defaults := &wb.Config{Policy: wb.GangPolicy}
	if podsAtOnce > 0 {
		defaults.MinCount = &podsAtOnce
	}
	g.item = &wb.WorkloadItem{Name: v1alpha1.JobTemplateName, Path: gangPath, Defaults: defaults, Input: in}
	return g
}

// jobBuildOptions is the Job integration's allow-list: annotations can only
// ask for a gang, and offer no disruption mode.
func jobBuildOptions(job *batchv1.Job) wb.BuildOptions {
	return wb.BuildOptions{
		Name:                   job.Name,
		Namespace:              job.Namespace,
		Owner:                  metav1.NewControllerRef(job, jobKind),
		AllowedPolicies:        []wb.PolicyKind{wb.GangPolicy},
		AllowedDisruptionModes: []wb.DisruptionModeKind{wb.SingleMode},
	}
}

// desiredJobWorkload validates a gang Job and compiles its Workload. old is
// the stored Workload, if any: the builder then also rejects changes to
// what a group cannot change (the topology key), while minCount may move.
// The returned Workload is the builder's cached object; copy it before use.
func desiredJobWorkload(ctx context.Context, job *batchv1.Job, g jobGang, old *v1alpha1.Workload) (*v1alpha1.Workload, field.ErrorList) {
	b := wb.NewBuilder(g.item, jobBuildOptions(job))
	errs := append(field.ErrorList{}, g.errs...)
	errs = append(errs, b.Validate(ctx, wb.ValidationInput{OldWorkload: old})...)
	if len(errs) > 0 {
		return nil, errs
	}
	w, err := b.BuildWorkload()
	if err != nil {
		return nil, field.ErrorList{field.InternalError(gangPath, err)}
	}
	return w, nil
}

// gangMinCount is the minCount of the Job template of a Workload, if it is
// a gang.
func gangMinCount(w *v1alpha1.Workload) (int32, bool) {
	for i := range w.Spec.PodGroupTemplates {
		t := &w.Spec.PodGroupTemplates[i]
		if t.Name == v1alpha1.JobTemplateName && t.SchedulingPolicy.Gang != nil {
			return t.SchedulingPolicy.Gang.MinCount, true
		}
	}
	return 0, false
}

// GangJobWorkload is the Workload phalanx-controller creates for job when
// it first sees it, so that kubectl phalanx fit can ask about a gang Job
// before it exists. ok is false when job is not a gang Job; an error says
// what the controller would refuse.
func GangJobWorkload(ctx context.Context, job *batchv1.Job) (w *v1alpha1.Workload, ok bool, err error) {
	gang, ferr := gangRequested(job)
	if ferr != nil {
		return nil, false, field.ErrorList{ferr}.ToAggregate()
	}
	if !gang {
		return nil, false, nil
	}
	g := readJobGang(job)
	if !g.ready() {
		return nil, true, fmt.Errorf("job %s is scaled to zero: its gang has no size until it runs pods", job.Name)
	}
	desired, errs := desiredJobWorkload(ctx, job, g, nil)
	if len(errs) > 0 {
		return nil, true, errs.ToAggregate()
	}
	return withJobMinCount(job, desired), true, nil
}
