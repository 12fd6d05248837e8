package topology

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	corelisters "k8s.io/client-go/listers/core/v1"
	restclient "k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/backend/cache"

	v1alpha1 "github.com/phalanx-sched/phalanx/apis/scheduling/v1alpha1"
	phalanxlisters "github.com/phalanx-sched/phalanx/pkg/generated/listers/scheduling/v1alpha1"
	"github.com/phalanx-sched/phalanx/pkg/groupcache"
	"github.com/phalanx-sched/phalanx/pkg/groups"
	"github.com/phalanx-sched/phalanx/pkg/groupstatus"
	"github.com/phalanx-sched/phalanx/pkg/placement"
	"github.com/phalanx-sched/phalanx/pkg/reservation"
)

// The labels of the test cluster's nodes: every node is in zone-0, and
// racks hold two nodes each.
const (
	testRackKey = "topology.phalanx.dev/rack"
	testZoneKey = "topology.phalanx.dev/zone"
)

// activations is the part of the framework a reservation touches: it
// activates the pods a hold turned away, which these tests do not follow.
type activations struct{ fwk.Handle }

func (activations) Activate(klog.Logger, map[string]*corev1.Pod) {}

// resvWorld is a cluster of full racks and a scheduler with reservations
// on, whose clock the test moves. Every node runs a 4-cpu pod of no group,
// so a gang of two 4-cpu pods fits no rack until those end.
type resvWorld struct {
	t     *testing.T
	ctx   context.Context
	now   time.Time
	args  reservation.Args
	fed   *groupcache.Fed
	pgs   toolscache.Indexer
	nodes corelisters.NodeLister
	names []string
	infos []fwk.NodeInfo
	r     *reserver
	// made are the PodGroups and pods created, by group name.
	made map[string]madeGang
}

type madeGang struct {
	pg   *v1alpha1.PodGroup
	pods []*corev1.Pod
}

func newResvWorld(t *testing.T, racks int, args reservation.Args) *resvWorld {
	t.Helper()
	require.NoError(t, args.Default())
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	w := &resvWorld{
		t: t, ctx: ctx, args: args,
		now:  time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC),
		fed:  groupcache.NewFed(),
		pgs:  toolscache.NewIndexer(toolscache.MetaNamespaceKeyFunc, toolscache.Indexers{toolscache.NamespaceIndex: toolscache.MetaNamespaceIndexFunc}),
		made: map[string]madeGang{},
	}
	w.fed.PodGroups = phalanxlisters.NewPodGroupLister(w.pgs)
	nodeIndex := toolscache.NewIndexer(toolscache.MetaNamespaceKeyFunc, toolscache.Indexers{})
	var nodes []*corev1.Node
	var fillers []*corev1.Pod
	for rack := range racks {
		for i := range 2 {
			n := &corev1.Node{
				ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("r%d-n%d", rack, i), Labels: map[string]string{
					testRackKey: fmt.Sprintf("rack-%d", rack), testZoneKey: "zone-0",
				}},
				Status: corev1.NodeStatus{Allocatable: corev1.ResourceList{
					corev1.ResourceCPU: resource.MustParse("4"), corev1.ResourceMemory: resource.MustParse("8Gi"), corev1.ResourcePods: resource.MustParse("110"),
				}},
			}
			require.NoError(t, nodeIndex.Add(n))
			nodes = append(nodes, n)
			w.names = append(w.names, n.Name)
			fillers = append(fillers, testPod("fill-"+n.Name, "4", n.Name))
		}
	}
	w.nodes = corelisters.NewNodeLister(nodeIndex)
	infos, err := cache.NewSnapshot(fillers, nodes).NodeInfos().List()
	require.NoError(t, err)
	w.infos = infos
	w.restart()
	return w
}

// restart replaces the scheduler by a new one that knows nothing but what
// the API objects say, and restores holds as a new leader does.
func (w *resvWorld) restart() {
	w.t.Helper()
	status, err := groupstatus.New(w.ctx, w.fed, &restclient.Config{Host: "http://127.0.0.1:1"})
	require.NoError(w.t, err)
	tp := &Topology{handle: activations{}, groups: w.fed, status: status, plans: map[groups.Key]*plan{}}
	w.r = newReserver(tp, w.args, w.nodes, nil)
	w.r.now = func() time.Time { return w.now }
	tp.resv = w.r
	w.r.restore(klog.Background())
}

// gang creates PodGroup name (minimum 2, topology key key) with two
// pending 4-cpu members, all created at created, and status st.
func (w *resvWorld) gang(name, key string, created time.Time, annotations map[string]string, st ...v1alpha1.PodGroupStatus) groups.Key {
	w.t.Helper()
	return w.gangIn("", name, key, created, annotations, st...)
}

