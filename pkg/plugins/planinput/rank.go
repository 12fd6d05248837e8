package planinput

import (
	"math"
	"strconv"
	"strings"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"

	v1alpha1 "github.com/phalanx-sched/phalanx/apis/scheduling/v1alpha1"
)

// Ranks: a member's position in its gang's ring, read from the index its
// controller already writes on the pod. The planner only compares ranks,
// so a rank made of two indexes (a JobSet's job and the Job's completion)
// is one number whose high half is the first: the order is that of the
// global rank job × completions + completion, without knowing completions.

// The labels and annotations ranks come from, as the controllers write them.
const (
	// JobSet (and Kubeflow Trainer's TrainJob, which runs on JobSet) labels
	// and annotates each pod with its Job's index: global across the
	// JobSet's replicated jobs in newer releases, within its replicated
	// job in all of them.
	jobSetGlobalIndex = "jobset.sigs.k8s.io/job-global-index"
	jobSetJobIndex    = "jobset.sigs.k8s.io/job-index"
	// The Training Operator (PyTorchJob, TFJob, ...) and the MPI Operator
	// label each replica with its type and its index within the type.
	replicaType  = "training.kubeflow.org/replica-type"
	replicaIndex = "training.kubeflow.org/replica-index"
	// KubeRay labels multi-host worker replicas (RayMultihostIndexing) with
	// the replica's index in its group and the host's within the replica;
	// other Ray workers carry no stable index.
	rayReplicaIndex = "ray.io/worker-group-replica-index"
	rayHostIndex    = "ray.io/replica-host-index"
)

// RankOf returns pod's rank, ok false when nothing on the pod gives one.
// The first source that applies wins:
//
//  1. the scheduling.phalanx.dev/rank annotation;
//  2. JobSet's job index (global if present), then the Job's completion
//     index within it;
//  3. the training operators' replica type and index: the coordinator
//     (master, chief, launcher) before the workers, each by index; other
//     types (ps, evaluator) are not ring members and get no rank;
//  4. KubeRay's multi-host replica index, then host index;
//  5. the Job's completion index (annotation, or the label of v1.28+).
//
// A value that is not a non-negative 32-bit integer gives no rank.
func RankOf(pod *corev1.Pod) (int64, bool) {
	if v, ok := index(pod.Annotations, v1alpha1.RankAnnotation); ok {
		return pair(v, 0), true
	}
	completion, hasCompletion := index(pod.Annotations, batchv1.JobCompletionIndexAnnotation)
	if !hasCompletion {
		completion, hasCompletion = index(pod.Labels, batchv1.JobCompletionIndexAnnotation)
	}
	if job, ok := either(pod, jobSetGlobalIndex); ok {
		return pair(job, completion), true
	}
	if job, ok := either(pod, jobSetJobIndex); ok {
		return pair(job, completion), true
	}
	if t, ok := pod.Labels[replicaType]; ok {
		i, ok := index(pod.Labels, replicaIndex)
		if !ok {
			return 0, false
		}
		switch strings.ToLower(t) {
		case "master", "chief", "launcher":
			return pair(0, i), true
		case "worker":
			return pair(1, i), true
		}
		return 0, false
	}
	if r, ok := index(pod.Labels, rayReplicaIndex); ok {
		h, _ := index(pod.Labels, rayHostIndex)
		return pair(r, h), true
	}
	if hasCompletion {
		return pair(completion, 0), true
	}
	return 0, false
}

func pair(major, minor int64) int64 { return major<<32 | minor }

func either(pod *corev1.Pod, key string) (int64, bool) {
	if v, ok := index(pod.Labels, key); ok {
		return v, true
	}
	return index(pod.Annotations, key)
}

func index(m map[string]string, key string) (int64, bool) {
	s, ok := m[key]
	if !ok {
		return 0, false
	}
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil || v < 0 || v > math.MaxInt32 {
		return 0, false
	}
	return v, true
}
