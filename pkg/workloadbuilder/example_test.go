package workloadbuilder_test

import (
	"context"
	"encoding/json"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/phalanx-sched/phalanx/apis/scheduling/v1alpha1"
	wb "github.com/phalanx-sched/phalanx/pkg/workloadbuilder"
)

// everything is the allow-list of a controller that supports every option.
var everything = wb.BuildOptions{
	AllowedPolicies:        []wb.PolicyKind{wb.BasicPolicy, wb.GangPolicy},
	AllowedDisruptionModes: []wb.DisruptionModeKind{wb.SingleMode, wb.AllMode},
}

func options(name string, owner *metav1.OwnerReference) wb.BuildOptions {
	opts := everything
	opts.Name, opts.Namespace, opts.Owner = name, "ml", owner
	return opts
}

func jobOwner(name string) *metav1.OwnerReference {
	controller := true
	return &metav1.OwnerReference{APIVersion: "batch/v1", Kind: "Job", Name: name, UID: types.UID("uid-" + name), Controller: &controller}
}

func gangOf(n int32) *wb.WorkloadPodGroupSchedulingPolicy {
	return &wb.WorkloadPodGroupSchedulingPolicy{Gang: &wb.WorkloadPodGroupGangSchedulingPolicy{MinCount: &n}}
}

func printJSON(v any) {
	out, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(string(out))
}

func printGroups(b *wb.Builder) {
	pgs, cpgs, err := b.Groups()
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, g := range cpgs {
		parent := "-"
		if g.Spec.ParentCompositePodGroupName != nil {
			parent = *g.Spec.ParentCompositePodGroupName
		}
		fmt.Printf("CompositePodGroup %s parent=%s template=%s\n", g.Name, parent, g.Spec.WorkloadRef.TemplateName)
	}
	for _, g := range pgs {
		parent := "-"
		if g.Spec.ParentCompositePodGroupName != nil {
			parent = *g.Spec.ParentCompositePodGroupName
		}
		fmt.Printf("PodGroup %s parent=%s template=%s\n", g.Name, parent, g.Spec.WorkloadRef.TemplateName)
	}
}

// A Job with parallelism 4 asks for a gang and leaves minCount to the
// controller, which defaults it to the parallelism.
func Example_jobGang() {
	parallelism := int32(4)
	scheduling := field.NewPath("spec", "scheduling")
	item := &wb.WorkloadItem{
		Name:     "workers",
		Path:     scheduling,
		Defaults: &wb.Config{MinCount: &parallelism},
		Input: wb.Input{
			// What the user wrote: spec.scheduling.schedulingPolicy: {gang: {}}
			SchedulingPolicy: wb.At(scheduling.Child("schedulingPolicy"),
				&wb.WorkloadPodGroupSchedulingPolicy{Gang: &wb.WorkloadPodGroupGangSchedulingPolicy{}}),
		},
	}
	b := wb.NewBuilder(item, options("train", jobOwner("train")))
	if errs := b.Validate(context.Background(), wb.ValidationInput{}); len(errs) > 0 {
		fmt.Println(errs.ToAggregate())
		return
	}
	w, err := b.BuildWorkload()
	if err != nil {
		fmt.Println(err)
		return
	}
	printJSON(w.Spec)

	pg, err := b.NewPodGroup(wb.GroupName(w.Name, "workers"), "workers")
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("%s/%s minCount=%d owner=%s/%s\n", pg.Namespace, pg.Name,
		pg.Spec.SchedulingPolicy.Gang.MinCount, pg.OwnerReferences[0].Kind, pg.OwnerReferences[0].Name)
	// Output:
	// {
	//   "controllerRef": {
	//     "apiGroup": "batch",
	//     "kind": "Job",
	//     "name": "train"
	//   },
	//   "podGroupTemplates": [
	//     {
	//       "name": "workers",
	//       "schedulingPolicy": {
	//         "gang": {
	//           "minCount": 4
	//         }
	//       }
	//     }
	//   ]
	// }
	// ml/train-workers minCount=4 owner=Job/train
}

