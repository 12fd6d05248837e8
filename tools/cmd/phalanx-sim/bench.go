package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/phalanx-sched/phalanx/tools/bench"
	"github.com/phalanx-sched/phalanx/tools/bench/report"
)

// benchCommand runs the side-by-side benchmark: every case under Phalanx,
// upstream kube-scheduler v1.37.2 and the bind ceiling (tools/bench), then
// prints a comparison table and writes the results as JSON.
func benchCommand(args []string) error {
	fs := flag.NewFlagSet("bench", flag.ExitOnError)
	quick := fs.Bool("quick", false, "small cases (200 nodes) that take seconds per arm, for CI")
	casesFlag := fs.String("cases", "", "comma-separated case names (a whole name selects that case alone) or name substrings (default: all cases of the set)")
	armsFlag := fs.String("arms", "phalanx,upstream,ceiling", "arms to run: phalanx, upstream, ceiling, phalanx-proc (Phalanx as a child process, to compare memory), scheduler-plugins (sigs.k8s.io/scheduler-plugins "+bench.SchedulerPluginsVersion+" Coscheduling, a v1.34 scheduler, and its PodGroup controller; skips topology cases), kueue-tas (Kueue v0.17.0's manager choosing the nodes with its TAS, upstream kube-scheduler binding; the preferred-topology cases only)")
	jsonOut := fs.String("json", "", "write the results to this JSON file")
	arrival := fs.String("arrival", report.ArrivalPrecreated, "how pods arrive: precreated (all created before the scheduler starts) or live (the scheduler starts and is ready, then the harness creates the pods); preemption cases are always live")
	dialect := fs.String("dialect", bench.DialectPhalanx, "the API the Phalanx arms' gangs are written in: phalanx (its PodGroup CRDs and pod-group label) or native (scheduling.k8s.io/v1beta1 PodGroups and spec.schedulingGroup, the very objects the upstream arm gets)")
	repeat := fs.Int("repeat", 1, "run every case N times, interleaving the arms (A B C A B C ...)")
	gates := fs.String("upstream-gates", bench.DefaultUpstreamGates, "feature gates of the upstream kube-scheduler")
	phalanxGates := fs.String("phalanx-gates", "", "feature gates added to the phalanx-proc arm's (to measure a gate's effect on Phalanx)")
	phalanxConfig := fs.String("phalanx-config", "", "KubeSchedulerConfiguration file for the phalanx-proc arm (default: config/second-scheduler.yaml, built in); its profile must be named phalanx-scheduler")
	kubeScheduler := fs.String("kube-scheduler", "", "prebuilt kube-scheduler binary (default: go build k8s.io/kubernetes/cmd/kube-scheduler, cached)")
	phalanxScheduler := fs.String("phalanx-scheduler", "", "prebuilt phalanx-scheduler binary for the phalanx-proc arm (default: go build ./cmd/phalanx-scheduler, cached)")
	spScheduler := fs.String("scheduler-plugins-scheduler", "", "prebuilt scheduler of the scheduler-plugins arm (default: go build in hack/scheduler-plugins, cached; make scheduler-plugins builds bin/scheduler-plugins-scheduler)")
	spController := fs.String("scheduler-plugins-controller", "", "prebuilt PodGroup controller of the scheduler-plugins arm (default: built and cached as the scheduler)")
	kueueBin := fs.String("phalanx-kueue", "", "prebuilt phalanx-kueue (Kueue's manager) for the kueue-tas arm (default: go build ./tools/cmd/phalanx-kueue, cached; make build builds bin/phalanx-kueue)")
	workDir := fs.String("work-dir", ".phalanx/bench", "where child schedulers' configs and logs go")
	cpuProfiles := fs.String("cpuprofile-dir", "", "write a CPU profile of this process (API server, etcd, in-process scheduler) per measured window here")
	heapProfiles := fs.String("heapprofile-dir", "", "write heap profiles of child-process schedulers here: one nearest their peak RSS and one after the last pod bound")
	starveWindow := fs.Duration("starvation-window", bench.DefaultStarvationWindow, "how long the Starvation/ cases' stream of small jobs runs before each arm is measured")
	starveSeed := fs.Int64("starvation-seed", 1, "seed of the Starvation/ cases' arrival schedule (the same schedule on every arm)")
	starveRate := fs.Float64("starvation-rate", 0.85, "small jobs per second of the Starvation/ cases (0.85 offers about 106% of their 8 nodes)")
	list := fs.Bool("list", false, "list the cases and exit")
	fromJSON := fs.String("from-json", "", "print the tables of a JSON file written by --json, and run nothing")
	verbosity := fs.Int("v", 0, "log verbosity of the control plane")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: phalanx-sim bench [--quick] [--arrival precreated|live] [--cases a,b] [--arms phalanx,upstream,ceiling,scheduler-plugins,kueue-tas] [--json out.json] [--repeat N]\n\n")
		fs.PrintDefaults()
	}
	_ = fs.Parse(args)
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	quietLogs(*verbosity)
	if *fromJSON != "" {
		return printFromJSON(*fromJSON)
	}

	var patterns []string
	if *casesFlag != "" {
		patterns = strings.Split(*casesFlag, ",")
	}
	cases, err := bench.SelectCases(bench.Cases(*quick), patterns)
	if err != nil {
		return err
	}
	if *list {
		for _, c := range cases {
			fmt.Printf("%s\t%d nodes (%d racks of %d), %d gangs, %d pods\n", c.Name, c.NodeCount(), c.Zones*c.RacksPerZone, c.NodesPerRack, c.GangCount(), c.PodCount())
		}
		return nil
	}
	arms, err := bench.ParseArms(*armsFlag)
	if err != nil {
		return err
	}

	var phalanxCfg []byte
	if *phalanxConfig != "" {
		if phalanxCfg, err = os.ReadFile(*phalanxConfig); err != nil {
			return err
		}
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	logf := func(format string, args ...interface{}) {
		fmt.Fprintf(os.Stderr, "%s  %s\n", time.Now().Format("15:04:05"), fmt.Sprintf(format, args...))
	}
	h, err := bench.New(ctx, bench.Options{
		Arms:                       arms,
		Repeat:                     *repeat,
		Arrival:                    *arrival,
		Dialect:                    *dialect,
		UpstreamGates:              *gates,
		PhalanxGates:               *phalanxGates,
		PhalanxConfig:              phalanxCfg,
		KubeScheduler:              *kubeScheduler,
		PhalanxScheduler:           *phalanxScheduler,
		SchedulerPluginsScheduler:  *spScheduler,
		SchedulerPluginsController: *spController,
		Kueue:                      *kueueBin,
		WorkDir:                    *workDir,
		CPUProfileDir:              *cpuProfiles,
		HeapProfileDir:             *heapProfiles,
		StarvationWindow:           *starveWindow,
		StarvationSeed:             *starveSeed,
		StarvationRate:             *starveRate,
		Logf:                       logf,
	})
	if err != nil {
		return err
	}
	defer h.Close()

	file := report.File{
		Command: "phalanx-sim bench " + strings.Join(args, " "),
		Started: time.Now().UTC(),
		Machine: report.ThisMachine(),
	}
	file.Results = h.Run(ctx, cases)
	fmt.Printf("\nMachine: %d CPUs (%s), %d GiB, %s\n", file.Machine.CPUs, file.Machine.CPUModel, file.Machine.MemoryKiB>>20, file.Machine.GoVersion)
	fmt.Printf("Upstream kube-scheduler feature gates: %s (preemption cases add %s)\n", *gates, bench.PreemptionUpstreamGates)
	fmt.Printf("Phalanx arms' gangs written as: %s\n\n", dialectDescription(*dialect))
	if err := report.WriteTable(os.Stdout, file.Results); err != nil {
		return err
	}
	if *jsonOut != "" {
		data, err := json.MarshalIndent(file, "", "  ")
		if err != nil {
			return err
		}
		if err := os.WriteFile(*jsonOut, append(data, '\n'), 0o644); err != nil {
			return err
		}
		fmt.Printf("\nResults written to %s\n", *jsonOut)
	}
	failed := 0
	for _, r := range file.Results {
		if r.Error != "" || !r.Verdict.OK() {
			failed++
		}
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if failed > 0 {
		return fmt.Errorf("%d of %d runs failed or violated the placement check", failed, len(file.Results))
	}
	return nil
}

// printFromJSON prints the tables of a saved run.
func printFromJSON(path string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	var file report.File
	if err := json.Unmarshal(data, &file); err != nil {
		return fmt.Errorf("read %s: %w", path, err)
	}
	fmt.Printf("%s\nMachine: %d CPUs (%s), %d GiB, %s; started %s\n\n", file.Command, file.Machine.CPUs, file.Machine.CPUModel,
		file.Machine.MemoryKiB>>20, file.Machine.GoVersion, file.Started.Format(time.RFC3339))
	return report.WriteTable(os.Stdout, file.Results)
}

func dialectDescription(d string) string {
	if d == bench.DialectNative {
		return "scheduling.k8s.io/v1beta1 PodGroups and spec.schedulingGroup (native, as the upstream arm)"
	}
	return "scheduling.phalanx.dev/v1alpha1 PodGroups and the pod-group label"
}
