package sandbox

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"

	restclient "k8s.io/client-go/rest"
	kueueclient "sigs.k8s.io/kueue/client-go/clientset/versioned"
)

// Kueue runs Kueue's controller manager beside the sandbox
// (tools/kueuerun): its CRDs, its webhooks (registered by URL on a
// loopback port), its queue manager, scheduler and job integrations for
// batch/Job, JobSet and PyTorchJob. Kueue admits and preempts; the
// sandbox's Phalanx scheduler places the pods.
//
// It is a child process, the binary tools/cmd/phalanx-kueue: Kueue's
// feature gates clash with kube-apiserver's in one process.
type Kueue struct {
	// Binary is phalanx-kueue; BuildKueue builds it.
	Binary string
	// TAS turns Kueue's own topology-aware scheduling on.
	TAS bool
}

// KueuePackage is the import path of the phalanx-kueue command.
const KueuePackage = "github.com/phalanx-sched/phalanx/tools/cmd/phalanx-kueue"

// BuildKueue builds phalanx-kueue into out with the go command, from the
// module the working directory is in. The build cache makes a rebuild of
// an unchanged tree take seconds.
func BuildKueue(ctx context.Context, out string) error {
	cmd := exec.CommandContext(ctx, "go", "build", "-o", out, KueuePackage)
	if output, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build %s: %w\n%s", KueuePackage, err, output)
	}
	return nil
}

// KueueClient is a client for Kueue's objects, nil when the sandbox runs
// no Kueue.
func (c *Cluster) KueueClient() kueueclient.Interface {
	if c.opts.Kueue == nil {
		return nil
	}
	cfg := restclient.CopyConfig(c.Config)
	// CRDs speak JSON only.
	cfg.ContentType, cfg.AcceptContentTypes = "application/json", "application/json"
	k, err := kueueclient.NewForConfig(cfg)
	if err != nil {
		return nil
	}
	return k
}

// KueuePID is the Kueue child's process id, 0 when the sandbox runs no
// Kueue: the bench reads its CPU time and memory from /proc.
func (c *Cluster) KueuePID() int { return c.kueuePID }

// KueueLog is where the Kueue child's output goes, under Dir.
const KueueLog = "kueue.log"

// startKueue starts the Kueue child and waits until it serves: CRDs
// established, webhooks registered, caches synced.
func (c *Cluster) startKueue(ctx context.Context, k Kueue) error {
	if k.Binary == "" {
		return errors.New("Kueue.Binary is empty (BuildKueue builds it)")
	}
	ready := filepath.Join(c.Dir, "kueue.ready")
	_ = os.Remove(ready)
	logPath := filepath.Join(c.Dir, KueueLog)
	logFile, err := os.Create(logPath)
	if err != nil {
		return err
	}
	args := []string{"--kubeconfig", c.componentKubeconfig, "--ready-file", ready}
	if k.TAS {
		args = append(args, "--tas")
	}
	cmd := exec.Command(k.Binary, args...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return err
	}
	c.kueuePID = cmd.Process.Pid
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		logFile.Close()
		close(exited)
	}()
	c.stops = append(c.stops, func() {
		// SIGTERM first: Kueue's manager stops its controllers and
		// webhook server; a child that hangs is killed.
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
	})
	deadline := time.NewTimer(2 * time.Minute)
	defer deadline.Stop()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		if _, err := os.Stat(ready); err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-exited:
			return fmt.Errorf("kueue exited before it served; its log:\n%s", tail(logPath, 4000))
		case <-deadline.C:
			return fmt.Errorf("kueue did not serve within 2m; its log:\n%s", tail(logPath, 4000))
		case <-tick.C:
		}
	}
}

// tail is the last n bytes of a file, for error messages.
func tail(path string, n int) string {
	data, _ := os.ReadFile(path)
	if len(data) > n {
		data = data[len(data)-n:]
	}
	return string(data)
}
