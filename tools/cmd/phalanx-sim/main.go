// Command phalanx-sim is the local sandbox: a whole Kubernetes control plane
// with simulated nodes and the Phalanx scheduler, in one process.
//
//	phalanx-sim up [flags]      start a cluster and serve until interrupted
//
// Scenario runs and benchmarks are further subcommands of the same tool.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"k8s.io/klog/v2"

	"github.com/phalanx-sched/phalanx/pkg/controller"
	"github.com/phalanx-sched/phalanx/tools/sandbox"
)

const usage = `phalanx-sim runs a Kubernetes sandbox with the Phalanx scheduler in one process.

Usage:
  phalanx-sim up [flags]   start the sandbox and serve until Ctrl-C
  phalanx-sim run [flags] <file | name | all>   run scenarios and check their expectations (--list, --report)
  phalanx-sim bench [flags] compare Phalanx with upstream kube-scheduler and the bind ceiling
  phalanx-sim upstream-perf [flags] replay upstream's own scheduler_perf workloads under Phalanx and upstream

Run "phalanx-sim <command> -h" for the flags of a command.
`

func main() {
	if len(os.Args) < 2 {
		fmt.Fprint(os.Stderr, usage)
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "up":
		err = up(os.Args[2:])
	case "run":
		err = runCommand(os.Args[2:])
	case "bench":
		err = benchCommand(os.Args[2:])
	case "upstream-perf":
		err = upstreamPerfCommand(os.Args[2:])
	case "-h", "--help", "help":
		fmt.Print(usage)
	default:
		fmt.Fprintf(os.Stderr, "phalanx-sim: unknown command %q\n\n%s", os.Args[1], usage)
		os.Exit(2)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "phalanx-sim %s: %v\n", os.Args[1], err)
		os.Exit(1)
	}
}

