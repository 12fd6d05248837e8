package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	v1alpha1 "github.com/phalanx-sched/phalanx/apis/scheduling/v1alpha1"
	"github.com/phalanx-sched/phalanx/pkg/debugapi"
	"github.com/phalanx-sched/phalanx/pkg/gangcore"
	"github.com/phalanx-sched/phalanx/tools/sandbox"
)

// kubectlPhalanx runs the kubectl-phalanx binary with kubeconfig (the
// sandbox's admin kubeconfig, which says where the scheduler serves its
// diagnostics, when empty).
func kubectlPhalanx(t *testing.T, c *sandbox.Cluster, kubeconfig string, args ...string) (string, string, error) {
	t.Helper()
	bin := buildBinary(t, "kubectl-phalanx")
	if kubeconfig == "" {
		kubeconfig = c.KubeconfigPath
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, append([]string{"--kubeconfig", kubeconfig}, args...)...)
	cmd.Env = append(os.Environ(), "PHALANX_SCHEDULER_URL=")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	return stdout.String(), stderr.String(), err
}

// explainJSON runs kubectl phalanx explain with -o json and decodes it.
func explainJSON(t *testing.T, c *sandbox.Cluster, args ...string) *debugapi.ExplanationList {
	t.Helper()
	out, errOut, err := kubectlPhalanx(t, c, "", append([]string{"explain", "-o", "json"}, args...)...)
	require.NoError(t, err, "kubectl phalanx explain %v: %s", args, errOut)
	list := &debugapi.ExplanationList{}
	require.NoError(t, json.Unmarshal([]byte(out), list), "%s", out)
	require.NotEmpty(t, list.Items)
	return list
}

// waitStage polls explain until the hierarchy reaches stage.
func waitStage(t *testing.T, c *sandbox.Cluster, stage string, args ...string) *debugapi.Explanation {
	t.Helper()
	var got *debugapi.Explanation
	eventually(t, 60*time.Second, fmt.Sprintf("explain %v at stage %s", args, stage), func() (bool, error) {
		got = &explainJSON(t, c, args...).Items[0]
		return got.Stage == stage, nil
	})
	return got
}

func forceDeletePods(t *testing.T, c *sandbox.Cluster, ns, prefix string) {
	t.Helper()
	ctx := context.Background()
	pods, err := c.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	for _, p := range pods.Items {
		if strings.HasPrefix(p.Name, prefix) {
			require.NoError(t, c.Client.CoreV1().Pods(ns).Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}))
		}
	}
}

