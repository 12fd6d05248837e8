// Package groupstatus writes PodGroup and CompositePodGroup conditions for
// the scheduler's plugins, off the scheduling path.
package groupstatus

import (
	"context"
	"fmt"
	"sync"
	"time"

	"golang.org/x/time/rate"
	corev1 "k8s.io/api/core/v1"
	schedv1alpha3 "k8s.io/api/scheduling/v1alpha3"
	schedv1beta1 "k8s.io/api/scheduling/v1beta1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	restclient "k8s.io/client-go/rest"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	xv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	v1alpha1 "github.com/phalanx-sched/phalanx/apis/scheduling/v1alpha1"
	"github.com/phalanx-sched/phalanx/pkg/generated/clientset/versioned"
	"github.com/phalanx-sched/phalanx/pkg/groupcache"
	"github.com/phalanx-sched/phalanx/pkg/groups"
)

// Writer writes group conditions off the scheduling path. Callers
// state the conditions they want; writes for one group coalesce while
// queued, unchanged conditions are never written, and an overall token
// bucket bounds the write rate so a storm of failing gangs cannot flood the
// API server. A scheduling cycle never waits for it.
type Writer struct {
	client versioned.Interface
	// kube writes upstream scheduling.k8s.io groups' conditions.
	kube kubernetes.Interface
	// fed's listers give the object to update, saving a GET per write; a
	// conflict (the cache was behind) falls back to a GET.
	fed     *groupcache.Fed
	limiter *rate.Limiter
	queue   workqueue.TypedRateLimitingInterface[groups.Key]

	// events tells scheduler-plugins' PodGroups, which have no
	// conditions, what their Schedulable condition would say; nil records
	// nothing.
	events record.EventRecorder

	mu      sync.Mutex
	desired map[groups.Key]map[string]metav1.Condition
	// reservations are the desired status.reservation of Phalanx's groups
	// (a nil value clears it); a group absent here keeps what it has.
	reservations map[groups.Key]*v1alpha1.GroupReservation
	// announced is the Schedulable condition last told in an event, per
	// scheduler-plugins group.
	announced map[groups.Key]metav1.Condition
}

// settleDelay is how long a group's conditions may keep changing before
// they are written. A gang that completes at once goes from "waiting for
// pods" to "scheduled" within it, and only the outcome is written.
const settleDelay = 500 * time.Millisecond

func newWriter(ctx context.Context, client versioned.Interface, kube kubernetes.Interface, fed *groupcache.Fed) *Writer {
	// Failed writes back off per group; every write takes a token from one
	// bucket, so a storm of failing gangs cannot flood the API server.
	limiter := workqueue.NewTypedItemExponentialFailureRateLimiter[groups.Key](100*time.Millisecond, 30*time.Second)
	w := &Writer{
		client:  client,
		kube:    kube,
		fed:     fed,
		limiter: rate.NewLimiter(rate.Limit(50), 100),
		queue:   workqueue.NewTypedRateLimitingQueueWithConfig(limiter, workqueue.TypedRateLimitingQueueConfig[groups.Key]{Name: "phalanx-group-status"}),
		desired: map[groups.Key]map[string]metav1.Condition{},

		reservations: map[groups.Key]*v1alpha1.GroupReservation{},
		announced:    map[groups.Key]metav1.Condition{},
	}
	for i := 0; i < 2; i++ {
		go w.run(ctx)
	}
	go func() {
		<-ctx.Done()
		w.queue.ShutDown()
	}()
	return w
}

// Set records the desired conditions of a group object. Label groups have
// no object; their story is told in pod events. scheduler-plugins'
// PodGroups have no conditions (their status is phases and counts, which
// phalanx-controller keeps): what their Schedulable condition would say is
// told in events on the PodGroup instead, once per change, after the same
// settling delay.
func (w *Writer) Set(k groups.Key, conds ...metav1.Condition) {
	if k.Kind == groups.LabelKind {
		return
	}
	conds = withInitiallyScheduled(conds)
	w.mu.Lock()
	cur := w.desired[k]
	if cur == nil {
		cur = map[string]metav1.Condition{}
		w.desired[k] = cur
	}
	changed := false
	for _, c := range conds {
		old, ok := cur[c.Type]
		if ok && old.Status == c.Status && old.Reason == c.Reason && old.Message == c.Message {
			continue
		}
		cur[c.Type] = c
		changed = true
	}
	w.mu.Unlock()
	if changed {
		w.queue.AddAfter(k, settleDelay)
	}
}

