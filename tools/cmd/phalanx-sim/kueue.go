package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/phalanx-sched/phalanx/tools/sandbox"
)

// kueueBinary is phalanx-kueue, Kueue's manager as the sandbox runs it:
// the one beside this executable (make build and make run put both in
// bin/), or else one built now from the working directory's module.
func kueueBinary(ctx context.Context) (string, error) {
	if exe, err := os.Executable(); err == nil {
		bin := filepath.Join(filepath.Dir(exe), "phalanx-kueue")
		if _, err := os.Stat(bin); err == nil {
			return bin, nil
		}
	}
	dir, err := os.MkdirTemp("", "phalanx-kueue-")
	if err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "phalanx-kueue")
	start := time.Now()
	fmt.Println("Building phalanx-kueue (Kueue's manager) ...")
	if err := sandbox.BuildKueue(ctx, bin); err != nil {
		return "", err
	}
	fmt.Printf("Built phalanx-kueue in %.1fs.\n", time.Since(start).Seconds())
	return bin, nil
}
