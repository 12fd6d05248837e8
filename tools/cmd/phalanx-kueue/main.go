// Command phalanx-kueue runs Kueue's controller manager (tools/kueuerun)
// against a cluster, for the sandbox: `phalanx-sim up --kueue` and the
// integration tests start it as a child process, since Kueue cannot share
// a process with kube-apiserver or kube-scheduler (tools/kueuerun says
// why).
//
//	phalanx-kueue --kubeconfig FILE [--tas] [--ready-file FILE]
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"go.uber.org/zap/zapcore"
	"k8s.io/client-go/tools/clientcmd"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/phalanx-sched/phalanx/tools/kueuerun"
)

func main() {
	// A flag set of its own: controller-runtime registers --kubeconfig
	// on the global one.
	flag := flag.NewFlagSet("phalanx-kueue", flag.ExitOnError)
	kubeconfig := flag.String("kubeconfig", "", "the cluster's kubeconfig")
	tas := flag.Bool("tas", false, "turn on Kueue's TopologyAwareScheduling")
	readyFile := flag.String("ready-file", "", "written, in one rename, once Kueue serves")
	moduleDir := flag.String("kueue-dir", "", "Kueue's module directory (CRDs, webhook manifests); default: found in the module cache")
	verbose := flag.Int("v", 0, "log verbosity")
	_ = flag.Parse(os.Args[1:])
	ctrl.SetLogger(zap.New(zap.UseDevMode(false), zap.Level(zapcore.Level(-*verbose))))

	cfg, err := clientcmd.BuildConfigFromFlags("", *kubeconfig)
	if err != nil {
		fail(err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	err = kueuerun.Run(ctx, cfg, kueuerun.Options{
		TAS:       *tas,
		ModuleDir: *moduleDir,
		Ready: func() {
			if *readyFile == "" {
				return
			}
			tmp := filepath.Join(filepath.Dir(*readyFile), "."+filepath.Base(*readyFile)+".tmp")
			if err := os.WriteFile(tmp, []byte("ready\n"), 0o644); err != nil {
				fail(err)
			}
			if err := os.Rename(tmp, *readyFile); err != nil {
				fail(err)
			}
		},
	})
	if err != nil {
		fail(err)
	}
}

func fail(err error) {
	fmt.Fprintf(os.Stderr, "phalanx-kueue: %v\n", err)
	os.Exit(1)
}