// gangIn is gang as a child of CompositePodGroup parent ("": none), which
// it creates (a gang of one child) when it does not exist yet.
func (w *resvWorld) gangIn(parent, name, key string, created time.Time, annotations map[string]string, st ...v1alpha1.PodGroupStatus) groups.Key {
	w.t.Helper()
	pg := &v1alpha1.PodGroup{ObjectMeta: metav1.ObjectMeta{
		Namespace: "ns", Name: name, UID: types.UID(fmt.Sprintf("%s-%d", name, created.UnixNano())),
		CreationTimestamp: metav1.NewTime(created), Annotations: annotations,
	}}
	if parent != "" {
		cpg := &v1alpha1.CompositePodGroup{ObjectMeta: metav1.ObjectMeta{
			Namespace: "ns", Name: parent, UID: types.UID(parent), CreationTimestamp: metav1.NewTime(created),
		}}
		cpg.Spec.SchedulingPolicy.Gang = &v1alpha1.CompositeGangSchedulingPolicy{MinGroupCount: 1}
		w.fed.OnComposite(cpg)
		pg.Spec.ParentCompositePodGroupName = &parent
	}
	pg.Spec.SchedulingPolicy.Gang = &v1alpha1.GangSchedulingPolicy{MinCount: 2}
	pg.Spec.SchedulingConstraints = &v1alpha1.PodGroupSchedulingConstraints{Topology: []v1alpha1.TopologyConstraint{{Key: key}}}
	for _, s := range st {
		pg.Status = s
	}
	require.NoError(w.t, w.pgs.Add(pg))
	w.fed.OnPodGroup(pg)
	made := madeGang{pg: pg}
	for i := range 2 {
		p := testPod(fmt.Sprintf("%s-%d", name, i), "4", "")
		p.UID = types.UID(fmt.Sprintf("%s-%s", pg.UID, p.Name))
		p.CreationTimestamp = metav1.NewTime(created)
		p.Labels = map[string]string{v1alpha1.PodGroupLabel: name}
		w.fed.OnPod(p)
		made.pods = append(made.pods, p)
	}
	w.made[name] = made
	return groups.Key{Dialect: groups.Phalanx, Kind: groups.PodGroupKind, Namespace: "ns", Name: name}
}

// deleteGang deletes PodGroup name and its pods, as a tenant would.
func (w *resvWorld) deleteGang(name string) {
	w.t.Helper()
	made := w.made[name]
	for _, p := range made.pods {
		w.fed.OnPodDeleted(p)
	}
	require.NoError(w.t, w.pgs.Delete(made.pg))
	w.fed.OnGroupDeleted(made.pg, groups.PodGroupKind)
	w.r.forget(groups.Key{Dialect: groups.Phalanx, Kind: groups.PodGroupKind, Namespace: "ns", Name: name})
	delete(w.made, name)
}

// planFails tells the scheduler that group k's plan failed the way a gang
// of two 4-cpu pods fails on full racks: every rack is short 8 cpu.
func (w *resvWorld) planFails(k groups.Key) {
	w.t.Helper()
	tree, err := w.fed.TreeOf(k)
	require.NoError(w.t, err)
	inf := &placement.Infeasible{Group: k.Name, TopologyKey: testRackKey, Need: 2}
	for rack := range len(w.names) / 2 {
		inf.Domains = append(inf.Domains, placement.DomainFit{
			Domain: fmt.Sprintf("rack-%d", rack), Need: 2, Short: placement.Resources{corev1.ResourceCPU: 8000},
		})
	}
	w.r.consider(klog.Background(), tree, inf, w.infos)
}

// after moves the clock and lets the scheduler's sweep run.
func (w *resvWorld) after(d time.Duration) {
	w.now = w.now.Add(d)
	w.r.sweep()
}

// refused lists the nodes a plain pod (priority 0, no runtime bound, in no
// group) is turned away from because they are held.
func (w *resvWorld) refused() []string {
	pod := podWith(0, nil)
	var out []string
	for _, n := range w.names {
		if st := w.r.filter(pod, groups.Key{}, false, n); st != nil {
			out = append(out, n)
		}
	}
	return out
}

// holding is a group's status as the scheduler writes it while it holds
// key=domain since since, and as anyone allowed to update the status can
// write it.
func holding(key, domain string, since time.Time) v1alpha1.PodGroupStatus {
	return v1alpha1.PodGroupStatus{
		Conditions: []metav1.Condition{{
			Type: reservation.ConditionReserved, Status: metav1.ConditionTrue, Reason: reservation.ReasonHolding, LastTransitionTime: metav1.NewTime(since),
			Message: fmt.Sprintf("holds %s=%s (2 nodes; free nothing; short 8 cpu; expected to fit at unknown)", key, domain),
		}},
		Reservation: &v1alpha1.GroupReservation{TopologyKey: key, Domain: domain, Since: metav1.NewTime(since)},
	}
}

func podWith(prio int32, ads *int64) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns"}, Spec: corev1.PodSpec{Priority: &prio, ActiveDeadlineSeconds: ads}}
}
