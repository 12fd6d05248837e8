package gang

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/profile"

	"github.com/phalanx-sched/phalanx/pkg/groups"
	"github.com/phalanx-sched/phalanx/pkg/plugins/pluginrt"
)

// Custom resources the plugin reacts to; the scheduler watches them through
// its dynamic informer factory.
const (
	podGroupResource  fwk.EventResource = "podgroups.v1alpha1.scheduling.phalanx.dev"
	compositeResource fwk.EventResource = "compositepodgroups.v1alpha1.scheduling.phalanx.dev"
	priorityResource  fwk.EventResource = "priorityclasses.v1.scheduling.k8s.io"
)

// EventsToRegister lists what can make a held or rejected member
// schedulable, with hints that keep unrelated events from requeueing it.
func (pl *Gang) EventsToRegister(context.Context) ([]fwk.ClusterEventWithHint, error) {
	return []fwk.ClusterEventWithHint{
		// A sibling appears, or changes its labels: quorum may be reached.
		{Event: fwk.ClusterEvent{Resource: fwk.Pod, ActionType: fwk.Add | fwk.UpdatePodLabel}, QueueingHintFn: pl.siblingChanged},
		// Capacity freed by a bound pod leaving.
		{Event: fwk.ClusterEvent{Resource: fwk.Pod, ActionType: fwk.Delete}, QueueingHintFn: boundPodDeleted},
		// Capacity added, for a gang refused for its size or its
		// minResources.
		{Event: fwk.ClusterEvent{Resource: fwk.Node, ActionType: fwk.Add | fwk.UpdateNodeAllocatable | fwk.UpdateNodeLabel | fwk.UpdateNodeTaint}, QueueingHintFn: pl.nodeCanHelp},
		// The group (or its parent, or its PriorityClass) appears or changes.
		{Event: fwk.ClusterEvent{Resource: podGroupResource, ActionType: fwk.Add | fwk.Update}, QueueingHintFn: sameNamespace},
		{Event: fwk.ClusterEvent{Resource: compositeResource, ActionType: fwk.Add | fwk.Update}, QueueingHintFn: sameNamespace},
		{Event: fwk.ClusterEvent{Resource: priorityResource, ActionType: fwk.Add | fwk.Update}},
	}, nil
}

// siblingChanged queues pod when other joins or changes in pod's
// hierarchy. The queue asks once per held pod for every pod created:
// SameHierarchy reads pod's group from the cache and resolves other once
// per event.
func (pl *Gang) siblingChanged(_ klog.Logger, pod *corev1.Pod, _, newObj interface{}) (fwk.QueueingHint, error) {
	other, ok := newObj.(*corev1.Pod)
	if !ok || other.Namespace != pod.Namespace {
		return fwk.QueueSkip, nil
	}
	if other.UID == pod.UID {
		// The pod's own labels changed: whatever held it may be fixed.
		return fwk.Queue, nil
	}
	return queueIf(pl.groups.SameHierarchy(&pl.eventPod, pod, other)), nil
}

// nodeCanHelp queues pod for a node event unless its hierarchy lacks
// members or is broken: a node cannot bring a member or fix a group, and
// requeueing every held member of every assembling gang for each node
// added (thousands at a scheduler's start) only runs PreEnqueue to hold
// them again. Gangs refused for their size or minResources are complete
// and are queued.
func (pl *Gang) nodeCanHelp(_ klog.Logger, pod *corev1.Pod, _, newObj interface{}) (fwk.QueueingHint, error) {
	leaf, tracked := pl.groups.GroupOf(pod.UID)
	if !tracked {
		return fwk.Queue, nil
	}
	return queueIf(pl.completeFor(newObj, leaf)), nil
}

// leafMemo holds the hierarchies nodeCanHelp judged for one event: the
// queue asks about every held member in a row, and the members of a leaf
// share the answer.
type leafMemo struct {
	event    interface{}
	mu       sync.Mutex
	complete map[groups.Key]bool
}