// TestKubectlPhalanxExplainsEachStage runs the kubectl-phalanx binary
// against a sandbox scheduler and walks a group through the stages explain
// reports: waiting for pods, invalid, scheduled, waiting in Permit,
// infeasible (with the domains its planner tried and why it may not
// preempt) and preempting. (Binding lasts milliseconds; pkg/inspect tests
// its classification.) It ends with top, the human output, and callers
// without and with the ClusterRole phalanx-diagnostics.
func TestKubectlPhalanxExplainsEachStage(t *testing.T) {
	// No node agent: a preempted pod stays terminating, so the preempting
	// stage lasts.
	c := startCluster(t, sandbox.Options{Scheduler: true, Diagnostics: true,
		Topology: &sandbox.Topology{Zones: 1, RacksPerZone: 2, NodesPerRack: 3, CPU: "4", Memory: "16Gi", Pods: 110}})
	ctx := context.Background()
	never := corev1.PreemptNever
	createPriorityClasses(t, c,
		&schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: "low"}, Value: 10},
		&schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: "high"}, Value: 1000},
		&schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: "high-never"}, Value: 1000, PreemptionPolicy: &never},
	)
	ns := namespace(t, c)
	pods := func(group string, n int, cpu, class string) {
		for i := range n {
			createPods(t, c, ns, member{name: fmt.Sprintf("%s-%d", group, i), labels: inGroup(group), cpu: cpu, priorityClass: class})
		}
	}

	t.Run("waiting for pods", func(t *testing.T) {
		createPodGroup(t, c, ns, gangPG("wait", 3))
		pods("wait", 2, "1", "")
		e := waitStage(t, c, debugapi.StageWaitingForPods, "podgroup", "wait", "-n", ns)
		assert.Equal(t, fmt.Sprintf("waiting for pods: 2/3 present (PodGroup %s/wait)", ns), e.Message)
		assert.Equal(t, 2, e.Groups[0].Present)
		assert.Equal(t, 3, e.Groups[0].Min)
		assert.NotNil(t, e.Since)
		assert.Nil(t, e.Assessment, "a group short of pods is not planned")
	})

	t.Run("invalid", func(t *testing.T) {
		pg := gangPG("bad", 2)
		pg.Spec.PriorityClassName = "high"
		createPodGroup(t, c, ns, pg)
		pods("bad", 2, "1", "")
		e := waitStage(t, c, debugapi.StageInvalid, "pod", "bad-1", "-n", ns)
		assert.Contains(t, e.Message, gangcore.MsgPriorityMismatch+": pod bad-0 has priority 0, the group 1000")
	})

	t.Run("scheduled", func(t *testing.T) {
		createPodGroup(t, c, ns, gangPG("ok", 2))
		pods("ok", 2, "1", "")
		e := waitStage(t, c, debugapi.StageScheduled, "ppg/ok", "-n", ns)
		assert.Equal(t, "the group's minimum is bound: 2/2 pods", e.Message)
		assert.Equal(t, 2, e.Groups[0].Bound)
		forceDeletePods(t, c, ns, "ok-")
	})

	t.Run("waiting in permit", func(t *testing.T) {
		// The third member exists but is gated: the plan places all three,
		// two reserve their nodes and wait for it.
		createPodGroup(t, c, ns, gangPG("permit", 3))
		pods("permit", 2, "1", "")
		createPods(t, c, ns, member{name: "permit-2", labels: inGroup("permit"), cpu: "1", gated: true})
		e := waitStage(t, c, debugapi.StageWaitingInPermit, "podgroup", "permit", "-n", ns)
		assert.Equal(t, "2 members reserved and waiting in Permit for the rest of the gang: 2/3 pods placed", e.Message)
		assert.NotNil(t, e.Since, "the Permit round's start")
		forceDeletePods(t, c, ns, "permit-")
	})

	t.Run("infeasible", func(t *testing.T) {
		// Five 3-cpu pods in one rack of three 4-cpu nodes: 3 fit per rack.
		pg := gangPG("huge", 5)
		pg.Spec.PriorityClassName = "high-never"
		pg.Spec.SchedulingConstraints = &v1alpha1.PodGroupSchedulingConstraints{Topology: topo(sandbox.RackLabel)}
		createPodGroup(t, c, ns, pg)
		pods("huge", 5, "3", "high-never")
		e := waitStage(t, c, debugapi.StageInfeasible, "podgroup", "huge", "-n", ns)
		assert.Equal(t, "no topology.phalanx.dev/rack domain fits 5 pods: best zone-0-rack-0 fits 3 (short 3 cpu); no preemption: the group's preemptionPolicy is Never", e.Message)
		require.NotNil(t, e.Assessment)
		require.NotNil(t, e.Assessment.Infeasible)
		assert.Equal(t, []debugapi.DomainFit{
			{Domain: "zone-0-rack-0", Fits: 3, Need: 5, Short: map[string]string{"cpu": "3"}, Reason: "no topology.phalanx.dev/rack domain fits 5 pods: best zone-0-rack-0 fits 3 (short 3 cpu)"},
			{Domain: "zone-0-rack-1", Fits: 3, Need: 5, Short: map[string]string{"cpu": "3"}, Reason: "no topology.phalanx.dev/rack domain fits 5 pods: best zone-0-rack-1 fits 3 (short 3 cpu)"},
		}, e.Assessment.Infeasible.Domains)
		require.NotNil(t, e.Assessment.Preemption)
		assert.False(t, e.Assessment.Preemption.Possible)
		assert.NotNil(t, e.Since)

		out, errOut, err := kubectlPhalanx(t, c, "", "explain", "podgroup", "huge", "-n", ns)
		require.NoError(t, err, errOut)
		t.Logf("kubectl phalanx explain podgroup huge:\n%s", out)
		for _, want := range []string{"Stage:  Infeasible", "zone-0-rack-1   3/5    3 cpu", "Preemption: no. the group's preemptionPolicy is Never"} {
			assert.Contains(t, out, want)
		}
		forceDeletePods(t, c, ns, "huge-")
	})

	t.Run("preempting", func(t *testing.T) {
		// Every node full of low-priority pods; a high gang of two in one
		// rack evicts two of them, which stay terminating here.
		for i := range 6 {
			createPods(t, c, ns, member{name: fmt.Sprintf("filler-%d", i), cpu: "4", priorityClass: "low"})
		}
		waitBound(t, c, ns, "filler-", 6)
		pg := gangPG("pre", 2)
		pg.Spec.PriorityClassName = "high"
		pg.Spec.SchedulingConstraints = &v1alpha1.PodGroupSchedulingConstraints{Topology: topo(sandbox.RackLabel)}
		createPodGroup(t, c, ns, pg)
		pods("pre", 2, "4", "high")
		e := waitStage(t, c, debugapi.StagePreempting, "podgroup", "pre", "-n", ns)
		assert.Equal(t, "preempted 2 pods for the group; waiting for 2 of them to terminate", e.Message)
		require.NotNil(t, e.Preemption)
		assert.Len(t, e.Preemption.Victims, 2)
		for _, v := range e.Preemption.Victims {
			assert.True(t, strings.HasPrefix(v, ns+"/filler-"), v)
		}
	})

	t.Run("top lists every group by stage", func(t *testing.T) {
		out, errOut, err := kubectlPhalanx(t, c, "", "top", "-n", ns, "-o", "json")
		require.NoError(t, err, errOut)
		var top debugapi.Top
		require.NoError(t, json.Unmarshal([]byte(out), &top))
		stages := map[string]string{}
		for _, g := range top.Groups {
			if g.Namespace == ns {
				stages[g.Name] = g.Stage
			}
		}
		assert.Equal(t, debugapi.StageWaitingForPods, stages["wait"])
		assert.Equal(t, debugapi.StageInvalid, stages["bad"])
		assert.Equal(t, debugapi.StagePreempting, stages["pre"])
		var racks int
		for _, d := range top.Domains {
			if d.Key == sandbox.RackLabel {
				racks++
				assert.Equal(t, "12", d.Allocatable["cpu"])
			}
		}
		assert.Equal(t, 2, racks, "the racks groups use are listed")
		human, _, err := kubectlPhalanx(t, c, "", "top", "-n", ns)
		require.NoError(t, err)
		t.Logf("kubectl phalanx top:\n%s", human)
	})

	t.Run("kubectl get shows policy, min, present, bound, status and age", func(t *testing.T) {
		// Conditions are written asynchronously: wait until huge has one.
		reason := ""
		eventually(t, 30*time.Second, "huge's Schedulable condition", func() (bool, error) {
			if cond := groupCondition(t, c, ns, "huge", "Schedulable"); cond != nil {
				reason = cond.Reason
			}
			return reason != "", nil
		})
		cols := groupTables(t, c, ns)
		t.Logf("kubectl get columns: %v", cols)
		assert.Equal(t, []string{"Name", "Gang Min", "Present", "Bound", "Running", "Status", "Topology", "Parent", "Age"}, cols["podgroups"][0])
		assert.Equal(t, []string{"huge", "5", "7", "3", "2", reason, sandbox.RackLabel, "", "x"}, cols["podgroups"][1])
		assert.Equal(t, []string{"loose", "", "", "", "", "", "", "job", "x"}, cols["podgroups"][2], "a basic group has no gang minimum")
		assert.Equal(t, []string{"Name", "Gang Min", "Status", "Topology", "Parent", "Age"}, cols["compositepodgroups"][0])
		assert.Equal(t, []string{"job", "2", "", "", "", "x"}, cols["compositepodgroups"][1])
		assert.Equal(t, []string{"Name", "Groups", "Age"}, cols["workloads"][0])
		assert.Equal(t, []string{"w", "Created", "x"}, cols["workloads"][1])
	})

	t.Run("callers need the ClusterRole phalanx-diagnostics", func(t *testing.T) {
		ep := c.Scheduler().Diagnostics()
		caFile := filepath.Join(t.TempDir(), "scheduler-ca.pem")
		require.NoError(t, os.WriteFile(caFile, ep.CertificateAuthorityData, 0o600))
		role := findObject(renderKustomization(t, "manifests/base"), "ClusterRole", "", "phalanx-diagnostics")
		require.NotNil(t, role, "the base installs ClusterRole phalanx-diagnostics")
		require.NoError(t, newObjectApplier(t, c.Config).apply(ctx, role))
		for _, name := range []string{"nobody", "reader"} {
			_, err := c.Client.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
			require.NoError(t, err)
		}
		_, err := c.Client.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: "reader-phalanx-diagnostics"},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "phalanx-diagnostics"},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: "reader", Namespace: ns}},
		}, metav1.CreateOptions{})
		require.NoError(t, err)
		flags := []string{"--scheduler-url", ep.Server, "--scheduler-ca-file", caFile, "-n", ns}

		_, nobody := serviceAccountConfig(t, c, ns, "nobody")
		_, errOut, err := kubectlPhalanx(t, c, nobody, append([]string{"explain", "podgroup", "wait"}, flags...)...)
		require.Error(t, err, "a caller without the role is refused")
		assert.Contains(t, errOut, "the scheduler refused /debug/phalanx/explain/podgroup/"+ns+"/wait")
		assert.Contains(t, errOut, "forbidden")
		assert.Contains(t, errOut, "ask for the ClusterRole phalanx-diagnostics")
		_, errOut, err = kubectlPhalanx(t, c, nobody, append([]string{"top"}, flags...)...)
		require.Error(t, err)
		assert.Contains(t, errOut, "forbidden")

		_, reader := serviceAccountConfig(t, c, ns, "reader")
		eventually(t, 30*time.Second, "the bound caller answered", func() (bool, error) {
			out, _, err := kubectlPhalanx(t, c, reader, append([]string{"explain", "podgroup", "wait"}, flags...)...)
			return err == nil && strings.Contains(out, "Stage:  WaitingForPods"), nil
		})
	})
}

