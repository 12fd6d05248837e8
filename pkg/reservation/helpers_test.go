package reservation

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"

	"github.com/phalanx-sched/phalanx/pkg/groups"
	"github.com/phalanx-sched/phalanx/pkg/placement"
)

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func key(name string) groups.Key {
	return groups.Key{Dialect: groups.Phalanx, Kind: groups.PodGroupKind, Namespace: "ns", Name: name}
}

func gang(name string, prio int32, created int64) Gang {
	return Gang{Root: key(name), Priority: prio, Created: created}
}

// cand is a gang's request for a rack, as the plugin offers it.
func cand(name string, prio int32, created int64) Hold {
	return Hold{Gang: gang(name, prio, created), Key: "rack", Since: t0}
}

func choice(domain string, nodes ...string) Choice {
	return Choice{Domain: domain, Nodes: sets.New(nodes...)}
}

func podWith(name string, prio int32, ads *int64) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns"}, Spec: corev1.PodSpec{Priority: &prio, ActiveDeadlineSeconds: ads}}
}

func secs(v int64) *int64 { return &v }

func cpu(milli int64) placement.Resources { return placement.Resources{corev1.ResourceCPU: milli} }

// tree is a root PodGroup name, created at created, with topology key k
// and members pending (true) or bound (false), created at created too.
func tree(name, k string, created time.Time, pending ...bool) *groups.Tree {
	tr := &groups.Tree{Info: groups.Info{Key: key(name), TopologyKey: k, Created: created.UnixNano()}}
	for i, p := range pending {
		pod := podWith(fmt.Sprintf("%s-%d", name, i), 5, nil)
		pod.UID = types.UID(pod.Name)
		pod.CreationTimestamp = metav1.NewTime(created)
		st := groups.Pending
		if !p {
			st = groups.Bound
		}
		tr.Members = append(tr.Members, groups.Member{Pod: pod, State: st})
	}
	return tr
}
