package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/spf13/cobra"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/cli-runtime/pkg/resource"
	"k8s.io/client-go/dynamic"

	v1alpha1 "github.com/phalanx-sched/phalanx/apis/scheduling/v1alpha1"
	"github.com/phalanx-sched/phalanx/pkg/controller"
	"github.com/phalanx-sched/phalanx/pkg/debugapi"
	wb "github.com/phalanx-sched/phalanx/pkg/workloadbuilder"
)

type fitOptions struct {
	files  resource.FilenameOptions
	dryRun bool
}

func newFitCommand(o *Options) *cobra.Command {
	f := &fitOptions{}
	out := newOutputFlags()
	cmd := &cobra.Command{
		Use:   "fit -f FILENAME",
		Short: "Say whether a gang would fit now, where, and with which victims, without creating anything",
		Long: `fit reads groups and their pods from files, as you would create them, and asks
the scheduler whether they would fit now: its own planner answers against
its current view (its cache, and the room it holds for other pending pods),
as the first scheduling attempt of the group would. When they do not fit,
its victim search says which pods preemption would evict, or why it may not.

The files may hold PodGroups and CompositePodGroups (of any API Phalanx
reads), Phalanx Workloads (their groups are made from the templates, as
phalanx-controller does), Pods, and Jobs, Deployments, StatefulSets and
ReplicaSets, whose templates stand for their pods (parallelism or replicas
of them; a gang Job also gets the PodGroup phalanx-controller would give
it), and PriorityClasses, which the groups and pods may name before they
exist. They are first sent to the API server as a dry run, so admission
applies its defaults (priority from priorityClassName, tolerations, limit
ranges) and nothing is created. A PriorityClass the cluster already has is
taken as the cluster has it.

Pods may claim DRA devices: the files may hold the ResourceClaims and
ResourceClaimTemplates they name (else the cluster's are read), and the
answer counts the devices each pod's claims would take, as the scheduler
does once the resourceclaim controller made them.`,
		Example: `  kubectl phalanx fit -f manifests/samples/gang-podgroup.yaml
  kubectl phalanx fit -f job.yaml -n team-a -o yaml`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if len(f.files.Filenames) == 0 {
				return fmt.Errorf("name the manifests: %s -f FILENAME", cmd.CommandPath())
			}
			p, err := out.printer()
			if err != nil {
				return err
			}
			req, warnings, err := o.fitRequest(cmd.Context(), f)
			if err != nil {
				return err
			}
			for _, w := range warnings {
				fmt.Fprintln(o.ErrOut, "Warning:", w)
			}
			s, err := o.scheduler(cmd.Context())
			if err != nil {
				return err
			}
			var answer debugapi.FitAnswer
			body, err := s.do(cmd.Context(), "POST", debugapi.FitPath, req, &answer)
			if err != nil {
				return err
			}
			if p != nil {
				return printRaw(p, body, o.Out)
			}
			printFit(o.Out, &answer)
			return nil
		},
	}
	cmd.Flags().StringSliceVarP(&f.files.Filenames, "filename", "f", nil, "Files, directories or URLs of the manifests, or - for standard input")
	cmd.Flags().BoolVarP(&f.files.Recursive, "recursive", "R", false, "Read directories recursively")
	cmd.Flags().BoolVar(&f.dryRun, "server-dry-run", true, "Pass the objects through the API server's admission as a dry run first; false sends them as written")
	out.addFlags(cmd)
	return cmd
}

// fitRequest reads the manifests, expands templates into pods and passes
// everything through admission as a dry run.
func (o *Options) fitRequest(ctx context.Context, f *fitOptions) (*debugapi.FitRequest, []string, error) {
	ns, err := o.namespace()
	if err != nil {
		return nil, nil, err
	}
	infos, err := resource.NewBuilder(o.Config).Unstructured().Local().FilenameParam(false, &f.files).Flatten().Do().Infos()
	if err != nil {
		return nil, nil, err
	}
	var objs []*unstructured.Unstructured
	for _, info := range infos {
		u, ok := info.Object.(*unstructured.Unstructured)
		if !ok {
			return nil, nil, fmt.Errorf("%s: not an object", info.Source)
		}
		if u.GetNamespace() == "" {
			u.SetNamespace(ns)
		}
		expanded, err := expand(ctx, u)
		if err != nil {
			return nil, nil, fmt.Errorf("%s: %w", info.Source, err)
		}
		objs = append(objs, expanded...)
	}
	var warnings []string
	if f.dryRun {
		if objs, warnings, err = o.admit(ctx, objs); err != nil {
			return nil, nil, err
		}
	}
	req := &debugapi.FitRequest{Namespace: ns}
	for _, u := range objs {
		data, err := u.MarshalJSON()
		if err != nil {
			return nil, nil, err
		}
		req.Objects = append(req.Objects, data)
	}
	return req, warnings, nil
}

