package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/phalanx-sched/phalanx/tools/sandbox"
	"github.com/phalanx-sched/phalanx/tools/sim"
)

const runUsage = `Usage: phalanx-sim run [flags] <scenario.yaml | built-in name | all>

Runs scenarios on a fresh sandbox (control plane, Phalanx scheduler, node
agent, controllers), prints a table per step with PASS/FAIL per expectation,
and exits non-zero if any expectation fails.

Flags:
`

// runCommand is `phalanx-sim run`.
func runCommand(args []string) error {
	fs := flag.NewFlagSet("run", flag.ExitOnError)
	report := fs.String("report", "", "also write a self-contained HTML report (a picture of the cluster per step) to this file")
	list := fs.Bool("list", false, "list the built-in scenarios and exit")
	verbosity := fs.Int("v", 0, "log verbosity of the control plane")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), runUsage)
		fs.PrintDefaults()
	}
	// Flags may come before or after the scenario.
	var positional []string
	for rest := args; ; {
		_ = fs.Parse(rest)
		if fs.NArg() == 0 {
			break
		}
		positional = append(positional, fs.Arg(0))
		rest = fs.Args()[1:]
	}
	quietLogs(*verbosity)

	if *list {
		builtins, err := sim.Builtins()
		if err != nil {
			return err
		}
		fmt.Println("Built-in scenarios (phalanx-sim run <name>, or all):")
		fmt.Println()
		sim.WriteCatalog(os.Stdout, builtins)
		return nil
	}
	if len(positional) != 1 {
		fs.Usage()
		return fmt.Errorf("give one scenario: a file, a built-in name (see --list) or all")
	}
	scenarios, err := sim.Load(positional[0])
	if err != nil {
		return err
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	// Kueue's manager runs only for the scenarios that put it in front.
	var kueue *sandbox.Kueue
	for _, sc := range scenarios {
		if sc.Kueue && kueue == nil {
			bin, err := kueueBinary(ctx)
			if err != nil {
				return err
			}
			kueue = &sandbox.Kueue{Binary: bin}
		}
	}
	start := time.Now()
	fmt.Println("Starting sandbox: control plane, Phalanx scheduler, node agent and controllers...")
	cluster, err := sandbox.Start(ctx, sandbox.Options{
		Scheduler:            true,
		AlsoDefaultScheduler: true,
		NodeAgent:            true,
		Controllers:          true,
		SchedulerPluginsCRD:  schedulerPluginsCRDAvailable(),
		Kueue:                kueue,
	})
	if err != nil {
		return err
	}
	defer cluster.Stop()
	fmt.Printf("Sandbox ready in %.1fs. Running %d scenario(s); each makes its own nodes and namespace.\n",
		time.Since(start).Seconds(), len(scenarios))

	target := sim.Cluster{Client: cluster.Client, Phalanx: cluster.Phalanx, SchedulerPlugins: schedulerPluginsClient(cluster),
		RestartScheduler: cluster.RestartScheduler, Kueue: cluster.KueueClient()}
	var results []*sim.Result
	for _, sc := range scenarios {
		if ctx.Err() != nil {
			break
		}
		results = append(results, sim.Run(ctx, target, sc, os.Stdout))
	}
	sim.WriteSummary(os.Stdout, results)

	if *report != "" {
		if err := writeReport(*report, results); err != nil {
			return err
		}
	}
	failed := 0
	for _, r := range results {
		if !r.Passed() {
			failed++
		}
	}
	switch {
	case ctx.Err() != nil:
		return fmt.Errorf("interrupted after %d of %d scenarios", len(results), len(scenarios))
	case failed > 0:
		return fmt.Errorf("%d of %d scenarios failed", failed, len(results))
	}
	return nil
}

func writeReport(path string, results []*sim.Result) error {
	var page bytes.Buffer
	if err := sim.WriteReport(&page, results); err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(path, page.Bytes(), 0o644); err != nil {
		return err
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		abs = path
	}
	fmt.Printf("\nHTML report: file://%s\n", abs)
	return nil
}
