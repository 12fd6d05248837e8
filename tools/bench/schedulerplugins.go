package bench

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	restclient "k8s.io/client-go/rest"
	spv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"
	spclient "sigs.k8s.io/scheduler-plugins/pkg/generated/clientset/versioned"
	"sigs.k8s.io/yaml"

	schedulerpluginscrd "github.com/phalanx-sched/phalanx/manifests/components/scheduler-plugins-crd"
	"github.com/phalanx-sched/phalanx/tools/bench/report"
	"github.com/phalanx-sched/phalanx/tools/sandbox"
)

// The scheduler-plugins arm runs sigs.k8s.io/scheduler-plugins' own
// kube-scheduler (Kubernetes v1.34 libraries, its Coscheduling plugin) and
// its PodGroup controller as child processes, built from the separate Go
// module in hack/scheduler-plugins. Its pods join scheduling.x-k8s.io
// PodGroups by the scheduling.x-k8s.io/pod-group label.
const (
	// SchedulerPluginsVersion is the sigs.k8s.io/scheduler-plugins release
	// that hack/scheduler-plugins/go.mod requires (a test checks).
	SchedulerPluginsVersion = "v0.34.7"
	// schedulerPluginsModule is that module's directory in this repository.
	schedulerPluginsModule = "hack/scheduler-plugins"
	// Its packages: the scheduler with Coscheduling registered, and the
	// PodGroup controller.
	schedulerPluginsSchedulerPkg  = "./scheduler"
	schedulerPluginsControllerPkg = "./controller"
	// schedulerPluginsSchedulerName is the profile of
	// schedulerPluginsConfig, the name scheduler-plugins' chart gives its
	// second scheduler.
	schedulerPluginsSchedulerName = "scheduler-plugins-scheduler"
	// schedulerPluginsPermitWait is Coscheduling's permitWaitingTimeSeconds:
	// its default, and the Phalanx profile's value.
	schedulerPluginsPermitWait = 60
)

// schedulerPluginsConfig is the arm's KubeSchedulerConfiguration (before
// schedulerConfig adds the client connection and leader election): one
// profile whose queue sort is Coscheduling instead of PrioritySort, with
// Coscheduling at PreFilter (members and minResources present), PostFilter
// (reject the whole group when one member does not fit), Permit (wait for
// minMember) and Reserve (Unreserve releases the group), as
// scheduler-plugins documents for that plugin. Every other default plugin
// stays, DefaultPreemption included. kubescheduler.config.k8s.io/v1 is what
// a v1.34 scheduler reads.
func schedulerPluginsConfig() []byte {
	return []byte(`apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
- schedulerName: ` + schedulerPluginsSchedulerName + `
  plugins:
    queueSort:
      enabled:
      - name: Coscheduling
      disabled:
      - name: "*"
    preFilter:
      enabled:
      - name: Coscheduling
    postFilter:
      enabled:
      - name: Coscheduling
    permit:
      enabled:
      - name: Coscheduling
    reserve:
      enabled:
      - name: Coscheduling
  pluginConfig:
  - name: Coscheduling
    args:
      permitWaitingTimeSeconds: ` + strconv.Itoa(schedulerPluginsPermitWait) + `
`)
}

// schedulerPluginsUnsupported says why a case cannot run under the
// scheduler-plugins arm, or "" when it can. Coscheduling has no topology
// constraint for a group (nor groups of groups): such a case would measure
// something else than it asks for.
func schedulerPluginsUnsupported(c Case) string {
	if c.TopologyKey != "" {
		return "scheduler-plugins has no topology constraint for a gang (a Phalanx feature)"
	}
	return ""
}

// benchCluster is a sandbox with the clients the harness creates a run's
// objects with.
type benchCluster struct {
	*sandbox.Cluster
	// schedulerPlugins creates scheduling.x-k8s.io PodGroups; nil unless
	// the run's arm is the scheduler-plugins one.
	schedulerPlugins spclient.Interface
	// stopDevices stops a DRA case's device publishers.
	stopDevices func()
}

// Stop stops the device publishers, then the sandbox.
func (cl *benchCluster) Stop() {
	if cl.stopDevices != nil {
		cl.stopDevices()
	}
	cl.Cluster.Stop()
}

