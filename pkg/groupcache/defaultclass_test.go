package groupcache

import (
	"testing"
	"time"

	schedulingv1 "k8s.io/api/scheduling/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	schedulinglisters "k8s.io/client-go/listers/scheduling/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/phalanx-sched/phalanx/pkg/groups"
)

func priorityClass(name string, value int32, globalDefault bool, created time.Time) *schedulingv1.PriorityClass {
	return &schedulingv1.PriorityClass{
		ObjectMeta:    metav1.ObjectMeta{Name: name, CreationTimestamp: metav1.NewTime(created)},
		Value:         value,
		GlobalDefault: globalDefault,
	}
}

// noList fails the test if a group's priority is resolved by listing every
// PriorityClass.
type noList struct {
	schedulinglisters.PriorityClassLister
	t *testing.T
}

func (l noList) List(labels.Selector) ([]*schedulingv1.PriorityClass, error) {
	l.t.Fatal("PriorityClasses were listed to find the globalDefault class")
	return nil, nil
}

// A group with neither priority nor class gets the globalDefault class,
// as PriorityClasses come and go, without a list per resolution.
func TestGlobalDefaultFollowsPriorityClassEvents(t *testing.T) {
	t0 := time.Now()
	root := groups.Info{Key: groups.Key{Kind: groups.PodGroupKind, Namespace: "ns", Name: "g"}}
	classes := NewPriorityClasses(noList{t: t})
	h := classes.Handler()
	resolve := func() int32 {
		t.Helper()
		prio, _, err := groups.ResolvePriority(root, classes)
		if err != nil {
			t.Fatal(err)
		}
		return prio
	}
	if got := resolve(); got != 0 {
		t.Fatalf("no globalDefault class: priority %d, want 0", got)
	}
	older := priorityClass("older", 5, true, t0)
	newer := priorityClass("newer", 9, true, t0.Add(time.Minute))
	h.OnAdd(newer, false)
	h.OnAdd(older, false)
	if got := resolve(); got != 5 {
		t.Fatalf("two globalDefault classes: priority %d, want the older one's 5", got)
	}
	notDefault := older.DeepCopy()
	notDefault.GlobalDefault = false
	h.OnUpdate(older, notDefault)
	if got := resolve(); got != 9 {
		t.Fatalf("older class no longer default: priority %d, want 9", got)
	}
	h.OnDelete(cache.DeletedFinalStateUnknown{Key: "newer", Obj: newer})
	if got := resolve(); got != 0 {
		t.Fatalf("every default class deleted: priority %d, want 0", got)
	}
}
