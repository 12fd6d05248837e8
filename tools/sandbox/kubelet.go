package sandbox

import (
	"context"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
)

// RuntimeAnnotation on a pod tells the node agent how long it "runs": that
// many seconds after it is marked Running it is marked Succeeded. A pod
// whose activeDeadlineSeconds ends first is marked Failed
// (DeadlineExceeded) then, as a kubelet does. Pods with neither run until
// deleted.
const RuntimeAnnotation = "sandbox.phalanx.dev/runtime-seconds"

// IgnoreSIGTERMAnnotation set to "true" on a pod makes it behave as a
// process that ignores SIGTERM: once deleted, it stays Terminating for its
// whole grace period (until its deletionTimestamp, which the API server
// sets to the delete plus terminationGracePeriodSeconds), and the node
// agent removes it then, as a kubelet kills the containers when the grace
// period ends. Any other pod "exits" at once on deletion, so that tests
// which do not care about termination do not wait for it.
const IgnoreSIGTERMAnnotation = "sandbox.phalanx.dev/ignore-sigterm"

// nodeAgent is the sandbox's stand-in for every kubelet: it never runs a
// container, it only reports bound pods as Running so that status counters
// and "running" conditions are real, finishes pods whose runtime ends
// (RuntimeAnnotation, activeDeadlineSeconds), and finishes graceful
// deletions the way a kubelet would once containers stop: at once, or when
// the grace period ends for a pod that ignores SIGTERM
// (IgnoreSIGTERMAnnotation).
type nodeAgent struct {
	client kubernetes.Interface
	queue  workqueue.TypedRateLimitingInterface[cache.ObjectName]
	pods   cache.Indexer
}

func startNodeAgent(ctx context.Context, client kubernetes.Interface) {
	factory := informers.NewSharedInformerFactory(client, 0)
	inf := factory.Core().V1().Pods().Informer()
	a := &nodeAgent{
		client: client,
		queue:  workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[cache.ObjectName]()),
		pods:   inf.GetIndexer(),
	}
	enqueue := func(obj interface{}) {
		if p, ok := obj.(*corev1.Pod); ok && p.Spec.NodeName != "" && (p.Status.Phase == corev1.PodPending || p.DeletionTimestamp != nil || timed(p)) {
			a.queue.Add(cache.MetaObjectToName(p))
		}
	}
	_, _ = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    enqueue,
		UpdateFunc: func(_, obj interface{}) { enqueue(obj) },
	})
	factory.Start(ctx.Done())
	go func() {
		<-ctx.Done()
		a.queue.ShutDown()
		factory.Shutdown()
	}()
	for i := 0; i < 8; i++ {
		go wait.UntilWithContext(ctx, a.work, time.Second)
	}
}

func (a *nodeAgent) work(ctx context.Context) {
	for {
		key, quit := a.queue.Get()
		if quit {
			return
		}
		if err := a.markRunning(ctx, key); err != nil && ctx.Err() == nil {
			klog.FromContext(ctx).V(4).Info("node agent retry", "pod", key, "err", err)
			a.queue.AddRateLimited(key)
		} else {
			a.queue.Forget(key)
		}
		a.queue.Done(key)
	}
}

func (a *nodeAgent) markRunning(ctx context.Context, key cache.ObjectName) error {
	obj, exists, err := a.pods.GetByKey(key.String())
	if err != nil || !exists {
		return err
	}
	pod := obj.(*corev1.Pod).DeepCopy()
	if pod.DeletionTimestamp != nil {
		if pod.Annotations[IgnoreSIGTERMAnnotation] == "true" {
			if wait := time.Until(pod.DeletionTimestamp.Time); wait > 0 {
				// Still running its grace period out: seen again when it
				// ends, or at a new delete that shortens it.
				a.queue.AddAfter(key, wait)
				return nil
			}
		}
		// A real kubelet stops the containers, then removes the pod for good.
		zero := int64(0)
		err := a.client.CoreV1().Pods(pod.Namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{
			GracePeriodSeconds: &zero,
			Preconditions:      &metav1.Preconditions{UID: &pod.UID},
		})
		if err != nil && (isGone(err) || apierrors.IsConflict(err)) {
			return nil
		}
		return err
	}
	if pod.Status.Phase == corev1.PodRunning {
		return a.finishIfDone(ctx, key, pod)
	}
	if pod.Status.Phase != corev1.PodPending {
		return nil
	}
	now := metav1.Now()
	pod.Status.Phase = corev1.PodRunning
	pod.Status.StartTime = &now
	pod.Status.Conditions = append(pod.Status.Conditions,
		corev1.PodCondition{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: now},
		corev1.PodCondition{Type: corev1.ContainersReady, Status: corev1.ConditionTrue, LastTransitionTime: now},
	)
	_, err = a.client.CoreV1().Pods(pod.Namespace).UpdateStatus(ctx, pod, metav1.UpdateOptions{})
	if err != nil && isGone(err) {
		return nil
	}
	if err == nil {
		if end, _, ok := runtimeEnd(pod); ok {
			a.queue.AddAfter(key, time.Until(end))
		}
	}
	return err
}

// timed: a running pod the agent finishes when its runtime ends.
func timed(p *corev1.Pod) bool {
	_, _, ok := runtimeEnd(p)
	return p.Status.Phase == corev1.PodRunning && ok
}

// runtimeEnd is when a running pod finishes, and whether it succeeds.
func runtimeEnd(pod *corev1.Pod) (end time.Time, succeeded, ok bool) {
	if pod.Status.StartTime == nil {
		return time.Time{}, false, false
	}
	start := pod.Status.StartTime.Time
	if v, has := pod.Annotations[RuntimeAnnotation]; has {
		if secs, err := strconv.ParseFloat(v, 64); err == nil && secs >= 0 {
			end, succeeded, ok = start.Add(time.Duration(secs*float64(time.Second))), true, true
		}
	}
	if ads := pod.Spec.ActiveDeadlineSeconds; ads != nil && *ads > 0 {
		if d := start.Add(time.Duration(*ads) * time.Second); !ok || d.Before(end) {
			end, succeeded, ok = d, false, true
		}
	}
	return end, succeeded, ok
}

// finishIfDone marks a running pod whose runtime ended Succeeded (or
// Failed past its activeDeadlineSeconds), and checks again later if not
// yet.
func (a *nodeAgent) finishIfDone(ctx context.Context, key cache.ObjectName, pod *corev1.Pod) error {
	end, succeeded, ok := runtimeEnd(pod)
	if !ok {
		return nil
	}
	if wait := time.Until(end); wait > 0 {
		a.queue.AddAfter(key, wait)
		return nil
	}
	if succeeded {
		pod.Status.Phase = corev1.PodSucceeded
	} else {
		pod.Status.Phase, pod.Status.Reason = corev1.PodFailed, "DeadlineExceeded"
		pod.Status.Message = "Pod was active on the node longer than the specified deadline"
	}
	_, err := a.client.CoreV1().Pods(pod.Namespace).UpdateStatus(ctx, pod, metav1.UpdateOptions{})
	if err != nil && isGone(err) {
		return nil
	}
	return err
}

func isGone(err error) bool {
	return apierrors.IsNotFound(err) || apierrors.IsGone(err)
}