// installSchedulerPluginsCRD creates the scheduler-plugins PodGroup CRD of
// manifests/components/scheduler-plugins-crd (kept if one exists), waits
// until it is served, and returns a client for its PodGroups.
func installSchedulerPluginsCRD(ctx context.Context, cl *sandbox.Cluster) (spclient.Interface, error) {
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := yaml.Unmarshal(schedulerpluginscrd.PodGroupCRD, crd); err != nil {
		return nil, fmt.Errorf("decode the scheduler-plugins PodGroup CRD: %w", err)
	}
	ext, err := apiextensionsclient.NewForConfig(cl.Config)
	if err != nil {
		return nil, err
	}
	if _, err := ext.ApiextensionsV1().CustomResourceDefinitions().Create(ctx, crd, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, fmt.Errorf("create CRD %s: %w", crd.Name, err)
	}
	err = wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		got, err := ext.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, crd.Name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		for _, cond := range got.Status.Conditions {
			if cond.Type == apiextensionsv1.Established && cond.Status == apiextensionsv1.ConditionTrue {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		return nil, fmt.Errorf("wait for CRD %s to be established: %w", crd.Name, err)
	}
	// Custom resources are served as JSON only.
	cfg := restclient.CopyConfig(cl.Config)
	cfg.ContentType, cfg.AcceptContentTypes = "application/json", "application/json"
	return spclient.NewForConfig(cfg)
}

// warmSchedulerPluginsCache does for the scheduling.x-k8s.io PodGroups
// what warmWatchCaches does for the others: the first LIST and the first
// write of a just-installed CRD are slow, which a run should not count.
func warmSchedulerPluginsCache(ctx context.Context, client spclient.Interface, ns string) error {
	if _, err := client.SchedulingV1alpha1().PodGroups("").List(ctx, metav1.ListOptions{ResourceVersion: "0", Limit: 1}); err != nil {
		return fmt.Errorf("warm the scheduling.x-k8s.io PodGroup watch cache: %w", err)
	}
	warm := &spv1alpha1.PodGroup{ObjectMeta: metav1.ObjectMeta{Name: "warm-up", Namespace: ns}, Spec: spv1alpha1.PodGroupSpec{MinMember: 1}}
	if _, err := client.SchedulingV1alpha1().PodGroups(ns).Create(ctx, warm, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}); err != nil {
		return fmt.Errorf("warm the scheduling.x-k8s.io PodGroup write path: %w", err)
	}
	return nil
}

// schedulerPluginsPodGroup is a gang as scheduler-plugins' users (and the
// training operators) write it: minMember only. There is no disruption
// mode nor priority on the group; priority comes from the pods.
func schedulerPluginsPodGroup(name string, size int32) *spv1alpha1.PodGroup {
	return &spv1alpha1.PodGroup{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       spv1alpha1.PodGroupSpec{MinMember: size},
	}
}

// childProcess is a helper process of an arm (scheduler-plugins' PodGroup
// controller) that serves no endpoint the harness reads.
type childProcess struct {
	cmd     *exec.Cmd
	logPath string
	exited  chan struct{}
	waitErr error
}

func startChildProcess(binary string, args []string, logPath string) (*childProcess, error) {
	if err := os.MkdirAll(filepath.Dir(logPath), 0o755); err != nil {
		return nil, err
	}
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(binary, args...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return nil, fmt.Errorf("start %s: %w", binary, err)
	}
	p := &childProcess{cmd: cmd, logPath: logPath, exited: make(chan struct{})}
	go func() {
		p.waitErr = cmd.Wait()
		logFile.Close()
		close(p.exited)
	}()
	return p, nil
}

// stop terminates the process (SIGTERM, then SIGKILL after 10 s) and
// returns its CPU time.
func (p *childProcess) stop() time.Duration {
	select {
	case <-p.exited:
	default:
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-p.exited:
		case <-time.After(10 * time.Second):
			_ = p.cmd.Process.Kill()
			<-p.exited
		}
	}
	if p.cmd.ProcessState == nil {
		return 0
	}
	return p.cmd.ProcessState.UserTime() + p.cmd.ProcessState.SystemTime()
}

// schedulerPluginsArm is the scheduler-plugins scheduler (a childArm) and
// its PodGroup controller; the run ends early if either exits.
type schedulerPluginsArm struct {
	*childArm
	controller *childProcess
	anyExited  chan struct{}
}

func newSchedulerPluginsArm(scheduler *childArm, controller *childProcess) *schedulerPluginsArm {
	a := &schedulerPluginsArm{childArm: scheduler, controller: controller, anyExited: make(chan struct{})}
	go func() {
		select {
		case <-scheduler.child.exited:
		case <-controller.exited:
		}
		close(a.anyExited)
	}()
	return a
}

func (a *schedulerPluginsArm) exited() <-chan struct{} { return a.anyExited }

func (a *schedulerPluginsArm) exitError() error {
	select {
	case <-a.controller.exited:
		err := a.controller.waitErr
		if err == nil {
			err = fmt.Errorf("exited with status 0")
		}
		return fmt.Errorf("scheduler-plugins controller exited early: %w; last log lines:\n%s", err, tail(a.controller.logPath, 15))
	default:
		return a.childArm.exitError()
	}
}

func (a *schedulerPluginsArm) measure(ctx context.Context, res *report.Result, bound int) {
	a.childArm.measure(ctx, res, bound)
	res.ControllerPeakRSSBytes = peakRSS(strconv.Itoa(a.controller.cmd.Process.Pid))
}

func (a *schedulerPluginsArm) stop(res *report.Result) {
	a.childArm.stop(res)
	res.ControllerCPUSeconds = a.controller.stop().Seconds()
}