// SetReservation records the desired reservation record of Phalanx's
// group k (nil: none), written with its conditions, in the same update.
// Other dialects have no such field and keep only the condition.
func (w *Writer) SetReservation(k groups.Key, r *v1alpha1.GroupReservation) {
	if k.Dialect != groups.Phalanx || k.Kind == groups.LabelKind {
		return
	}
	w.mu.Lock()
	old, ok := w.reservations[k]
	changed := !ok || !sameReservation(old, r)
	w.reservations[k] = r.DeepCopy()
	w.mu.Unlock()
	if changed {
		w.queue.AddAfter(k, settleDelay)
	}
}

// sameReservation compares records as the API keeps them: times to the
// second.
func sameReservation(a, b *v1alpha1.GroupReservation) bool {
	if a == nil || b == nil {
		return a == b
	}
	sameTime := func(x, y *metav1.Time) bool {
		if x == nil || y == nil {
			return x == y
		}
		return x.Unix() == y.Unix()
	}
	return a.TopologyKey == b.TopologyKey && a.Domain == b.Domain && sameTime(&a.Since, &b.Since) && sameTime(a.Expired, b.Expired)
}

// setReservation sets want on *cur (when want holds a desire) and reports
// whether it changed.
func setReservation(cur **v1alpha1.GroupReservation, want *v1alpha1.GroupReservation, wanted bool) bool {
	if !wanted || sameReservation(*cur, want) {
		return false
	}
	*cur = want.DeepCopy()
	return true
}

// Forget drops state of a deleted group.
func (w *Writer) Forget(k groups.Key) {
	w.mu.Lock()
	delete(w.desired, k)
	delete(w.reservations, k)
	delete(w.announced, k)
	w.mu.Unlock()
}

func (w *Writer) run(ctx context.Context) {
	for {
		k, quit := w.queue.Get()
		if quit {
			return
		}
		if w.limiter.Wait(ctx) != nil {
			w.queue.Done(k)
			return
		}
		err := w.write(ctx, k)
		switch {
		case err == nil || apierrors.IsNotFound(err):
			w.queue.Forget(k)
		case ctx.Err() == nil:
			klog.FromContext(ctx).V(3).Info("Retrying group status write", "group", k, "err", err)
			w.queue.AddRateLimited(k)
		}
		w.queue.Done(k)
	}
}

// snapshot returns k's desired conditions and reservation record (wanted
// false: leave the record as it is).
func (w *Writer) snapshot(k groups.Key) (conds []metav1.Condition, resv *v1alpha1.GroupReservation, wanted bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, c := range w.desired[k] {
		conds = append(conds, c)
	}
	resv, wanted = w.reservations[k]
	return conds, resv.DeepCopy(), wanted
}

// withInitiallyScheduled adds, for a group that cannot be placed, the
// PodGroupInitiallyScheduled=False condition upstream writes before a
// group's first success, with the same reason and message. Tools written
// against upstream's API watch that condition, not Schedulable.
func withInitiallyScheduled(conds []metav1.Condition) []metav1.Condition {
	for _, c := range conds {
		if c.Type == v1alpha1.PodGroupInitiallyScheduled {
			return conds
		}
	}
	for _, c := range conds {
		if c.Type == v1alpha1.PodGroupSchedulable && c.Status == metav1.ConditionFalse &&
			(c.Reason == v1alpha1.ReasonUnschedulable || c.Reason == v1alpha1.ReasonSchedulerError) {
			d := c
			d.Type = v1alpha1.PodGroupInitiallyScheduled
			return append(conds, d)
		}
	}
	return conds
}