// groupTables fetches the server-side tables kubectl get prints for each
// Phalanx kind, after giving the groups of ns the status phalanx-controller
// and the scheduler write. Rows are cells as kubectl prints them, "" for
// none and "x" for an age.
func groupTables(t *testing.T, c *sandbox.Cluster, ns string) map[string][][]string {
	t.Helper()
	ctx := context.Background()
	cs := c.Phalanx.SchedulingV1alpha1()
	huge, err := cs.PodGroups(ns).Get(ctx, "huge", metav1.GetOptions{})
	require.NoError(t, err)
	huge.Status.Members, huge.Status.Scheduled, huge.Status.Running = 7, 3, 2
	_, err = cs.PodGroups(ns).UpdateStatus(ctx, huge, metav1.UpdateOptions{})
	require.NoError(t, err)
	_, err = cs.CompositePodGroups(ns).Create(ctx, composite("job", 2), metav1.CreateOptions{})
	require.NoError(t, err)
	loose := &v1alpha1.PodGroup{ObjectMeta: metav1.ObjectMeta{Name: "loose"}, Spec: v1alpha1.PodGroupSpec{
		ParentCompositePodGroupName: ptr.To("job"), SchedulingPolicy: v1alpha1.PodGroupSchedulingPolicy{Basic: &v1alpha1.BasicSchedulingPolicy{}}}}
	_, err = cs.PodGroups(ns).Create(ctx, loose, metav1.CreateOptions{})
	require.NoError(t, err)
	w, err := cs.Workloads(ns).Create(ctx, workload("w", func(*v1alpha1.WorkloadSpec) {}), metav1.CreateOptions{})
	require.NoError(t, err)
	w.Status.Conditions = []metav1.Condition{{Type: "GroupsCreated", Status: metav1.ConditionTrue, Reason: "Created", Message: "made", LastTransitionTime: metav1.Now()}}
	_, err = cs.Workloads(ns).UpdateStatus(ctx, w, metav1.UpdateOptions{})
	require.NoError(t, err)

	out := map[string][][]string{}
	for _, resource := range []string{"podgroups", "compositepodgroups", "workloads"} {
		raw, err := c.Client.Discovery().RESTClient().Get().
			AbsPath("/apis/scheduling.phalanx.dev/v1alpha1/namespaces", ns, resource).
			SetHeader("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io").DoRaw(ctx)
		require.NoError(t, err)
		var table metav1.Table
		require.NoError(t, json.Unmarshal(raw, &table))
		var header []string
		for _, col := range table.ColumnDefinitions {
			header = append(header, col.Name)
		}
		rows := [][]string{header}
		names := map[string]bool{"huge": true, "loose": true, "job": true, "w": true}
		for _, r := range table.Rows {
			if name, _ := r.Cells[0].(string); !names[name] {
				continue
			}
			var cells []string
			for i, cell := range r.Cells {
				switch {
				case table.ColumnDefinitions[i].Name == "Age":
					cells = append(cells, "x")
				case cell == nil:
					cells = append(cells, "")
				default:
					cells = append(cells, fmt.Sprint(cell))
				}
			}
			rows = append(rows, cells)
		}
		sort.Slice(rows[1:], func(i, j int) bool { return rows[1+i][0] < rows[1+j][0] })
		out[resource] = rows
	}
	return out
}