var (
	podGVK          = corev1.SchemeGroupVersion.WithKind("Pod")
	priorityClassGK = schema.GroupKind{Group: "scheduling.k8s.io", Kind: "PriorityClass"}
	// deviceKinds are the DRA objects a fit file may bring beside its
	// pods: what the plan reads to count the devices they claim.
	deviceKinds = map[schema.GroupKind]bool{
		{Group: "resource.k8s.io", Kind: "ResourceClaim"}:         true,
		{Group: "resource.k8s.io", Kind: "ResourceClaimTemplate"}: true,
	}
)

// expand turns an object of the manifests into what the cluster would
// hold once controllers acted on it: the groups of a Workload, the pods of
// a template.
func expand(ctx context.Context, u *unstructured.Unstructured) ([]*unstructured.Unstructured, error) {
	gvk := u.GroupVersionKind()
	switch gvk.GroupKind().String() {
	case "PodGroup.scheduling.phalanx.dev", "CompositePodGroup.scheduling.phalanx.dev",
		"PodGroup.scheduling.k8s.io", "CompositePodGroup.scheduling.k8s.io", "PodGroup.scheduling.x-k8s.io", "Pod",
		"PriorityClass.scheduling.k8s.io", "ResourceClaim.resource.k8s.io", "ResourceClaimTemplate.resource.k8s.io":
		return []*unstructured.Unstructured{u}, nil
	case "Workload.scheduling.phalanx.dev":
		w := &v1alpha1.Workload{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, w); err != nil {
			return nil, err
		}
		return workloadGroups(w)
	case "Job.batch":
		job := &batchv1.Job{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, job); err != nil {
			return nil, err
		}
		return jobObjects(ctx, job)
	case "Deployment.apps", "StatefulSet.apps", "ReplicaSet.apps":
		var replicas *int32
		var tmpl corev1.PodTemplateSpec
		switch gvk.Kind {
		case "Deployment":
			d := &appsv1.Deployment{}
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, d); err != nil {
				return nil, err
			}
			replicas, tmpl = d.Spec.Replicas, d.Spec.Template
		case "StatefulSet":
			s := &appsv1.StatefulSet{}
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, s); err != nil {
				return nil, err
			}
			replicas, tmpl = s.Spec.Replicas, s.Spec.Template
		default:
			r := &appsv1.ReplicaSet{}
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, r); err != nil {
				return nil, err
			}
			replicas, tmpl = r.Spec.Replicas, r.Spec.Template
		}
		n := int32(1)
		if replicas != nil {
			n = *replicas
		}
		return podsOf(u.GetNamespace(), u.GetName(), tmpl, int(n), nil)
	}
	return nil, fmt.Errorf("fit reads PodGroups, CompositePodGroups, Workloads, Pods, Jobs, Deployments, StatefulSets, ReplicaSets, PriorityClasses, ResourceClaims and ResourceClaimTemplates, not %s", gvk.Kind)
}

func toUnstructured(obj runtime.Object, gvk schema.GroupVersionKind) (*unstructured.Unstructured, error) {
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return nil, err
	}
	u := &unstructured.Unstructured{Object: m}
	u.SetGroupVersionKind(gvk)
	return u, nil
}

// workloadGroups are the groups phalanx-controller makes of a Workload.
func workloadGroups(w *v1alpha1.Workload) ([]*unstructured.Unstructured, error) {
	b, err := wb.NewBuilderFromExistingWorkload(w, wb.BuildOptions{Name: w.Name, Namespace: w.Namespace})
	if err != nil {
		return nil, err
	}
	pgs, cpgs, err := b.Groups()
	if err != nil {
		return nil, err
	}
	var out []*unstructured.Unstructured
	for _, g := range cpgs {
		u, err := toUnstructured(g, v1alpha1.SchemeGroupVersion.WithKind("CompositePodGroup"))
		if err != nil {
			return nil, err
		}
		out = append(out, u)
	}
	for _, g := range pgs {
		u, err := toUnstructured(g, v1alpha1.SchemeGroupVersion.WithKind("PodGroup"))
		if err != nil {
			return nil, err
		}
		out = append(out, u)
	}
	return out, nil
}