// merge sets want on conds and reports whether anything changed.
// PodGroupInitiallyScheduled never goes back from True: it records the
// group's first success, which a later failure (a replacement pod that
// does not fit) does not undo.
func merge(conds *[]metav1.Condition, want []metav1.Condition) bool {
	changed := false
	for _, c := range want {
		if old := meta.FindStatusCondition(*conds, c.Type); old != nil && c.Type == v1alpha1.PodGroupInitiallyScheduled &&
			old.Status == metav1.ConditionTrue && c.Status != metav1.ConditionTrue {
			continue
		}
		if old := meta.FindStatusCondition(*conds, c.Type); old != nil &&
			old.Status == c.Status && old.Reason == c.Reason && old.Message == c.Message {
			continue
		}
		meta.SetStatusCondition(conds, c)
		changed = true
	}
	return changed
}

func (w *Writer) write(ctx context.Context, k groups.Key) error {
	want, resv, wanted := w.snapshot(k)
	if len(want) == 0 && !wanted {
		return nil
	}
	if k.Dialect == groups.Coscheduling {
		w.announce(k, want)
		return nil
	}
	if k.Dialect == groups.Native {
		err := w.writeNative(ctx, k, want, true)
		if apierrors.IsConflict(err) {
			err = w.writeNative(ctx, k, want, false)
		}
		return err
	}
	err := w.writeFrom(ctx, k, want, resv, wanted, true)
	if apierrors.IsConflict(err) {
		err = w.writeFrom(ctx, k, want, resv, wanted, false)
	}
	return err
}

// writeFrom merges want into a Phalanx group's conditions, and resv into
// its reservation record when wanted, and writes them if they changed,
// starting from the informer's copy when cached is true and the cache has
// the object, else from a GET.
func (w *Writer) writeFrom(ctx context.Context, k groups.Key, want []metav1.Condition, resv *v1alpha1.GroupReservation, wanted, cached bool) error {
	api := w.client.SchedulingV1alpha1()
	switch k.Kind {
	case groups.PodGroupKind:
		var pg *v1alpha1.PodGroup
		if cached && w.fed != nil && w.fed.PodGroups != nil {
			if obj, err := w.fed.PodGroups.PodGroups(k.Namespace).Get(k.Name); err == nil {
				pg = obj.DeepCopy()
			}
		}
		if pg == nil {
			var err error
			if pg, err = api.PodGroups(k.Namespace).Get(ctx, k.Name, metav1.GetOptions{}); err != nil {
				return err
			}
		}
		changed := merge(&pg.Status.Conditions, want)
		if !setReservation(&pg.Status.Reservation, resv, wanted) && !changed {
			return nil
		}
		_, err := api.PodGroups(k.Namespace).UpdateStatus(ctx, pg, metav1.UpdateOptions{})
		return err
	case groups.CompositeKind:
		var cpg *v1alpha1.CompositePodGroup
		if cached && w.fed != nil && w.fed.CompositePodGroups != nil {
			if obj, err := w.fed.CompositePodGroups.CompositePodGroups(k.Namespace).Get(k.Name); err == nil {
				cpg = obj.DeepCopy()
			}
		}
		if cpg == nil {
			var err error
			if cpg, err = api.CompositePodGroups(k.Namespace).Get(ctx, k.Name, metav1.GetOptions{}); err != nil {
				return err
			}
		}
		changed := merge(&cpg.Status.Conditions, want)
		if !setReservation(&cpg.Status.Reservation, resv, wanted) && !changed {
			return nil
		}
		_, err := api.CompositePodGroups(k.Namespace).UpdateStatus(ctx, cpg, metav1.UpdateOptions{})
		return err
	}
	return nil
}

// writeNative is writeFrom for upstream's PodGroups (v1beta1) and
// CompositePodGroups (v1alpha3).
func (w *Writer) writeNative(ctx context.Context, k groups.Key, want []metav1.Condition, cached bool) error {
	if w.kube == nil {
		return nil
	}
	switch k.Kind {
	case groups.PodGroupKind:
		api := w.kube.SchedulingV1beta1().PodGroups(k.Namespace)
		var pg *schedv1beta1.PodGroup
		if l := w.fed.NativePodGroups(); cached && l != nil {
			if obj, err := l.PodGroups(k.Namespace).Get(k.Name); err == nil {
				pg = obj.DeepCopy()
			}
		}
		if pg == nil {
			var err error
			if pg, err = api.Get(ctx, k.Name, metav1.GetOptions{}); err != nil {
				return err
			}
		}
		if !merge(&pg.Status.Conditions, stamp(want, pg.Generation)) {
			return nil
		}
		_, err := api.UpdateStatus(ctx, pg, metav1.UpdateOptions{})
		return err
	case groups.CompositeKind:
		api := w.kube.SchedulingV1alpha3().CompositePodGroups(k.Namespace)
		var cpg *schedv1alpha3.CompositePodGroup
		if l := w.fed.NativeComposites(); cached && l != nil {
			if obj, err := l.CompositePodGroups(k.Namespace).Get(k.Name); err == nil {
				cpg = obj.DeepCopy()
			}
		}
		if cpg == nil {
			var err error
			if cpg, err = api.Get(ctx, k.Name, metav1.GetOptions{}); err != nil {
				return err
			}
		}
		if !merge(&cpg.Status.Conditions, stamp(want, cpg.Generation)) {
			return nil
		}
		_, err := api.UpdateStatus(ctx, cpg, metav1.UpdateOptions{})
		return err
	}
	return nil
}

