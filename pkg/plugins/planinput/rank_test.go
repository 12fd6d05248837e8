package planinput

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestRankOf(t *testing.T) {
	type kv = map[string]string
	const completion = "batch.kubernetes.io/job-completion-index"
	for _, tc := range []struct {
		name          string
		labels, annos kv
		want          int64
		ok            bool
	}{
		{name: "none"},
		{name: "job completion annotation", annos: kv{completion: "5"}, want: 5 << 32, ok: true},
		{name: "job completion label", labels: kv{completion: "6"}, want: 6 << 32, ok: true},
		{name: "phalanx annotation wins", annos: kv{"scheduling.phalanx.dev/rank": "2", completion: "5"}, labels: kv{"jobset.sigs.k8s.io/job-index": "1"}, want: 2 << 32, ok: true},
		{name: "jobset global index, then completion", labels: kv{"jobset.sigs.k8s.io/job-global-index": "3", "jobset.sigs.k8s.io/job-index": "1"}, annos: kv{completion: "7"}, want: 3<<32 | 7, ok: true},
		{name: "jobset job index", labels: kv{"jobset.sigs.k8s.io/job-index": "1"}, annos: kv{completion: "2"}, want: 1<<32 | 2, ok: true},
		{name: "pytorch master first", labels: kv{"training.kubeflow.org/replica-type": "master", "training.kubeflow.org/replica-index": "0"}, want: 0, ok: true},
		{name: "pytorch worker", labels: kv{"training.kubeflow.org/replica-type": "worker", "training.kubeflow.org/replica-index": "4"}, want: 1<<32 | 4, ok: true},
		{name: "mpi launcher without index", labels: kv{"training.kubeflow.org/replica-type": "launcher"}},
		{name: "tf parameter server", labels: kv{"training.kubeflow.org/replica-type": "ps", "training.kubeflow.org/replica-index": "0"}},
		{name: "ray multi-host", labels: kv{"ray.io/worker-group-replica-index": "2", "ray.io/replica-host-index": "1"}, want: 2<<32 | 1, ok: true},
		{name: "ray worker without index", labels: kv{"ray.io/group": "workers"}},
		{name: "negative", annos: kv{"scheduling.phalanx.dev/rank": "-1"}},
		{name: "garbage", annos: kv{completion: "x"}},
	} {
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Labels: tc.labels, Annotations: tc.annos}}
		got, ok := RankOf(pod)
		if got != tc.want || ok != tc.ok {
			t.Errorf("%s: RankOf = %d, %v; want %d, %v", tc.name, got, ok, tc.want, tc.ok)
		}
	}
}
