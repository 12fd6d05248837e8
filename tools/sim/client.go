package sim

import (
	"context"
	"fmt"
	"reflect"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	xv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"
)

// kindAPI is one kind of object the engine creates, lists by name and
// deletes, whichever clientset serves it (client-go, Phalanx's,
// scheduler-plugins'). Steps and the teardown go through it, so they need
// no switch over kinds and their clientsets of their own.
type kindAPI struct {
	kind string // for messages
	// create sends a copy of obj, which must be of the kind's Go type.
	create func(ctx context.Context, obj metav1.Object) error
	names  func(ctx context.Context) ([]string, error)
	// delete removes one object with the kind's own delete options (see
	// newClient).
	delete    func(ctx context.Context, name string) error
	deleteAll func(ctx context.Context, opts metav1.DeleteOptions) error
}

// typedClient is what every generated typed client (namespaced or not)
// offers for its kind T and list type L.
type typedClient[T, L runtime.Object] interface {
	Create(ctx context.Context, obj T, opts metav1.CreateOptions) (T, error)
	List(ctx context.Context, opts metav1.ListOptions) (L, error)
	Delete(ctx context.Context, name string, opts metav1.DeleteOptions) error
	DeleteCollection(ctx context.Context, opts metav1.DeleteOptions, listOpts metav1.ListOptions) error
}

func newKindAPI[T, L runtime.Object](kind string, c typedClient[T, L], del metav1.DeleteOptions) *kindAPI {
	return &kindAPI{
		kind: kind,
		create: func(ctx context.Context, obj metav1.Object) error {
			o, ok := obj.(T)
			if !ok {
				return fmt.Errorf("a %s cannot be created as a %s", reflect.TypeOf(obj), kind)
			}
			_, err := c.Create(ctx, o.DeepCopyObject().(T), metav1.CreateOptions{})
			return err
		},
		names: func(ctx context.Context) ([]string, error) {
			l, err := c.List(ctx, metav1.ListOptions{})
			if err != nil {
				return nil, err
			}
			var out []string
			err = meta.EachListItem(l, func(o runtime.Object) error {
				m, err := meta.Accessor(o)
				if err != nil {
					return err
				}
				out = append(out, m.GetName())
				return nil
			})
			return out, err
		},
		delete: func(ctx context.Context, name string) error { return c.Delete(ctx, name, del) },
		deleteAll: func(ctx context.Context, opts metav1.DeleteOptions) error {
			return c.DeleteCollection(ctx, opts, metav1.ListOptions{})
		},
	}
}

// client holds a kindAPI per kind the engine touches: those of the
// scenario's namespace, and the nodes.
type client struct {
	ns     string
	byType map[reflect.Type]*kindAPI

	pods, jobs, podGroups, composites, workloads *kindAPI
	claims, claimTemplates                       *kindAPI
	// schedulerPluginsPodGroups is nil where the cluster does not serve
	// scheduler-plugins' CRD.
	schedulerPluginsPodGroups *kindAPI
	// localQueues is nil where the cluster runs no Kueue; clusterWide
	// holds Kueue's cluster-wide kinds, by Go type.
	localQueues *kindAPI
	clusterWide map[reflect.Type]*kindAPI
	nodes       *kindAPI
}