// announce records an event on scheduler-plugins PodGroup k when its
// Schedulable condition changed since the last event: a wait (Normal), a
// refusal (Warning) or the group's minimum bound (Normal), with the
// reason and message a Phalanx PodGroup's condition would carry.
func (w *Writer) announce(k groups.Key, want []metav1.Condition) {
	if w.events == nil {
		return
	}
	var c *metav1.Condition
	for i := range want {
		if want[i].Type == v1alpha1.PodGroupSchedulable {
			c = &want[i]
		}
	}
	if c == nil {
		return
	}
	w.mu.Lock()
	last, told := w.announced[k]
	if told && last.Status == c.Status && last.Reason == c.Reason && last.Message == c.Message {
		w.mu.Unlock()
		return
	}
	w.announced[k] = *c
	w.mu.Unlock()
	ref := &corev1.ObjectReference{APIVersion: xv1alpha1.SchemeGroupVersion.String(), Kind: "PodGroup", Namespace: k.Namespace, Name: k.Name}
	if w.fed != nil {
		if info, ok := w.fed.Get(k); ok {
			ref.UID = info.UID
		}
	}
	typ := corev1.EventTypeWarning
	if c.Status == metav1.ConditionTrue || c.Reason == v1alpha1.ReasonWaitingForPods {
		typ = corev1.EventTypeNormal
	}
	w.events.Event(ref, typ, c.Reason, c.Message)
}

// stamp sets observedGeneration, which upstream's own writer sets on its
// PodGroup conditions and tools comparing the two may read.
func stamp(conds []metav1.Condition, gen int64) []metav1.Condition {
	out := make([]metav1.Condition, len(conds))
	for i, c := range conds {
		c.ObservedGeneration = gen
		out[i] = c
	}
	return out
}

// New builds the Writer of the scheduler that owns fed, until ctx ends. A
// scheduler builds one for all its profiles (the plugins' runtime,
// pkg/plugins/pluginrt, holds it), so their writes coalesce into the same
// queue instead of racing.
func New(ctx context.Context, fed *groupcache.Fed, cfg *restclient.Config) (*Writer, error) {
	c := restclient.CopyConfig(cfg)
	c.ContentType = "application/json"
	c.AcceptContentTypes = "application/json"
	client, err := versioned.NewForConfig(c)
	if err != nil {
		return nil, fmt.Errorf("group status client: %w", err)
	}
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("group status client: %w", err)
	}
	w := newWriter(ctx, client, kube, fed)
	// Events on scheduler-plugins' PodGroups go through a recorder of
	// their own: the scheduler's events.k8s.io recorder folds later events
	// of one reason into the first one's series and keeps its message, so a
	// group that first waited for pods and then for capacity would go on
	// saying it waits for pods.
	broadcaster := record.NewBroadcaster(record.WithContext(ctx))
	broadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: kube.CoreV1().Events("")})
	w.events = broadcaster.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "phalanx-scheduler"})
	go func() {
		<-ctx.Done()
		broadcaster.Shutdown()
	}()
	return w, nil
}

// Condition builds a condition stamped now.
func Condition(typ string, status metav1.ConditionStatus, reason, msg string) metav1.Condition {
	return metav1.Condition{Type: typ, Status: status, Reason: reason, Message: msg, LastTransitionTime: metav1.Now()}
}
