package integration

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	v1alpha1 "github.com/phalanx-sched/phalanx/apis/scheduling/v1alpha1"
	"github.com/phalanx-sched/phalanx/tools/sandbox"
)

// TestSamplesApply applies every manifest in manifests/samples, as a user
// following the README would.
func TestSamplesApply(t *testing.T) {
	// JobWorkloads: the API server accepts a Job's spec.scheduling, as a
	// cluster that turns on upstream's WorkloadWithJob gate does.
	c := startCluster(t, sandbox.Options{JobWorkloads: true})
	files, err := filepath.Glob("../../manifests/samples/*.yaml")
	require.NoError(t, err)
	require.NotEmpty(t, files, "samples exist")
	for _, f := range files {
		t.Run(filepath.Base(f)+" is accepted by the API server", func(t *testing.T) {
			data, err := os.ReadFile(f)
			require.NoError(t, err)
			// PriorityClasses are cluster-scoped: tolerate a second apply.
			err = applyYAML(context.Background(), c, namespace(t, c), data)
			if err != nil && !contains(err.Error(), "priorityclasses") {
				require.NoError(t, err)
			}
		})
	}
}

func gangPG(name string, minCount int32) *v1alpha1.PodGroup {
	return &v1alpha1.PodGroup{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: v1alpha1.PodGroupSpec{
			SchedulingPolicy: v1alpha1.PodGroupSchedulingPolicy{Gang: &v1alpha1.GangSchedulingPolicy{MinCount: minCount}},
		},
	}
}

func topo(keys ...string) []v1alpha1.TopologyConstraint {
	var out []v1alpha1.TopologyConstraint
	for _, k := range keys {
		out = append(out, v1alpha1.TopologyConstraint{Key: k})
	}
	return out
}

func pgTemplate(name string) v1alpha1.PodGroupTemplate {
	return v1alpha1.PodGroupTemplate{Name: name, SchedulingPolicy: v1alpha1.PodGroupSchedulingPolicy{Gang: &v1alpha1.GangSchedulingPolicy{MinCount: 2}}}
}

func compositeFields(name string, children ...v1alpha1.PodGroupTemplate) v1alpha1.CompositePodGroupTemplateFields {
	return v1alpha1.CompositePodGroupTemplateFields{
		Name:              name,
		SchedulingPolicy:  v1alpha1.CompositePodGroupSchedulingPolicy{Gang: &v1alpha1.CompositeGangSchedulingPolicy{MinGroupCount: 1}},
		PodGroupTemplates: children,
	}
}

func workload(name string, mutate func(*v1alpha1.WorkloadSpec)) *v1alpha1.Workload {
	w := &v1alpha1.Workload{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: v1alpha1.WorkloadSpec{PodGroupTemplates: []v1alpha1.PodGroupTemplate{pgTemplate("workers")}}}
	mutate(&w.Spec)
	return w
}