// completeFor reports whether leaf's hierarchy has every member it needs
// and is well formed, once per leaf and event (the informer's object of
// the node the event is about, new for every event).
func (pl *Gang) completeFor(event interface{}, leaf groups.Key) bool {
	if event == nil {
		q, _, err := pl.groups.QuorumOf(leaf, groups.ByExisting)
		return q && err == nil
	}
	m := pl.lastNodeEvent.Load()
	if m == nil || m.event != event {
		m = &leafMemo{event: event, complete: map[groups.Key]bool{}}
		pl.lastNodeEvent.Store(m)
		// The capacity verdicts move to a new node generation before the
		// queue lets any member go: the capacity's own informer handler
		// may run after the member's next PreFilter, which would then
		// judge the gang against the nodes before this event, remember
		// that stale refusal under the old generation, and wait for a
		// node event that may never come.
		if pl.shared != nil && pl.shared.capacity != nil {
			pl.shared.capacity.bump()
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	ok, seen := m.complete[leaf]
	if !seen {
		q, _, err := pl.groups.QuorumOf(leaf, groups.ByExisting)
		ok = q && err == nil
		m.complete[leaf] = ok
	}
	return ok
}

func boundPodDeleted(_ klog.Logger, _ *corev1.Pod, oldObj, _ interface{}) (fwk.QueueingHint, error) {
	if p, ok := oldObj.(*corev1.Pod); ok && p.Spec.NodeName == "" {
		return fwk.QueueSkip, nil
	}
	return fwk.Queue, nil
}

// sameNamespace queues for group objects added or changed in the pod's
// namespace. A status-only update (the generation did not move) is the
// scheduler's own condition write and can make nothing schedulable.
func sameNamespace(_ klog.Logger, pod *corev1.Pod, oldObj, newObj interface{}) (fwk.QueueingHint, error) {
	u, ok := newObj.(*unstructured.Unstructured)
	if !ok {
		return fwk.Queue, nil
	}
	if o, ok := oldObj.(*unstructured.Unstructured); ok && o.GetGeneration() == u.GetGeneration() && o.GetUID() == u.GetUID() {
		return fwk.QueueSkip, nil
	}
	return queueIf(u.GetNamespace() == pod.Namespace), nil
}

func queueIf(b bool) fwk.QueueingHint {
	if b {
		return fwk.Queue
	}
	return fwk.QueueSkip
}

// summarize counts the filter reasons across nodes, most frequent first,
// e.g. "0/4 nodes fit: 4 Insufficient nvidia.com/gpu". planner is true when
// the group planner rejected the member on every node: it has already
// written a better explanation on the group.
func (pl *Gang) summarize(statuses fwk.NodeToStatusReader) (msg string, planner bool) {
	nodes, err := pl.handle.SnapshotSharedLister().NodeInfos().List()
	if err != nil {
		return "node list unavailable", false
	}
	counts := map[string]int{}
	planner = len(nodes) > 0
	for _, n := range nodes {
		st := statuses.Get(n.Node().Name)
		if st == nil || st.IsSuccess() {
			planner = false
			continue
		}
		planner = planner && st.Plugin() == pluginrt.TopologyName
		for _, r := range st.Reasons() {
			counts[r]++
		}
	}
	reasons := make([]string, 0, len(counts))
	for r := range counts {
		reasons = append(reasons, r)
	}
	sort.Slice(reasons, func(i, j int) bool {
		if counts[reasons[i]] != counts[reasons[j]] {
			return counts[reasons[i]] > counts[reasons[j]]
		}
		return reasons[i] < reasons[j]
	})
	parts := make([]string, 0, len(reasons))
	for i, r := range reasons {
		if i == 3 {
			break
		}
		parts = append(parts, fmt.Sprintf("%d %s", counts[r], r))
	}
	return fmt.Sprintf("0/%d nodes fit: %s", len(nodes), strings.Join(parts, ", ")), planner
}

// scheduledReason is the reason of the event the framework records on
// every pod it binds.
const scheduledReason = "Scheduled"

// QuietMemberEvents drops the framework's Scheduled event for members of
// gangs that have a group object, in every profile of profiles that runs
// this plugin without memberScheduledEvents. Call it once the scheduler is
// set up and before its informers start, since the scheduler reads the
// map without a lock.
//
// The framework records that event after every successful bind, through
// the profile's event recorder, with no plugin in between; the recorder is
// fixed when the profile is built, before any plugin exists. So the
// profile's framework is wrapped and the binding cycle, which looks the
// framework up in the map for every pod, gets a recorder that asks this
// plugin's group cache first. The plugins keep the unwrapped framework and
// its recorder: their own events are not filtered.
func QuietMemberEvents(rt *pluginrt.Runtime, profiles profile.Map) {
	for name, f := range profiles {
		p, ok := rt.Plugin(f, Name)
		if !ok {
			continue
		}
		pl := p.(*Gang)
		if pl.args.MemberScheduledEvents {
			continue
		}
		profiles[name] = &quietFramework{Framework: f, rec: memberEventFilter{inner: f.EventRecorder(), pl: pl}}
	}
}

// quietFramework is a profile's framework with a filtering event recorder.
type quietFramework struct {
	framework.Framework
	rec events.EventRecorderLogger
}

func (q *quietFramework) EventRecorder() events.EventRecorderLogger { return q.rec }

// Unwrap returns the framework the plugins were built with, which the
// plugins' runtime files them under.
func (q *quietFramework) Unwrap() fwk.Handle { return q.Framework }

// memberEventFilter passes every event on except Scheduled on a member of
// a gang with a group object.
type memberEventFilter struct {
	inner events.EventRecorderLogger
	pl    *Gang
}

func (m memberEventFilter) Eventf(regarding, related runtime.Object, eventtype, reason, action, note string, args ...interface{}) {
	if reason == scheduledReason && m.pl.quietScheduled(regarding) {
		return
	}
	m.inner.Eventf(regarding, related, eventtype, reason, action, note, args...)
}

func (m memberEventFilter) WithLogger(logger klog.Logger) events.EventRecorderLogger {
	return memberEventFilter{inner: m.inner.WithLogger(logger), pl: m.pl}
}

// quietScheduled reports whether obj is a member of a gang whose group
// object carries the outcome: its Schedulable condition (or, for a
// scheduler-plugins PodGroup, its phase) says when the gang is scheduled,
// and the member's own node and PodScheduled condition say where it went.
// Members of basic groups are scheduled one by one, and label gangs have
// no object to look at: both keep the event.
func (pl *Gang) quietScheduled(obj runtime.Object) bool {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return false
	}
	leaf, tracked := pl.groups.GroupOf(pod.UID)
	if !tracked || leaf.Kind == groups.LabelKind {
		return false
	}
	_, gang := pl.groups.UnitOf(leaf)
	return gang
}

// WatchedResources are the custom resources the scheduler watches, through
// its dynamic informer factory, for the queueing hints of the plugin's
// EventsToRegister; none when no profile runs the plugin.
func WatchedResources(rt *pluginrt.Runtime, profiles profile.Map) []schema.GroupVersionResource {
	if !runsIn(rt, profiles) {
		return nil
	}
	return watchedResources()
}

func watchedResources() []schema.GroupVersionResource {
	var out []schema.GroupVersionResource
	for _, r := range []fwk.EventResource{podGroupResource, compositeResource, priorityResource} {
		gvr, _ := schema.ParseResourceArg(string(r))
		out = append(out, *gvr)
	}
	return out
}

// TrimGroupEvents makes the scheduler's dynamic informers of the group
// resources keep only the metadata sameNamespace reads. The scheduler
// watches every custom resource a plugin registers events for with an
// informer of its own, of unstructured copies: a PodGroup with its managed
// fields and conditions took about 4 KiB there, the second copy of every
// group beside the typed one the group cache reads. Nothing but the
// scheduler's event handlers reads these informers, and they hand the
// objects only to the hints of the events registered here.
//
// Call it after the scheduler is set up (which made the informers, if a
// profile runs this plugin) and before the factory starts.
func TrimGroupEvents(rt *pluginrt.Runtime, profiles profile.Map, f dynamicinformer.DynamicSharedInformerFactory) error {
	if f == nil || !runsIn(rt, profiles) {
		// No profile registered the events: asking the factory for the
		// informers would make them, and watch for nothing.
		return nil
	}
	for _, r := range []fwk.EventResource{podGroupResource, compositeResource} {
		gvr, _ := schema.ParseResourceArg(string(r))
		if err := f.ForResource(*gvr).Informer().SetTransform(eventMetadata); err != nil {
			return fmt.Errorf("trim the scheduler's informer of %s: %w", r, err)
		}
	}
	return nil
}

func runsIn(rt *pluginrt.Runtime, profiles profile.Map) bool {
	for _, f := range profiles {
		if _, ok := rt.Plugin(f, Name); ok {
			return true
		}
	}
	return false
}

// eventMetadata keeps of an unstructured object what sameNamespace and
// the informer use: its identity, namespace, generation and version.
// Tombstones and other types pass unchanged.
func eventMetadata(obj any) (any, error) {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return obj, nil
	}
	out := &unstructured.Unstructured{Object: map[string]any{}}
	out.SetAPIVersion(u.GetAPIVersion())
	out.SetKind(u.GetKind())
	out.SetNamespace(u.GetNamespace())
	out.SetName(u.GetName())
	out.SetUID(u.GetUID())
	out.SetGeneration(u.GetGeneration())
	out.SetResourceVersion(u.GetResourceVersion())
	return out, nil
}