// jobObjects are the pods a Job starts at once and, for a gang Job, the
// groups phalanx-controller gives it, with the pods labelled into them
// and ungated as the controller does.
func jobObjects(ctx context.Context, job *batchv1.Job) ([]*unstructured.Unstructured, error) {
	n := int32(1)
	if p := job.Spec.Parallelism; p != nil {
		n = *p
	}
	if c := job.Spec.Completions; c != nil && *c < n {
		n = *c
	}
	w, gang, err := controller.GangJobWorkload(ctx, job)
	if err != nil {
		return nil, err
	}
	if !gang {
		return podsOf(job.Namespace, job.Name, job.Spec.Template, int(n), nil)
	}
	w.Name, w.Namespace = job.Name, job.Namespace
	objs, err := workloadGroups(w)
	if err != nil {
		return nil, err
	}
	pods, err := podsOf(job.Namespace, job.Name, job.Spec.Template, int(n), func(p *corev1.Pod) {
		if p.Labels == nil {
			p.Labels = map[string]string{}
		}
		p.Labels[v1alpha1.PodGroupLabel] = controller.JobPodGroupName(job.Name)
		var gates []corev1.PodSchedulingGate
		for _, g := range p.Spec.SchedulingGates {
			if g.Name != controller.GangSchedulingGate {
				gates = append(gates, g)
			}
		}
		p.Spec.SchedulingGates = gates
	})
	return append(objs, pods...), err
}

// podsOf makes n pods of a template, named <owner>-<i>.
func podsOf(ns, owner string, tmpl corev1.PodTemplateSpec, n int, mutate func(*corev1.Pod)) ([]*unstructured.Unstructured, error) {
	var out []*unstructured.Unstructured
	for i := range n {
		p := &corev1.Pod{ObjectMeta: *tmpl.ObjectMeta.DeepCopy(), Spec: *tmpl.Spec.DeepCopy()}
		p.Name, p.Namespace, p.GenerateName = fmt.Sprintf("%s-%d", owner, i), ns, ""
		if mutate != nil {
			mutate(p)
		}
		u, err := toUnstructured(p, podGVK)
		if err != nil {
			return nil, err
		}
		out = append(out, u)
	}
	return out, nil
}