// Two gangs of four that are only useful together: the root composite needs
// both of its children (minGroupCount 2) schedulable at the same time.
func Example_gangOfGangs() {
	two := int32(2)
	spec := field.NewPath("spec")
	worker := func(i int, name string) *wb.WorkloadItem {
		path := spec.Child("replicatedJobs").Index(i).Child("scheduling")
		return &wb.WorkloadItem{
			Name:     name,
			NamePath: spec.Child("replicatedJobs").Index(i).Child("name"),
			Path:     path,
			Input:    wb.Input{SchedulingPolicy: wb.At(path.Child("schedulingPolicy"), gangOf(4))},
		}
	}
	root := &wb.WorkloadItem{
		Name:         "trainer",
		Path:         spec.Child("scheduling"),
		ChildrenPath: spec.Child("replicatedJobs"),
		Input: wb.Input{
			CompositeSchedulingPolicy: wb.At(spec.Child("scheduling", "schedulingPolicy"),
				&wb.WorkloadCompositePodGroupSchedulingPolicy{Gang: &wb.WorkloadCompositePodGroupGangSchedulingPolicy{MinGroupCount: &two}}),
		},
		Children: []*wb.WorkloadItem{worker(0, "workers-a"), worker(1, "workers-b")},
	}
	b := wb.NewBuilder(root, options("llm", nil))
	if errs := b.Validate(context.Background(), wb.ValidationInput{}); len(errs) > 0 {
		fmt.Println(errs.ToAggregate())
		return
	}
	w, err := b.BuildWorkload()
	if err != nil {
		fmt.Println(err)
		return
	}
	printJSON(w.Spec)
	printGroups(b)
	// Output:
	// {
	//   "compositePodGroupTemplates": [
	//     {
	//       "name": "trainer",
	//       "schedulingPolicy": {
	//         "gang": {
	//           "minGroupCount": 2
	//         }
	//       },
	//       "podGroupTemplates": [
	//         {
	//           "name": "workers-a",
	//           "schedulingPolicy": {
	//             "gang": {
	//               "minCount": 4
	//             }
	//           }
	//         },
	//         {
	//           "name": "workers-b",
	//           "schedulingPolicy": {
	//             "gang": {
	//               "minCount": 4
	//             }
	//           }
	//         }
	//       ]
	//     }
	//   ]
	// }
	// CompositePodGroup llm-trainer parent=- template=trainer
	// PodGroup llm-workers-a parent=llm-trainer template=workers-a
	// PodGroup llm-workers-b parent=llm-trainer template=workers-b
}

// A job whose pods must share a zone, and whose workers and driver must
// each fit in one rack of that zone. The controller's Adjust callback
// defaults the root's minGroupCount to its number of children.
func Example_multiLevelTopology() {
	zone := []v1alpha1.TopologyConstraint{{Key: "topology.kubernetes.io/zone"}}
	rack := []v1alpha1.TopologyConstraint{{Key: "topology.example.com/rack"}}
	leaf := func(name string, minCount int32) *wb.WorkloadItem {
		path := field.NewPath("spec", "roles").Key(name)
		return &wb.WorkloadItem{
			Name: name,
			Path: path,
			Input: wb.Input{
				SchedulingPolicy:      wb.At(path.Child("schedulingPolicy"), gangOf(minCount)),
				SchedulingConstraints: wb.At(path.Child("schedulingConstraints"), &wb.WorkloadPodGroupSchedulingConstraints{Topology: rack}),
			},
		}
	}
	root := &wb.WorkloadItem{
		Name:     "job",
		Path:     field.NewPath("spec"),
		Defaults: &wb.Config{Policy: wb.GangPolicy},
		Input: wb.Input{
			CompositeSchedulingConstraints: wb.At(field.NewPath("spec", "schedulingConstraints"),
				&wb.WorkloadCompositePodGroupSchedulingConstraints{Topology: zone}),
		},
		Children: []*wb.WorkloadItem{leaf("workers", 8), leaf("driver", 1)},
	}
	root.Adjust = []wb.AdjustFunc{func(c *wb.Config) {
		if c.Policy == wb.GangPolicy && c.MinCount == nil {
			n := int32(len(root.Children))
			c.MinCount = &n
		}
	}}

	b := wb.NewBuilder(root, options("sim", nil))
	if errs := b.Validate(context.Background(), wb.ValidationInput{}); len(errs) > 0 {
		fmt.Println(errs.ToAggregate())
		return
	}
	w, err := b.BuildWorkload()
	if err != nil {
		fmt.Println(err)
		return
	}
	printJSON(w.Spec)
	printGroups(b)
	// Output:
	// {
	//   "compositePodGroupTemplates": [
	//     {
	//       "name": "job",
	//       "schedulingPolicy": {
	//         "gang": {
	//           "minGroupCount": 2
	//         }
	//       },
	//       "schedulingConstraints": {
	//         "topology": [
	//           {
	//             "key": "topology.kubernetes.io/zone"
	//           }
	//         ]
	//       },
	//       "podGroupTemplates": [
	//         {
	//           "name": "workers",
	//           "schedulingPolicy": {
	//             "gang": {
	//               "minCount": 8
	//             }
	//           },
	//           "schedulingConstraints": {
	//             "topology": [
	//               {
	//                 "key": "topology.example.com/rack"
	//               }
	//             ]
	//           }
	//         },
	//         {
	//           "name": "driver",
	//           "schedulingPolicy": {
	//             "gang": {
	//               "minCount": 1
	//             }
	//           },
	//           "schedulingConstraints": {
	//             "topology": [
	//               {
	//                 "key": "topology.example.com/rack"
	//               }
	//             ]
	//           }
	//         }
	//       ]
	//     }
	//   ]
	// }
	// CompositePodGroup sim-job parent=- template=job
	// PodGroup sim-workers parent=sim-job template=workers
	// PodGroup sim-driver parent=sim-job template=driver
}