func newClient(cl Cluster, ns string) *client {
	c := &client{ns: ns, byType: map[reflect.Type]*kindAPI{}}
	// Pods go at once, as a finished pod would; a Job or Workload takes
	// the pods it owns with it.
	now := metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}
	background := metav1.DeleteOptions{PropagationPolicy: ptr.To(metav1.DeletePropagationBackground)}
	phalanx := cl.Phalanx.SchedulingV1alpha1()
	c.pods = register(c, "Pod", cl.Client.CoreV1().Pods(ns), now)
	c.jobs = register(c, "Job", cl.Client.BatchV1().Jobs(ns), background)
	c.podGroups = register(c, "PodGroup", phalanx.PodGroups(ns), metav1.DeleteOptions{})
	c.composites = register(c, "CompositePodGroup", phalanx.CompositePodGroups(ns), metav1.DeleteOptions{})
	c.workloads = register(c, "Workload", phalanx.Workloads(ns), background)
	register(c, "scheduling.k8s.io PodGroup", cl.Client.SchedulingV1beta1().PodGroups(ns), metav1.DeleteOptions{})
	register(c, "scheduling.k8s.io CompositePodGroup", cl.Client.SchedulingV1alpha3().CompositePodGroups(ns), metav1.DeleteOptions{})
	if cl.SchedulerPlugins != nil {
		c.schedulerPluginsPodGroups = register(c, "scheduling.x-k8s.io PodGroup", cl.SchedulerPlugins.SchedulingV1alpha1().PodGroups(ns), metav1.DeleteOptions{})
	}
	c.claims = register(c, "ResourceClaim", cl.Client.ResourceV1().ResourceClaims(ns), metav1.DeleteOptions{})
	c.claimTemplates = register(c, "ResourceClaimTemplate", cl.Client.ResourceV1().ResourceClaimTemplates(ns), metav1.DeleteOptions{})
	c.nodes = register(c, "node", cl.Client.CoreV1().Nodes(), metav1.DeleteOptions{})
	if cl.Kueue != nil {
		k := cl.Kueue.KueueV1beta2()
		c.localQueues = register(c, "LocalQueue", k.LocalQueues(ns), metav1.DeleteOptions{})
		c.clusterWide = map[reflect.Type]*kindAPI{
			reflect.TypeFor[*kueue.ClusterQueue]():          register(c, "ClusterQueue", k.ClusterQueues(), metav1.DeleteOptions{}),
			reflect.TypeFor[*kueue.ResourceFlavor]():        register(c, "ResourceFlavor", k.ResourceFlavors(), metav1.DeleteOptions{}),
			reflect.TypeFor[*kueue.Cohort]():                register(c, "Cohort", k.Cohorts(), metav1.DeleteOptions{}),
			reflect.TypeFor[*kueue.WorkloadPriorityClass](): register(c, "WorkloadPriorityClass", k.WorkloadPriorityClasses(), metav1.DeleteOptions{}),
		}
	}
	return c
}

// register adds a kindAPI, found by its Go type when objects are created.
func register[T, L runtime.Object](c *client, kind string, tc typedClient[T, L], del metav1.DeleteOptions) *kindAPI {
	r := newKindAPI(kind, tc, del)
	c.byType[reflect.TypeFor[T]()] = r
	return r
}

// create sends obj to the kindAPI of its Go type.
func (c *client) create(ctx context.Context, obj metav1.Object) error {
	r, ok := c.byType[reflect.TypeOf(obj)]
	if !ok {
		if _, ok := obj.(*xv1alpha1.PodGroup); ok {
			return fmt.Errorf("the cluster does not serve scheduler-plugins' scheduling.x-k8s.io PodGroups (install their CRD)")
		}
		if reflect.TypeOf(obj).Elem().PkgPath() == reflect.TypeFor[kueue.LocalQueue]().PkgPath() {
			return fmt.Errorf("the cluster runs no Kueue (set kueue: true on the scenario)")
		}
		return fmt.Errorf("unsupported kind %T", obj)
	}
	return r.create(ctx, obj)
}

// deletable is the kindAPI of a Delete step's kind (see deletableKinds).
func (c *client) deletable(kind string) *kindAPI {
	switch kind {
	case "Pod":
		return c.pods
	case "Job":
		return c.jobs
	case "PodGroup":
		return c.podGroups
	case "CompositePodGroup":
		return c.composites
	default: // Workload; Validate allows no other kind.
		return c.workloads
	}
}

// api is the client of the scenario's namespace, made again once setup has
// created it.
func (r *runner) api() *client {
	if r.client == nil || r.client.ns != r.ns {
		r.client = newClient(r.cl, r.ns)
	}
	return r.client
}
