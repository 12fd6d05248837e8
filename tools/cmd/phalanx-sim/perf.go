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
	"github.com/phalanx-sched/phalanx/tools/bench/schedperf"
)

// perfFile is what upstream-perf --json writes.
type perfFile struct {
	Command string              `json:"command"`
	Started time.Time           `json:"started"`
	Machine report.Machine      `json:"machine"`
	Dir     string              `json:"schedulerPerfDir"`
	Results []report.PerfResult `json:"results"`
}

// upstreamPerfCommand replays upstream kube-scheduler's own scheduler_perf
// workloads (read from the k8s.io/kubernetes module) under Phalanx and
// upstream, and prints upstream's metrics side by side.
func upstreamPerfCommand(args []string) error {
	fs := flag.NewFlagSet("upstream-perf", flag.ExitOnError)
	labelFilter := fs.String("labels", schedperf.IntegrationFilter, "upstream's label filter: labels a workload must have, or (with -) must not have; \"performance\" selects the 5,000-node workloads")
	workloads := fs.String("workloads", "", "comma-separated workload name substrings, e.g. GangScheduling/10Nodes (default: every workload the label filter passes)")
	dirs := fs.String("configs", strings.Join(schedperf.Default, ","), "scheduler_perf directories whose "+schedperf.ConfigFile+" to read")
	perfDir := fs.String("dir", "", "scheduler_perf's directory (default: test/integration/scheduler_perf of the k8s.io/kubernetes module in go.mod)")
	armsFlag := fs.String("arms", "phalanx,upstream", "arms to run: phalanx, upstream, phalanx-proc")
	repeat := fs.Int("repeat", 1, "run every workload N times, interleaving the arms")
	jsonOut := fs.String("json", "", "write the results to this JSON file")
	fromJSON := fs.String("from-json", "", "print the tables of a JSON file written by --json, and run nothing")
	list := fs.Bool("list", false, "list the selected workloads and exit")
	kubeScheduler := fs.String("kube-scheduler", "", "prebuilt kube-scheduler binary (default: go build k8s.io/kubernetes/cmd/kube-scheduler, cached)")
	phalanxScheduler := fs.String("phalanx-scheduler", "", "prebuilt phalanx-scheduler binary for the phalanx-proc arm")
	workDir := fs.String("work-dir", ".phalanx/upstream-perf", "where child schedulers' configs and logs go")
	verbosity := fs.Int("v", 0, "log verbosity of the control plane")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: phalanx-sim upstream-perf [--labels integration-test,-performance | --labels performance] [--workloads a,b] [--arms phalanx,upstream] [--json out.json]\n\n")
		fs.PrintDefaults()
	}
	_ = fs.Parse(args)
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	quietLogs(*verbosity)
	if *fromJSON != "" {
		data, err := os.ReadFile(*fromJSON)
		if err != nil {
			return err
		}
		var f perfFile
		if err := json.Unmarshal(data, &f); err != nil {
			return fmt.Errorf("read %s: %w", *fromJSON, err)
		}
		fmt.Printf("%s\nMachine: %d CPUs (%s), %d GiB, %s; started %s\n\n", f.Command, f.Machine.CPUs, f.Machine.CPUModel,
			f.Machine.MemoryKiB>>20, f.Machine.GoVersion, f.Started.Format(time.RFC3339))
		return report.WritePerfTable(os.Stdout, f.Results)
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	dir := *perfDir
	if dir == "" {
		var err error
		if dir, err = bench.SchedulerPerfDir(ctx); err != nil {
			return err
		}
	}
	var patterns []string
	if *workloads != "" {
		patterns = strings.Split(*workloads, ",")
	}
	selected, err := schedperf.Select(dir, strings.Split(*dirs, ","), *labelFilter, patterns)
	if err != nil {
		return err
	}
	if len(selected) == 0 {
		return fmt.Errorf("no workload in %s passes --labels %q and --workloads %q", dir, *labelFilter, *workloads)
	}
	if *list {
		for _, s := range selected {
			e, err := s.Expand()
			if err != nil {
				return err
			}
			measured := fmt.Sprintf("%d measured pods", e.MeasuredPods())
			if d := e.SteadyState(); d > 0 {
				measured = fmt.Sprintf("pods in a steady state for %v", d)
			}
			fmt.Printf("%s\t[%s]\t%d nodes, %s\n", s.Name(), strings.Join(s.Labels(), ","), e.NodeCount(), measured)
		}
		return nil
	}
	arms, err := bench.ParseArms(*armsFlag)
	if err != nil {
		return err
	}
	logf := func(format string, args ...interface{}) {
		fmt.Fprintf(os.Stderr, "%s  %s\n", time.Now().Format("15:04:05"), fmt.Sprintf(format, args...))
	}
	h, err := bench.New(ctx, bench.Options{
		Arms:             arms,
		Repeat:           *repeat,
		KubeScheduler:    *kubeScheduler,
		PhalanxScheduler: *phalanxScheduler,
		WorkDir:          *workDir,
		Logf:             logf,
	})
	if err != nil {
		return err
	}
	defer h.Close()
	logf("replaying %d workloads from %s under %s", len(selected), dir, *armsFlag)
	f := perfFile{
		Command: "phalanx-sim upstream-perf " + strings.Join(args, " "),
		Started: time.Now().UTC(),
		Machine: report.ThisMachine(),
		Dir:     dir,
	}
	f.Results = h.RunPerf(ctx, selected)
	fmt.Printf("\nMachine: %d CPUs (%s), %d GiB, %s\n\n", f.Machine.CPUs, f.Machine.CPUModel, f.Machine.MemoryKiB>>20, f.Machine.GoVersion)
	if err := report.WritePerfTable(os.Stdout, f.Results); err != nil {
		return err
	}
	if *jsonOut != "" {
		data, err := json.MarshalIndent(f, "", "  ")
		if err != nil {
			return err
		}
		if err := os.WriteFile(*jsonOut, append(data, '\n'), 0o644); err != nil {
			return err
		}
		fmt.Printf("\nResults written to %s\n", *jsonOut)
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	failed := 0
	for _, r := range f.Results {
		if r.Skipped == "" && !r.OK() {
			failed++
		}
	}
	if failed > 0 {
		return fmt.Errorf("%d of %d runs failed, left pods unscheduled or violated the placement check", failed, len(f.Results))
	}
	return nil
}
