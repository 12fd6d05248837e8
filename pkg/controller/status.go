package controller

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"

	"github.com/phalanx-sched/phalanx/apis/scheduling/v1alpha1"
	"github.com/phalanx-sched/phalanx/pkg/generated/clientset/versioned"
	schedinformers "github.com/phalanx-sched/phalanx/pkg/generated/informers/externalversions/scheduling/v1alpha1"
	listers "github.com/phalanx-sched/phalanx/pkg/generated/listers/scheduling/v1alpha1"
)

// statusController keeps the member counters of every PodGroup's status
// (members, scheduled, running) equal to what its pods say. It writes
// nothing else: the conditions belong to the scheduler.
type statusController struct {
	loop
	client    versioned.Interface
	podGroups listers.PodGroupLister
	pods      cache.Indexer
	// delay coalesces a burst of pod events into one write per group.
	delay time.Duration
}

func newStatusController(client versioned.Interface, podGroups schedinformers.PodGroupInformer,
	pods cache.SharedIndexInformer, delay time.Duration) (*statusController, error) {
	c := &statusController{
		client:    client,
		podGroups: podGroups.Lister(),
		pods:      pods.GetIndexer(),
		delay:     delay,
	}
	c.loop = newLoop("podgroup-status", c.sync)

	if _, err := podGroups.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		// A group created after its pods starts with their count.
		AddFunc: func(obj interface{}) {
			if key, err := cache.ObjectToName(obj); err == nil {
				c.queue.Add(key)
			}
		},
	}); err != nil {
		return nil, fmt.Errorf("add PodGroup handler: %w", err)
	}
	if _, err := pods.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj interface{}) { c.podChanged(nil, podFromObj(obj)) },
		UpdateFunc: func(old, cur interface{}) {
			o, n := podFromObj(old), podFromObj(cur)
			if counted(o) != counted(n) || podGroupOfPod(o) != podGroupOfPod(n) {
				c.podChanged(o, n)
			}
		},
		DeleteFunc: func(obj interface{}) { c.podChanged(podFromObj(obj), nil) },
	}); err != nil {
		return nil, fmt.Errorf("add Pod handler: %w", err)
	}
	return c, nil
}

// podChanged schedules a recount of the groups the pod left and joined.
// AddAfter keeps a key that is already waiting at its earlier time, so all
// changes within one delay window end in one write.
func (c *statusController) podChanged(pods ...*corev1.Pod) {
	for _, pod := range pods {
		if pod == nil {
			continue
		}
		if pg := podGroupOfPod(pod); pg != "" {
			c.queue.AddAfter(cache.ObjectName{Namespace: pod.Namespace, Name: pg}, c.delay)
		}
	}
}

// counts are the status counters of one PodGroup.
type counts struct {
	Members   int32 `json:"members"`
	Scheduled int32 `json:"scheduled"`
	Running   int32 `json:"running"`
}

// counted is what one pod contributes. A pod that is terminating or has
// finished is not a member: it will not run again, and a gang counts the
// pods that can run together.
func counted(pod *corev1.Pod) counts {
	if pod == nil || pod.DeletionTimestamp != nil || podFinished(pod) {
		return counts{}
	}
	c := counts{Members: 1}
	if pod.Spec.NodeName != "" {
		c.Scheduled = 1
	}
	if pod.Status.Phase == corev1.PodRunning {
		c.Running = 1
	}
	return c
}

func (c *statusController) sync(ctx context.Context, key cache.ObjectName) error {
	pg, err := c.podGroups.PodGroups(key.Namespace).Get(key.Name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	objs, err := c.pods.ByIndex(podsByPodGroupIndex, key.String())
	if err != nil {
		return err
	}
	var want counts
	for _, obj := range objs {
		p := counted(obj.(*corev1.Pod))
		want.Members += p.Members
		want.Scheduled += p.Scheduled
		want.Running += p.Running
	}
	if want == (counts{pg.Status.Members, pg.Status.Scheduled, pg.Status.Running}) {
		return nil
	}
	return c.write(ctx, pg, want)
}

// write sets the counters with a JSON merge patch of the status
// subresource. The patch names only the three counters (zeros included, so
// a counter can fall back to 0) and carries no resourceVersion: it cannot
// conflict with, and never touches, the conditions the scheduler writes.
// The scheduler's own read-modify-write of the conditions, in turn, either
// reads our counters or fails its precondition and retries.
func (c *statusController) write(ctx context.Context, pg *v1alpha1.PodGroup, want counts) error {
	data, err := json.Marshal(map[string]counts{"status": want})
	if err != nil {
		return err
	}
	_, err = c.client.SchedulingV1alpha1().PodGroups(pg.Namespace).Patch(ctx, pg.Name, types.MergePatchType, data,
		metav1.PatchOptions{FieldManager: v1alpha1.ControllerName}, "status")
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("write counters of PodGroup %s/%s: %w", pg.Namespace, pg.Name, err)
	}
	return nil
}
