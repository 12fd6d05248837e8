package integration

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"

	v1alpha1 "github.com/phalanx-sched/phalanx/apis/scheduling/v1alpha1"
	"github.com/phalanx-sched/phalanx/tools/sandbox"
)

// TestControllerMemoryFitsItsLimit runs phalanx-controller as a process,
// with its deployed arguments and RBAC, over 200 Workloads of 5 pods each
// (1,000 pods, 200 PodGroups), waits until it has counted every member,
// and checks that its peak resident memory stayed under the memory limit
// of its Deployment: a controller that outgrows the limit is OOM-killed and
// no gang Job is released. The peak is logged; docs/benchmarks.md records it.
func TestControllerMemoryFitsItsLimit(t *testing.T) {
	const groups, perGroup = 200, 5
	bin := buildBinary(t, "phalanx-controller")
	c := startCluster(t, sandbox.Options{})
	ctx := context.Background()
	objs := applyRBAC(t, c, "manifests/overlays/second-scheduler")
	_, kubeconfig := serviceAccountConfig(t, c, systemNamespace, controllerSA)
	limit := deploymentMemoryLimit(t, objs, "phalanx-controller")

	p := startProcess(t, "controller", bin, "--kubeconfig="+kubeconfig, "--leader-elect=false",
		fmt.Sprintf("--health-addr=127.0.0.1:%d", freePort(t)), "--bind-address=127.0.0.1", fmt.Sprintf("--secure-port=%d", freePort(t)))

	ns := namespace(t, c)
	for i := range groups {
		name := fmt.Sprintf("w%03d", i)
		_, err := c.Phalanx.SchedulingV1alpha1().Workloads(ns).Create(ctx, workload(name, func(s *v1alpha1.WorkloadSpec) {
			s.PodGroupTemplates = []v1alpha1.PodGroupTemplate{{Name: "workers", SchedulingPolicy: v1alpha1.PodGroupSchedulingPolicy{
				Gang: &v1alpha1.GangSchedulingPolicy{MinCount: perGroup}}}}
		}), metav1.CreateOptions{})
		require.NoError(t, err)
		for j := range perGroup {
			pod := plainPod(fmt.Sprintf("%s-%d", name, j), "100m")
			pod.Labels = map[string]string{v1alpha1.PodGroupLabel: name + "-workers"}
			pod.Spec.TerminationGracePeriodSeconds = ptr.To[int64](0)
			_, err := c.Client.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{})
			require.NoError(t, err)
		}
	}
	eventually(t, 5*time.Minute, "every PodGroup created and counting its members", func() (bool, error) {
		if p.exited() {
			return false, fmt.Errorf("phalanx-controller exited; see its log")
		}
		pgs, err := c.Phalanx.SchedulingV1alpha1().PodGroups(ns).List(ctx, metav1.ListOptions{})
		if err != nil || len(pgs.Items) != groups {
			return false, err
		}
		for _, pg := range pgs.Items {
			if pg.Status.Members != perGroup {
				return false, nil
			}
		}
		return true, nil
	})
	peak := peakRSS(t, p.cmd.Process.Pid)
	t.Logf("phalanx-controller peak RSS over %d Workloads, %d pods: %d MiB (Deployment limit %d MiB)", groups, groups*perGroup, peak>>20, limit>>20)
	require.Less(t, peak, limit, "the controller's peak RSS must fit its Deployment's memory limit")
	p.assertNoForbidden(t)
}

// deploymentMemoryLimit is the memory limit of the Deployment's container.
func deploymentMemoryLimit(t *testing.T, objs []*unstructured.Unstructured, name string) uint64 {
	t.Helper()
	d := findObject(objs, "Deployment", systemNamespace, name)
	require.NotNil(t, d)
	containers, _, _ := unstructured.NestedSlice(d.Object, "spec", "template", "spec", "containers")
	require.Len(t, containers, 1)
	v, found, _ := unstructured.NestedString(containers[0].(map[string]interface{}), "resources", "limits", "memory")
	require.True(t, found, "Deployment %s sets a memory limit", name)
	q, err := resource.ParseQuantity(v)
	require.NoError(t, err)
	return uint64(q.Value())
}

// peakRSS is the process's VmHWM.
func peakRSS(t *testing.T, pid int) uint64 {
	t.Helper()
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	require.NoError(t, err)
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if rest, ok := strings.CutPrefix(s.Text(), "VmHWM:"); ok {
			kb, err := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			require.NoError(t, err)
			return kb << 10
		}
	}
	require.NoError(t, s.Err())
	t.Fatal("no VmHWM in /proc status")
	return 0
}