// TestDiagnosticsPortOfTheBinary runs two phalanx-scheduler processes as
// the Deployment does, with the overlay's RBAC: each serves /debug/phalanx
// on --phalanx-port; the leader answers kubectl phalanx for a caller bound
// to phalanx-diagnostics, the standby points at the leader, and a caller
// without the role is refused.
func TestDiagnosticsPortOfTheBinary(t *testing.T) {
	bin := buildBinary(t, "phalanx-scheduler")
	c := startCluster(t, sandbox.Options{NodeAgent: true})
	ctx := context.Background()
	addNodes(t, c, "n", 4, "4", 0)
	objs := applyRBAC(t, c, "manifests/overlays/second-scheduler")
	_, kubeconfig := serviceAccountConfig(t, c, systemNamespace, schedulerSA)
	path := processSchedulerConfig(t, renderedSchedulerConfig(t, objs), kubeconfig, nil)
	type replica struct {
		*schedulerProcess
		diag string
	}
	var replicas []replica
	for _, name := range []string{"scheduler-a", "scheduler-b"} {
		port := freePort(t)
		replicas = append(replicas, replica{startSchedulerProcess(t, name, bin, path, kubeconfig, "--phalanx-port="+strconv.Itoa(port)), fmt.Sprintf("https://127.0.0.1:%d", port)})
	}

	ns := namespace(t, c)
	for _, name := range []string{"alice", "bob"} {
		_, err := c.Client.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	_, err := c.Client.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "alice-phalanx-diagnostics"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "phalanx-diagnostics"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: "alice", Namespace: ns}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	_, alice := serviceAccountConfig(t, c, ns, "alice")
	_, bob := serviceAccountConfig(t, c, ns, "bob")
	scheduleGang(t, c, ns, "g", "phalanx-scheduler", 3)

	ask := func(who string, r replica, args ...string) (string, string, error) {
		return kubectlPhalanx(t, c, who, append(args, "-n", ns, "--scheduler-url", r.diag, "--scheduler-insecure-skip-tls-verify")...)
	}
	var leader, standby replica
	eventually(t, 60*time.Second, "one replica answering, the other pointing at it", func() (bool, error) {
		leader, standby = replica{}, replica{}
		for _, r := range replicas {
			out, errOut, err := ask(alice, r, "explain", "podgroup", "g")
			switch {
			case err == nil && strings.Contains(out, "Stage:  Scheduled"):
				leader = r
			case err != nil && strings.Contains(errOut, "is not the leading replica"):
				standby = r
			}
		}
		return leader.process != nil && standby.process != nil, nil
	})
	t.Logf("%s leads; %s stands by", leader.name, standby.name)
	_, errOut, err := ask(alice, standby, "top")
	require.Error(t, err)
	holder, err := leaseHolder(c, schedulerLease)
	require.NoError(t, err)
	assert.Contains(t, errOut, fmt.Sprintf("%q is: ask it", holder), "the standby names the leader")

	out, errOut, err := ask(alice, leader, "top", "-o", "json")
	require.NoError(t, err, errOut)
	var top debugapi.Top
	require.NoError(t, json.Unmarshal([]byte(out), &top))
	assert.Equal(t, holder, top.Scheduler, "answers say which replica answered")

	_, errOut, err = ask(bob, leader, "explain", "podgroup", "g")
	require.Error(t, err, "a caller without the role is refused")
	assert.Contains(t, errOut, "forbidden")
	for _, r := range replicas {
		r.assertNoForbidden(t)
	}
}