// admit sends every object through the API server's admission as a dry
// run and returns what it would store. Pods of one template are admitted
// once: admission does not depend on their names.
func (o *Options) admit(ctx context.Context, objs []*unstructured.Unstructured) ([]*unstructured.Unstructured, []string, error) {
	cfg, err := o.Config.ToRESTConfig()
	if err != nil {
		return nil, nil, err
	}
	mapper, err := o.Config.ToRESTMapper()
	if err != nil {
		return nil, nil, err
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, nil, err
	}
	var warnings []string
	resourceFor := func(u *unstructured.Unstructured) (dynamic.ResourceInterface, error) {
		gvk := u.GroupVersionKind()
		mapping, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if err != nil {
			return nil, fmt.Errorf("%s %s: %w", gvk.Kind, u.GetName(), err)
		}
		if mapping.Scope.Name() == meta.RESTScopeNameNamespace {
			return dyn.Resource(mapping.Resource).Namespace(u.GetNamespace()), nil
		}
		return dyn.Resource(mapping.Resource), nil
	}
	// PriorityClasses first, wherever the files put them: the pods that
	// name a new one must not go through the Priority admission plugin,
	// which refuses a class it cannot find.
	newClasses := map[string]bool{}
	out := make([]*unstructured.Unstructured, 0, len(objs))
	for _, u := range objs {
		if u.GroupVersionKind().GroupKind() != priorityClassGK {
			continue
		}
		ri, err := resourceFor(u)
		if err != nil {
			return nil, nil, err
		}
		got, err := ri.Create(ctx, u, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		switch {
		case apierrors.IsAlreadyExists(err):
			// The cluster's applies, as it would once the files were
			// applied; say so when it differs from the file's.
			if have, gerr := ri.Get(ctx, u.GetName(), metav1.GetOptions{}); gerr == nil {
				hv, _, _ := unstructured.NestedInt64(have.Object, "value")
				fv, _, _ := unstructured.NestedInt64(u.Object, "value")
				if hv != fv {
					warnings = append(warnings, fmt.Sprintf("PriorityClass %s already exists with value %d, not the file's %d: the cluster's applies", u.GetName(), hv, fv))
				}
			}
			continue
		case apierrors.IsForbidden(err):
			warnings = append(warnings, fmt.Sprintf("the dry run of PriorityClass %s was refused (%v): sending it as written", u.GetName(), err))
			got = u
		case err != nil:
			return nil, nil, fmt.Errorf("PriorityClass %s: %w", u.GetName(), err)
		}
		newClasses[u.GetName()] = true
		out = append(out, got)
	}
	admitted := map[string]*unstructured.Unstructured{}
	for _, u := range objs {
		gvk := u.GroupVersionKind()
		if gvk.GroupKind() == priorityClassGK {
			continue
		}
		ri, err := resourceFor(u)
		if err != nil {
			return nil, nil, err
		}
		key := ""
		var newClass string
		asWritten := u
		if gvk == podGVK {
			key = templateKey(u)
			if a := admitted[key]; a != nil {
				c := a.DeepCopy()
				c.SetName(u.GetName())
				out = append(out, c)
				continue
			}
			if name, _, _ := unstructured.NestedString(u.Object, "spec", "priorityClassName"); newClasses[name] {
				// Admitted without it; the scheduler resolves it from
				// the request's class, as admission would once created.
				newClass = name
				u = u.DeepCopy()
				unstructured.RemoveNestedField(u.Object, "spec", "priorityClassName")
				unstructured.RemoveNestedField(u.Object, "spec", "priority")
				unstructured.RemoveNestedField(u.Object, "spec", "preemptionPolicy")
			}
		}
		got, err := ri.Create(ctx, u, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if err == nil && newClass != "" {
			got = got.DeepCopy()
			unstructured.RemoveNestedField(got.Object, "spec", "priority")
			unstructured.RemoveNestedField(got.Object, "spec", "preemptionPolicy")
			if err := unstructured.SetNestedField(got.Object, newClass, "spec", "priorityClassName"); err != nil {
				return nil, nil, err
			}
		}
		switch {
		case apierrors.IsAlreadyExists(err) && deviceKinds[gvk.GroupKind()]:
			// Claims and templates are not groups: the scheduler reads
			// the cluster's, as the pods would use them once created.
			warnings = append(warnings, fmt.Sprintf("%s %s/%s already exists: the cluster's is used", gvk.Kind, u.GetNamespace(), u.GetName()))
			continue
		case apierrors.IsAlreadyExists(err) && gvk != podGVK:
			return nil, nil, fmt.Errorf("%s %s/%s already exists: fit answers for groups that do not exist yet (kubectl phalanx explain tells about this one)", gvk.Kind, u.GetNamespace(), u.GetName())
		case apierrors.IsForbidden(err):
			warnings = append(warnings, fmt.Sprintf("the dry run of %s %s was refused (%v): sending it as written, without admission's defaults", gvk.Kind, u.GetName(), err))
			got = asWritten
		case err != nil:
			return nil, nil, fmt.Errorf("%s %s/%s: %w", gvk.Kind, u.GetNamespace(), u.GetName(), err)
		}
		if key != "" {
			admitted[key] = got
		}
		out = append(out, got)
	}
	return out, warnings, nil
}

// templateKey identifies pods that differ only in their names.
func templateKey(u *unstructured.Unstructured) string {
	c := u.DeepCopy()
	c.SetName("")
	data, _ := json.Marshal(c.Object)
	return string(data)
}

func printFit(w io.Writer, a *debugapi.FitAnswer) {
	r := a.Root
	fmt.Fprintf(w, "Would %s fit? %s\n", groupName(r.Kind, r.APIGroup, r.Namespace, r.Name), verdictWords(a.Verdict))
	fmt.Fprintf(w, "  %s\n", a.Message)
	fmt.Fprintf(w, "  (%s)\n", answeredBy(a.Scheduler, a.Profile, a.Time, a.Nodes))
	if len(a.Groups) > 0 {
		fmt.Fprintln(w)
		var rows [][]string
		for _, g := range a.Groups {
			name := groupName(g.Kind, g.APIGroup, g.Namespace, g.Name)
			if g.Parent != "" {
				name = "└ " + name
			}
			topo := g.TopologyKey
			if topo == "" {
				topo = "-"
			}
			rows = append(rows, []string{"  " + name, g.Policy, fmt.Sprint(g.Min), fmt.Sprint(g.Present), topo})
		}
		table(w, []string{"  GROUP", "POLICY", "MIN", "PODS", "TOPOLOGY"}, rows)
	}
	printAssessment(w, &a.Assessment, "  ", false)
	place := a.Assessment.Placement
	if a.Assessment.Preemption != nil && a.Assessment.Preemption.Possible {
		place = a.Assessment.Preemption.Placement
	}
	if place != nil && len(place.Pods) > 0 {
		fmt.Fprintln(w, "\n  Where:")
		pods := make([]string, 0, len(place.Pods))
		for p := range place.Pods {
			pods = append(pods, p)
		}
		sort.Strings(pods)
		var rows [][]string
		for _, p := range pods {
			_, name, _ := strings.Cut(p, "/")
			rows = append(rows, []string{"  " + name, place.Pods[p]})
		}
		table(w, []string{"  POD", "NODE"}, rows)
	}
}

func verdictWords(v string) string {
	switch v {
	case debugapi.VerdictFits:
		return "Yes."
	case debugapi.VerdictFitsWithPreemption:
		return "Yes, with preemption."
	case debugapi.VerdictDoesNotFit:
		return "No."
	default:
		return "It would not be tried."
	}
}
