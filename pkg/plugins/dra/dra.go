// Package dra is upstream's DynamicResources plugin run so that a claim of
// a scheduling.k8s.io PodGroup (its spec.resourceClaims) is reserved for
// the PodGroup rather than for each member pod.
//
// A ResourceClaim's status.reservedFor holds at most 256 consumers. With
// the claim reserved for the PodGroup, any number of the group's pods use
// it: the kubelet and the resourceclaim controller accept a pod whose
// PodGroup is listed, when they run with DRAWorkloadResourceClaims. The
// in-tree plugin does this only under that gate, which depends on
// GenericWorkload, and that gate hands every pod with spec.schedulingGroup
// to upstream's own pod-group cycle, which a Phalanx scheduler runs without
// (docs/architecture.md). This package builds the same plugin with the
// PodGroup reservation on and without GenericWorkload: the plugin finds a
// pod's PodGroup in its scheduler's snapshot, which holds PodGroups only
// under GenericWorkload, so it is handed a snapshot that reads them from
// Phalanx's own informer instead. Everything else is upstream's code.
package dra

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	schedv1beta1 "k8s.io/api/scheduling/v1beta1"
	"k8s.io/apimachinery/pkg/runtime"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	configv1 "k8s.io/kube-scheduler/config/v1"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/apis/config"
	"k8s.io/kubernetes/pkg/scheduler/apis/config/scheme"
	"k8s.io/kubernetes/pkg/scheduler/apis/config/validation"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/dynamicresources"
	plfeature "k8s.io/kubernetes/pkg/scheduler/framework/plugins/feature"
	frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"

	"github.com/phalanx-sched/phalanx/pkg/groupcache"
	"github.com/phalanx-sched/phalanx/pkg/plugins/pluginrt"
)

// Name is the plugin's name in a KubeSchedulerConfiguration.
const Name = pluginrt.DynamicResourcesName

// plugin is upstream's plugin under Phalanx's name: the framework keys
// score weights, queueing hints and unschedulable plugins by Name(), which
// must be the name the profile enables.
type plugin struct {
	*dynamicresources.DynamicResources
	rt *pluginrt.Runtime
}

func (*plugin) Name() string { return Name }

// PreEnqueue lets a pod into the queue without its claims while the
// scheduler takes in its informers' first lists, and is upstream's after.
//
// Upstream's holds a pod whose claims are not in its claim cache yet. At
// start the pods arrive in no order with the claims, slices and nodes, so
// most pods with claims were held, and every slice, claim and node added
// then had the queue weigh each held pod again: 80% of a 1,000-node DRA
// scheduler's start, 2.5–5 s before its first cycle. No cycle runs before
// the lists are in (the caller of pluginrt.Runtime.MarkListed waits for
// them), and a pod whose claim is still missing at its first cycle is
// refused there by the same plugin's PreFilter, which names the claim.
func (pl *plugin) PreEnqueue(ctx context.Context, pod *corev1.Pod) *fwk.Status {
	if !pl.rt.Listed() {
		return nil
	}
	return pl.DynamicResources.PreEnqueue(ctx, pod)
}

// Factory returns the plugin's factory for the scheduler rt serves. Its
// arguments are DynamicResources' own (filterTimeout, bindingTimeout).
func Factory(rt *pluginrt.Runtime) frameworkruntime.PluginFactory {
	return func(ctx context.Context, obj runtime.Object, h fwk.Handle) (fwk.Plugin, error) {
		args, err := decodeArgs(obj)
		if err != nil {
			return nil, err
		}
		inst, err := rt.Instance(ctx, h)
		if err != nil {
			return nil, err
		}
		fts := plfeature.NewSchedulerFeaturesFromGates(utilfeature.DefaultFeatureGate)
		fts.EnableDRAWorkloadResourceClaims = true
		p, err := dynamicresources.New(ctx, args, podGroupHandle{Handle: h, groups: inst.Groups}, fts)
		if err != nil {
			return nil, err
		}
		dr, ok := p.(*dynamicresources.DynamicResources)
		if !ok {
			return nil, fmt.Errorf("%s: upstream's plugin is a %T", Name, p)
		}
		pl := &plugin{DynamicResources: dr, rt: rt}
		rt.Register(ctx, h, pl)
		return pl, nil
	}
}

// decodeArgs reads the profile's args for the plugin as DynamicResources'
// args (strictly: a field it does not know is refused), defaulted and
// checked as kube-scheduler defaults and checks them for that plugin.
func decodeArgs(obj runtime.Object) (*config.DynamicResourcesArgs, error) {
	var in configv1.DynamicResourcesArgs
	if obj != nil {
		if err := pluginrt.DecodeArgs(obj, &in); err != nil {
			return nil, fmt.Errorf("decode %s args: %w", Name, err)
		}
	}
	scheme.Scheme.Default(&in)
	var out config.DynamicResourcesArgs
	if err := scheme.Scheme.Convert(&in, &out, nil); err != nil {
		return nil, fmt.Errorf("%s args: %w", Name, err)
	}
	if err := validation.ValidateDynamicResourcesArgs(nil, &out, plfeature.NewSchedulerFeaturesFromGates(utilfeature.DefaultFeatureGate)); err != nil {
		return nil, fmt.Errorf("%s args: %w", Name, err)
	}
	return &out, nil
}

// ValidateArgs checks the args as the plugin's factory reads them.
func ValidateArgs(obj runtime.Object) error {
	_, err := decodeArgs(obj)
	return err
}

// podGroupHandle is the framework's handle whose snapshot finds
// scheduling.k8s.io PodGroups.
type podGroupHandle struct {
	fwk.Handle
	groups *groupcache.Fed
}

func (h podGroupHandle) SnapshotSharedLister() fwk.SharedLister {
	return podGroupSnapshot{SharedLister: h.Handle.SnapshotSharedLister(), groups: h.groups}
}

type podGroupSnapshot struct {
	fwk.SharedLister
	groups *groupcache.Fed
}

func (s podGroupSnapshot) PodGroups() fwk.PodGroupLister { return podGroupLister(s) }

type podGroupLister podGroupSnapshot

// errNotServed: the API server does not serve scheduling.k8s.io/v1beta1
// PodGroups (or the informer has not started), so no pod's PodGroup can be
// found; the plugin then leaves the pod unschedulable, as it does when the
// PodGroup does not exist.
var errNotServed = errors.New("scheduling.k8s.io/v1beta1 PodGroups are not served")

func (l podGroupLister) Get(namespace, name string) (*schedv1beta1.PodGroup, error) {
	lister := l.groups.NativePodGroups()
	if lister == nil {
		return nil, errNotServed
	}
	return lister.PodGroups(namespace).Get(name)
}