// TestCRDValidationRejectsInvalidObjects checks every schema rule: each
// invalid object is rejected and the message names the offending field.
func TestCRDValidationRejectsInvalidObjects(t *testing.T) {
	c := startCluster(t, sandbox.Options{})
	ctx := context.Background()
	ns := namespace(t, c)
	pgs := c.Phalanx.SchedulingV1alpha1().PodGroups(ns)
	cpgs := c.Phalanx.SchedulingV1alpha1().CompositePodGroups(ns)
	wls := c.Phalanx.SchedulingV1alpha1().Workloads(ns)

	type tc struct {
		name   string
		create func(name string) error
		want   []string // substrings of the error: field path and rule
	}
	pg := func(mutate func(*v1alpha1.PodGroup)) func(string) error {
		return func(name string) error {
			p := gangPG(name, 2)
			mutate(p)
			_, err := pgs.Create(ctx, p, metav1.CreateOptions{})
			return err
		}
	}
	wl := func(mutate func(*v1alpha1.WorkloadSpec)) func(string) error {
		return func(name string) error {
			_, err := wls.Create(ctx, workload(name, mutate), metav1.CreateOptions{})
			return err
		}
	}
	cases := []tc{
		{"a PodGroup with both basic and gang", pg(func(p *v1alpha1.PodGroup) { p.Spec.SchedulingPolicy.Basic = &v1alpha1.BasicSchedulingPolicy{} }),
			[]string{"spec.schedulingPolicy", "exactly one of basic or gang must be set"}},
		{"a PodGroup with no policy", pg(func(p *v1alpha1.PodGroup) { p.Spec.SchedulingPolicy.Gang = nil }),
			[]string{"spec.schedulingPolicy", "exactly one of basic or gang must be set"}},
		{"a gang with minCount 0", pg(func(p *v1alpha1.PodGroup) { p.Spec.SchedulingPolicy.Gang.MinCount = 0 }),
			[]string{"spec.schedulingPolicy.gang.minCount", "greater than or equal to 1"}},
		{"a gang with minCount -3", pg(func(p *v1alpha1.PodGroup) { p.Spec.SchedulingPolicy.Gang.MinCount = -3 }),
			[]string{"spec.schedulingPolicy.gang.minCount", "greater than or equal to 1"}},
		{"two topology constraints", pg(func(p *v1alpha1.PodGroup) {
			p.Spec.SchedulingConstraints = &v1alpha1.PodGroupSchedulingConstraints{Topology: topo("a", "b")}
		}), []string{"spec.schedulingConstraints.topology", "must have at most 1 item"}},
		{"an empty topology key", pg(func(p *v1alpha1.PodGroup) {
			p.Spec.SchedulingConstraints = &v1alpha1.PodGroupSchedulingConstraints{Topology: topo("")}
		}), []string{"spec.schedulingConstraints.topology[0].key"}},
		{"a topology key that is not a label key", pg(func(p *v1alpha1.PodGroup) {
			p.Spec.SchedulingConstraints = &v1alpha1.PodGroupSchedulingConstraints{Topology: topo("not a key!")}
		}), []string{"spec.schedulingConstraints.topology[0].key", "should match"}},
		{"a disruption mode with both single and all", pg(func(p *v1alpha1.PodGroup) {
			p.Spec.DisruptionMode = &v1alpha1.DisruptionMode{Single: &v1alpha1.SingleDisruptionMode{}, All: &v1alpha1.AllDisruptionMode{}}
		}), []string{"spec.disruptionMode", "exactly one of single or all must be set"}},
		{"an empty disruption mode", pg(func(p *v1alpha1.PodGroup) { p.Spec.DisruptionMode = &v1alpha1.DisruptionMode{} }),
			[]string{"spec.disruptionMode", "exactly one of single or all must be set"}},
		{"an unknown preemption policy", pg(func(p *v1alpha1.PodGroup) {
			p.Spec.PreemptionPolicy = ptr.To(v1alpha1.PreemptionPolicy("Sometimes"))
		}), []string{"spec.preemptionPolicy", "Unsupported value"}},
		{"a negative minimum runtime", pg(func(p *v1alpha1.PodGroup) { p.Spec.MinRuntimeSeconds = ptr.To[int32](-1) }),
			[]string{"spec.minRuntimeSeconds", "greater than or equal to 0"}},
		{"five resource claims", pg(func(p *v1alpha1.PodGroup) {
			for i := 0; i < 5; i++ {
				p.Spec.ResourceClaims = append(p.Spec.ResourceClaims, v1alpha1.PodGroupResourceClaim{Name: fmt.Sprintf("c%d", i), ResourceClaimName: ptr.To("x")})
			}
		}), []string{"spec.resourceClaims", "must have at most 4 items"}},
		{"two resource claims of one name", pg(func(p *v1alpha1.PodGroup) {
			p.Spec.ResourceClaims = []v1alpha1.PodGroupResourceClaim{{Name: "gpu", ResourceClaimName: ptr.To("a")}, {Name: "gpu", ResourceClaimName: ptr.To("b")}}
		}), []string{"spec.resourceClaims[1]", "Duplicate value"}},
		{"a resource claim naming both a claim and a template", pg(func(p *v1alpha1.PodGroup) {
			p.Spec.ResourceClaims = []v1alpha1.PodGroupResourceClaim{{Name: "gpu", ResourceClaimName: ptr.To("a"), ResourceClaimTemplateName: ptr.To("t")}}
		}), []string{"spec.resourceClaims[0]", "exactly one of resourceClaimName or resourceClaimTemplateName must be set"}},
		{"a resource claim naming neither", pg(func(p *v1alpha1.PodGroup) {
			p.Spec.ResourceClaims = []v1alpha1.PodGroupResourceClaim{{Name: "gpu"}}
		}), []string{"spec.resourceClaims[0]", "exactly one of resourceClaimName or resourceClaimTemplateName must be set"}},
		{"a resource claim whose name is not a DNS label", pg(func(p *v1alpha1.PodGroup) {
			p.Spec.ResourceClaims = []v1alpha1.PodGroupResourceClaim{{Name: "GPU_0", ResourceClaimName: ptr.To("a")}}
		}), []string{"spec.resourceClaims[0].name", "should match"}},
		{"a CompositePodGroup with minGroupCount 0", func(name string) error {
			_, err := cpgs.Create(ctx, &v1alpha1.CompositePodGroup{ObjectMeta: metav1.ObjectMeta{Name: name},
				Spec: v1alpha1.CompositePodGroupSpec{SchedulingPolicy: v1alpha1.CompositePodGroupSchedulingPolicy{Gang: &v1alpha1.CompositeGangSchedulingPolicy{}}}}, metav1.CreateOptions{})
			return err
		}, []string{"spec.schedulingPolicy.gang.minGroupCount", "greater than or equal to 1"}},
		{"a CompositePodGroup with both basic and gang", func(name string) error {
			_, err := cpgs.Create(ctx, &v1alpha1.CompositePodGroup{ObjectMeta: metav1.ObjectMeta{Name: name},
				Spec: v1alpha1.CompositePodGroupSpec{SchedulingPolicy: v1alpha1.CompositePodGroupSchedulingPolicy{
					Basic: &v1alpha1.CompositeBasicSchedulingPolicy{}, Gang: &v1alpha1.CompositeGangSchedulingPolicy{MinGroupCount: 1}}}}, metav1.CreateOptions{})
			return err
		}, []string{"spec.schedulingPolicy", "exactly one of basic or gang must be set"}},
		{"a Workload with nine templates", wl(func(s *v1alpha1.WorkloadSpec) {
			s.PodGroupTemplates = nil
			for i := 0; i < 9; i++ {
				s.PodGroupTemplates = append(s.PodGroupTemplates, pgTemplate(fmt.Sprintf("t%d", i)))
			}
		}), []string{"spec.podGroupTemplates", "must have at most 8 items"}},
		{"a Workload with duplicate template names", wl(func(s *v1alpha1.WorkloadSpec) {
			s.PodGroupTemplates = append(s.PodGroupTemplates, pgTemplate("workers"))
		}), []string{"spec.podGroupTemplates[1]", "Duplicate value"}},
		{"a Workload with a template name used in both lists", wl(func(s *v1alpha1.WorkloadSpec) {
			s.CompositePodGroupTemplates = []v1alpha1.CompositePodGroupTemplate{{CompositePodGroupTemplateFields: compositeFields("workers", pgTemplate("inner"))}}
		}), []string{"spec", "template names must be unique across podGroupTemplates and compositePodGroupTemplates"}},
		{"a Workload with no templates", wl(func(s *v1alpha1.WorkloadSpec) { s.PodGroupTemplates = nil }),
			[]string{"spec", "at least one template is required"}},
		{"a Workload composite template with no children", wl(func(s *v1alpha1.WorkloadSpec) {
			s.CompositePodGroupTemplates = []v1alpha1.CompositePodGroupTemplate{{CompositePodGroupTemplateFields: compositeFields("root")}}
		}), []string{"spec.compositePodGroupTemplates[0]", "a composite template needs at least one child template"}},
		{"a Workload template name that is not a DNS label", wl(func(s *v1alpha1.WorkloadSpec) { s.PodGroupTemplates[0].Name = "Bad_Name" }),
			[]string{"spec.podGroupTemplates[0].name", "should match"}},
		{"a Workload template with disruption mode all and basic policy", wl(func(s *v1alpha1.WorkloadSpec) {
			s.PodGroupTemplates[0].SchedulingPolicy = v1alpha1.PodGroupSchedulingPolicy{Basic: &v1alpha1.BasicSchedulingPolicy{}}
			s.PodGroupTemplates[0].DisruptionMode = &v1alpha1.DisruptionMode{All: &v1alpha1.AllDisruptionMode{}}
		}), []string{"spec.podGroupTemplates[0].disruptionMode", "the disruptionMode `all` is not supported with the Basic scheduling policy"}},
		{"a Workload template with minCount 0", wl(func(s *v1alpha1.WorkloadSpec) { s.PodGroupTemplates[0].SchedulingPolicy.Gang.MinCount = 0 }),
			[]string{"spec.podGroupTemplates[0].schedulingPolicy.gang.minCount", "greater than or equal to 1"}},
		{"a Workload template with a minimum runtime over a week", wl(func(s *v1alpha1.WorkloadSpec) { s.PodGroupTemplates[0].MinRuntimeSeconds = ptr.To[int32](604801) }),
			[]string{"spec.podGroupTemplates[0].minRuntimeSeconds", "less than or equal to 604800"}},
		{"a Workload composite's template with a negative minimum runtime", wl(func(s *v1alpha1.WorkloadSpec) {
			inner := pgTemplate("inner")
			inner.MinRuntimeSeconds = ptr.To[int32](-5)
			s.PodGroupTemplates = nil
			s.CompositePodGroupTemplates = []v1alpha1.CompositePodGroupTemplate{{CompositePodGroupTemplateFields: compositeFields("root", inner)}}
		}), []string{"spec.compositePodGroupTemplates[0].podGroupTemplates[0].minRuntimeSeconds", "greater than or equal to 0"}},
		{"a Workload nested five levels deep", wl(func(s *v1alpha1.WorkloadSpec) {
			l3 := v1alpha1.CompositePodGroupTemplateLevel3{CompositePodGroupTemplateFields: compositeFields("l3", pgTemplate("leaf")),
				CompositePodGroupTemplates: []v1alpha1.TooDeepTemplate{{}}}
			l2 := v1alpha1.CompositePodGroupTemplateLevel2{CompositePodGroupTemplateFields: compositeFields("l2"), CompositePodGroupTemplates: []v1alpha1.CompositePodGroupTemplateLevel3{l3}}
			s.CompositePodGroupTemplates = []v1alpha1.CompositePodGroupTemplate{{CompositePodGroupTemplateFields: compositeFields("l1"), CompositePodGroupTemplates: []v1alpha1.CompositePodGroupTemplateLevel2{l2}}}
		}), []string{"spec.compositePodGroupTemplates[0].compositePodGroupTemplates[0].compositePodGroupTemplates[0].compositePodGroupTemplates", "at most 4 levels deep"}},
		{"a Workload composite template with an unknown preemption policy", wl(func(s *v1alpha1.WorkloadSpec) {
			f := compositeFields("root", pgTemplate("inner"))
			f.PreemptionPolicy = ptr.To(v1alpha1.PreemptionPolicy("Always"))
			s.CompositePodGroupTemplates = []v1alpha1.CompositePodGroupTemplate{{CompositePodGroupTemplateFields: f}}
		}), []string{"spec.compositePodGroupTemplates[0].preemptionPolicy", "Unsupported value"}},
	}
	for i, tc := range cases {
		t.Run("rejects "+tc.name, func(t *testing.T) {
			err := tc.create(fmt.Sprintf("bad-%d", i))
			require.Error(t, err, "the API server accepted an invalid object")
			for _, w := range tc.want {
				assert.Contains(t, err.Error(), w)
			}
		})
	}

	// Updates: only minCount is mutable.
	base := gangPG("mutable", 2)
	base.Spec.SchedulingConstraints = &v1alpha1.PodGroupSchedulingConstraints{Topology: topo("topology.phalanx.dev/rack")}
	base.Spec.ParentCompositePodGroupName = ptr.To("parent")
	base.Spec.WorkloadRef = &v1alpha1.WorkloadReference{WorkloadName: "w", TemplateName: "t"}
	created, err := pgs.Create(ctx, base, metav1.CreateOptions{})
	require.NoError(t, err)

	updates := []struct {
		name   string
		mutate func(*v1alpha1.PodGroup)
		want   []string
	}{
		{"the policy kind", func(p *v1alpha1.PodGroup) {
			p.Spec.SchedulingPolicy = v1alpha1.PodGroupSchedulingPolicy{Basic: &v1alpha1.BasicSchedulingPolicy{}}
		}, []string{"spec.schedulingPolicy", "the scheduling policy kind (basic or gang) is immutable"}},
		{"the topology constraint", func(p *v1alpha1.PodGroup) {
			p.Spec.SchedulingConstraints.Topology = topo("topology.kubernetes.io/zone")
		}, []string{"spec.schedulingConstraints", "schedulingConstraints is immutable"}},
		{"the parent link", func(p *v1alpha1.PodGroup) { p.Spec.ParentCompositePodGroupName = ptr.To("other") },
			[]string{"spec.parentCompositePodGroupName", "parentCompositePodGroupName is immutable"}},
		{"the workloadRef", func(p *v1alpha1.PodGroup) { p.Spec.WorkloadRef.TemplateName = "u" },
			[]string{"spec.workloadRef", "workloadRef is immutable"}},
		{"the priority", func(p *v1alpha1.PodGroup) { p.Spec.Priority = ptr.To[int32](5) },
			[]string{"spec.priority", "priority is immutable"}},
	}
	for _, u := range updates {
		t.Run("rejects a change of "+u.name, func(t *testing.T) {
			p := created.DeepCopy()
			u.mutate(p)
			_, err := pgs.Update(ctx, p, metav1.UpdateOptions{})
			require.Error(t, err)
			for _, w := range u.want {
				assert.Contains(t, err.Error(), w)
			}
		})
	}
	t.Run("accepts a change of minCount", func(t *testing.T) {
		p := created.DeepCopy()
		p.Spec.SchedulingPolicy.Gang.MinCount = 5
		got, err := pgs.Update(ctx, p, metav1.UpdateOptions{})
		require.NoError(t, err)
		assert.Equal(t, int32(5), got.Spec.SchedulingPolicy.Gang.MinCount)
	})

	t.Run("rejects a change of a CompositePodGroup's minGroupCount", func(t *testing.T) {
		cpg, err := cpgs.Create(ctx, &v1alpha1.CompositePodGroup{ObjectMeta: metav1.ObjectMeta{Name: "root"},
			Spec: v1alpha1.CompositePodGroupSpec{SchedulingPolicy: v1alpha1.CompositePodGroupSchedulingPolicy{Gang: &v1alpha1.CompositeGangSchedulingPolicy{MinGroupCount: 2}}}}, metav1.CreateOptions{})
		require.NoError(t, err)
		cpg.Spec.SchedulingPolicy.Gang.MinGroupCount = 3
		_, err = cpgs.Update(ctx, cpg, metav1.UpdateOptions{})
		require.Error(t, err)
		assert.Contains(t, err.Error(), "spec.schedulingPolicy.gang.minGroupCount")
		assert.Contains(t, err.Error(), "minGroupCount is immutable")
	})

	t.Run("rejects a change of a Workload composite template's minGroupCount", func(t *testing.T) {
		w, err := wls.Create(ctx, workload("tmpl", func(s *v1alpha1.WorkloadSpec) {
			s.PodGroupTemplates = nil
			s.CompositePodGroupTemplates = []v1alpha1.CompositePodGroupTemplate{{CompositePodGroupTemplateFields: compositeFields("root", pgTemplate("inner"))}}
		}), metav1.CreateOptions{})
		require.NoError(t, err)
		w.Spec.CompositePodGroupTemplates[0].SchedulingPolicy.Gang.MinGroupCount = 4
		_, err = wls.Update(ctx, w, metav1.UpdateOptions{})
		require.Error(t, err)
		assert.Contains(t, err.Error(), "spec.compositePodGroupTemplates[0].schedulingPolicy.gang.minGroupCount")
		assert.Contains(t, err.Error(), "minGroupCount is immutable")
	})

	t.Run("accepts a basic PodGroup evicted whole (disruptionMode all), as upstream's API does", func(t *testing.T) {
		p := gangPG("basic-all", 1)
		p.Spec.SchedulingPolicy = v1alpha1.PodGroupSchedulingPolicy{Basic: &v1alpha1.BasicSchedulingPolicy{}}
		p.Spec.DisruptionMode = &v1alpha1.DisruptionMode{All: &v1alpha1.AllDisruptionMode{}}
		_, err := pgs.Create(ctx, p, metav1.CreateOptions{})
		require.NoError(t, err)
	})
}