// A controller that reads the gang size from a Job annotation relocates the
// minCount field to that annotation, so the user is told what to edit. This
// controller supports only the basic policy, and the structural layer
// catches the bad count.
func ExampleBuilder_Validate() {
	annotation := field.NewPath("metadata", "annotations").Key("scheduling.phalanx.dev/min-count")
	policy := wb.At(annotation, gangOf(0)).WithFieldPath("gang.minCount", annotation)
	item := &wb.WorkloadItem{
		Name:  "pods",
		Path:  field.NewPath("spec", "scheduling"),
		Input: wb.Input{SchedulingPolicy: policy},
	}
	b := wb.NewBuilder(item, wb.BuildOptions{
		Name:                   "etl",
		AllowedPolicies:        []wb.PolicyKind{wb.BasicPolicy},
		AllowedDisruptionModes: []wb.DisruptionModeKind{wb.SingleMode},
	})
	for _, err := range b.Validate(context.Background(), wb.ValidationInput{}) {
		fmt.Println(err)
	}
	// Output:
	// metadata.annotations[scheduling.phalanx.dev/min-count]: Invalid value: 0: must be greater than or equal to 1
	// metadata.annotations[scheduling.phalanx.dev/min-count]: Unsupported value: "gang": supported values: "basic"
}

// The Workload controller finds a stored Workload and creates its groups,
// owned by the Workload, without validating or recompiling it.
func ExampleNewBuilderFromExistingWorkload() {
	w := &v1alpha1.Workload{
		ObjectMeta: metav1.ObjectMeta{Name: "pipeline", Namespace: "ml", UID: "uid-pipeline"},
		Spec: v1alpha1.WorkloadSpec{
			CompositePodGroupTemplates: []v1alpha1.CompositePodGroupTemplate{{
				CompositePodGroupTemplateFields: v1alpha1.CompositePodGroupTemplateFields{
					Name:             "root",
					SchedulingPolicy: v1alpha1.CompositePodGroupSchedulingPolicy{Basic: &v1alpha1.CompositeBasicSchedulingPolicy{}},
				},
				CompositePodGroupTemplates: []v1alpha1.CompositePodGroupTemplateLevel2{{
					CompositePodGroupTemplateFields: v1alpha1.CompositePodGroupTemplateFields{
						Name:             "stage",
						SchedulingPolicy: v1alpha1.CompositePodGroupSchedulingPolicy{Gang: &v1alpha1.CompositeGangSchedulingPolicy{MinGroupCount: 1}},
						PodGroupTemplates: []v1alpha1.PodGroupTemplate{{
							Name:             "loader",
							SchedulingPolicy: v1alpha1.PodGroupSchedulingPolicy{Gang: &v1alpha1.GangSchedulingPolicy{MinCount: 2}},
						}},
					},
				}},
			}},
		},
	}
	owner := wb.WorkloadOwnerReference(w)
	b, err := wb.NewBuilderFromExistingWorkload(w, wb.BuildOptions{Owner: &owner})
	if err != nil {
		fmt.Println(err)
		return
	}
	built, _ := b.BuildWorkload()
	fmt.Println("same object:", built == w)
	printGroups(b)
	pgs, _, _ := b.Groups()
	fmt.Println("owner:", pgs[0].OwnerReferences[0].Kind, pgs[0].OwnerReferences[0].Name)
	// Output:
	// same object: true
	// CompositePodGroup pipeline-root parent=- template=root
	// CompositePodGroup pipeline-stage parent=pipeline-root template=stage
	// PodGroup pipeline-loader parent=pipeline-stage template=loader
	// owner: Workload pipeline
}