func up(args []string) error {
	fs := flag.NewFlagSet("up", flag.ExitOnError)
	topo := sandbox.DefaultTopology()
	fs.IntVar(&topo.Zones, "zones", topo.Zones, "number of zones")
	fs.IntVar(&topo.RacksPerZone, "racks", topo.RacksPerZone, "racks per zone")
	fs.IntVar(&topo.RacksPerBlock, "racks-per-block", topo.RacksPerBlock, "racks per block (topology.phalanx.dev/block); 0 labels no blocks")
	fs.IntVar(&topo.NodesPerRack, "nodes", topo.NodesPerRack, "nodes per rack")
	fs.IntVar(&topo.GPUs, "gpus-per-node", topo.GPUs, "nvidia.com/gpu per node")
	fs.StringVar(&topo.CPU, "cpu", topo.CPU, "cpu per node")
	fs.StringVar(&topo.Memory, "memory", topo.Memory, "memory per node")
	draDevices := fs.Int("dra-devices", 0, "GPUs per node published as DRA devices (driver and DeviceClass "+sandbox.DeviceDriver+") through upstream's ResourceSlice controller; 0 publishes none")
	standIn := fs.Int("stand-in-provisioner", 0, "run a stand-in for the cluster autoscaler's atomic ProvisioningRequest class that adds at most this many nodes (of the --cpu, --memory and --gpus-per-node shape, in rack stand-in), and turn on phalanx-controller's ProvisioningRequests for gangs annotated scheduling.phalanx.dev/provisioning: atomic; 0: off")
	kubeconfig := fs.String("kubeconfig", ".phalanx/kubeconfig", "where to write the admin kubeconfig (written last: when it appears, the sandbox is ready)")
	configFile := fs.String("config", "", "a KubeSchedulerConfiguration for the sandbox's scheduler, validated as phalanx-scheduler --config validates it; its clientConnection and leaderElection are replaced for the sandbox (default: config/second-scheduler.yaml)")
	dir := fs.String("dir", "", "data directory (default: a temporary directory removed on exit)")
	verbosity := fs.Int("v", 0, "log verbosity of the control plane")
	withKueue := fs.Bool("kueue", false, "also run Kueue's manager (its CRDs, webhooks, queues and job integrations for Jobs, JobSets and PyTorchJobs): Kueue admits, Phalanx places")
	kueueTAS := fs.Bool("kueue-tas", false, "with --kueue, turn Kueue's own topology-aware scheduling on")
	_ = fs.Parse(args)
	quietLogs(*verbosity)

	// A wrong configuration is refused before anything starts, with the
	// path of the field at fault.
	var schedulerConfig []byte
	if *configFile != "" {
		var err error
		if schedulerConfig, err = sandbox.LoadSchedulerConfig(*configFile); err != nil {
			return err
		}
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	var kueue *sandbox.Kueue
	if *withKueue || *kueueTAS {
		bin, err := kueueBinary(ctx)
		if err != nil {
			return err
		}
		kueue = &sandbox.Kueue{Binary: bin, TAS: *kueueTAS}
	}
	start := time.Now()
	fmt.Printf("Starting sandbox: %d zones × %d racks × %d nodes (%s cpu, %s memory, %d GPUs each)...\n",
		topo.Zones, topo.RacksPerZone, topo.NodesPerRack, topo.CPU, topo.Memory, topo.GPUs)
	var devices *sandbox.Devices
	if *draDevices > 0 {
		devices = &sandbox.Devices{PerNode: *draDevices}
	}
	var provisioning *controller.ProvisioningOptions
	var standInOpts *sandbox.StandInProvisioner
	if *standIn > 0 {
		provisioning = &controller.ProvisioningOptions{SchedulerNames: []string{"phalanx-scheduler", "default-scheduler"}}
		standInOpts = &sandbox.StandInProvisioner{
			CPU: topo.CPU, Memory: topo.Memory, GPUs: topo.GPUs, MaxNodes: *standIn, Delay: 2 * time.Second,
			Labels: map[string]string{sandbox.ZoneLabel: "zone-stand-in", sandbox.RackLabel: "rack-stand-in"},
		}
	}
	// Start writes the kubeconfig last, once nodes, devices, CRDs,
	// controllers and the scheduler serve: a script may wait for the file
	// and use the cluster at once.
	cluster, err := sandbox.Start(ctx, sandbox.Options{
		Dir:                  *dir,
		KubeconfigPath:       *kubeconfig,
		Topology:             &topo,
		Scheduler:            true,
		SchedulerConfig:      schedulerConfig,
		AlsoDefaultScheduler: true,
		NodeAgent:            true,
		Controllers:          true,
		SchedulerPluginsCRD:  schedulerPluginsCRDAvailable(),
		// KubeRay names this scheduler itself; serving it lets its
		// objects in manifests/samples/scheduler-plugins run unchanged.
		ExtraSchedulerNames: []string{"scheduler-plugins-scheduler"},
		Diagnostics:         true,
		Devices:             devices,
		Provisioning:        provisioning,
		StandInProvisioner:  standInOpts,
		Kueue:               kueue,
	})
	if err != nil {
		return err
	}
	defer cluster.Stop()
	if kueue != nil {
		fmt.Printf("Kueue serves (TAS %v): queue a Job with the label kueue.x-k8s.io/queue-name; see \"Kueue in front\" in docs/user-guide.md. Its log: %s\n",
			kueue.TAS, filepath.Join(cluster.Dir, sandbox.KueueLog))
	}
	if *draDevices > 0 {
		fmt.Printf("Published %d DRA devices per node (DeviceClass %s); try manifests/samples/dra-gang.yaml.\n", *draDevices, sandbox.DeviceClass)
	}
	fmt.Printf(`Sandbox ready in %.1fs: %d nodes, Phalanx serving schedulerName %s.

  export KUBECONFIG=%s
  kubectl get nodes -L topology.kubernetes.io/zone,topology.phalanx.dev/block,topology.phalanx.dev/rack
  kubectl apply -f manifests/samples/
  kubectl apply -f manifests/samples/scheduler-plugins/   # what Kubeflow, KubeRay and Spark create for scheduler-plugins

kubectl phalanx asks the scheduler (diagnostics at %s; the kubeconfig says where):

  export PATH=$PWD/bin:$PATH           # kubectl finds bin/kubectl-phalanx (make run builds it)
  kubectl phalanx fit -f manifests/samples/rack-job.yaml
  kubectl phalanx explain podgroup trainer
  kubectl phalanx top

Press Ctrl-C to stop.
`, time.Since(start).Seconds(), topo.Size(), strings.Join(cluster.Scheduler().SchedulerNames(), ", "), *kubeconfig, diagnosticsAddress(cluster))
	<-ctx.Done()
	fmt.Println("\nStopping sandbox...")
	return nil
}

func diagnosticsAddress(c *sandbox.Cluster) string {
	if s := c.Scheduler(); s != nil && s.Diagnostics() != nil {
		return s.Diagnostics().Server
	}
	return "-"
}

// quietLogs keeps the control plane's own logging out of the user's way
// unless asked for.
func quietLogs(v int) {
	fs := flag.NewFlagSet("klog", flag.ContinueOnError)
	klog.InitFlags(fs)
	_ = fs.Set("v", fmt.Sprint(v))
	if v == 0 {
		_ = fs.Set("logtostderr", "false")
		_ = fs.Set("stderrthreshold", "FATAL")
	}
}