// TestPlainPodsAreBoundByPhalanx runs the scheduler through the same
// registry as cmd/phalanx-scheduler and checks plain pods get bound by it.
func TestPlainPodsAreBoundByPhalanx(t *testing.T) {
	c := startCluster(t, sandbox.Options{
		Topology:  &sandbox.Topology{Zones: 1, RacksPerZone: 1, NodesPerRack: 4, CPU: "4", Memory: "16Gi", Pods: 110},
		Scheduler: true,
	})
	ctx := context.Background()
	ns := namespace(t, c)
	for i := 0; i < 10; i++ {
		_, err := c.Client.CoreV1().Pods(ns).Create(ctx, plainPod(fmt.Sprintf("p%d", i), "1"), metav1.CreateOptions{})
		require.NoError(t, err)
	}
	// 4 nodes × 4 cpu hold 16 one-cpu pods: all 10 must bind.
	eventually(t, 30*time.Second, "10 pods bound", func() (bool, error) {
		return len(boundPods(t, c, ns)) == 10, nil
	})
	// Events are recorded asynchronously: wait for all ten.
	scheduledBy := map[string]int{}
	eventually(t, 30*time.Second, "10 Scheduled events", func() (bool, error) {
		events, err := c.Client.EventsV1().Events(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		scheduledBy = map[string]int{}
		total := 0
		for _, e := range events.Items {
			if e.Reason == "Scheduled" {
				scheduledBy[e.ReportingController]++
				total++
			}
		}
		return total >= 10, nil
	})
	assert.Equal(t, map[string]int{"phalanx-scheduler": 10}, scheduledBy, "every Scheduled event comes from the phalanx-scheduler profile")

	t.Run("a pod that fits nowhere stays pending with a reason", func(t *testing.T) {
		_, err := c.Client.CoreV1().Pods(ns).Create(ctx, plainPod("huge", "64"), metav1.CreateOptions{})
		require.NoError(t, err)
		eventually(t, 30*time.Second, "FailedScheduling event", func() (bool, error) {
			evs, err := c.Client.EventsV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "regarding.name=huge"})
			if err != nil {
				return false, err
			}
			return hasReason(evs.Items, "FailedScheduling"), nil
		})
		assert.NotContains(t, boundPods(t, c, ns), "huge")
	})
}

func hasReason(events []eventsv1.Event, reason string) bool {
	for _, e := range events {
		if e.Reason == reason {
			return true
		}
	}
	return false
}

func plainPod(name, cpu string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.PodSpec{
			SchedulerName: "phalanx-scheduler",
			Containers: []corev1.Container{{
				Name:  "main",
				Image: "registry.k8s.io/pause:3.10",
				Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
					corev1.ResourceCPU: resource.MustParse(cpu),
				}},
			}},
		},
	}
}
