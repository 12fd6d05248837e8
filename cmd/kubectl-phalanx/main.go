// Command kubectl-phalanx is the kubectl plugin for the Phalanx scheduler:
// put it on your PATH and run `kubectl phalanx explain`, `fit` and `top`
// (pkg/cli).
package main

import (
	"fmt"
	"os"

	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/phalanx-sched/phalanx/pkg/cli"
)

func main() {
	if err := cli.NewCommand(genericiooptions.IOStreams{In: os.Stdin, Out: os.Stdout, ErrOut: os.Stderr}).Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
}
