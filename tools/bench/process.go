package bench

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/phalanx-sched/phalanx/config"
	"github.com/phalanx-sched/phalanx/tools/bench/report"
)

// modulePath is this repository's Go module; `go build` of the scheduler
// binaries runs inside it so that they link exactly the versions go.mod
// pins (k8s.io/kubernetes v1.37.2).
const modulePath = "github.com/phalanx-sched/phalanx"

// Packages built for the child-process arms.
const (
	kubeSchedulerPkg    = "k8s.io/kubernetes/cmd/kube-scheduler"
	phalanxSchedulerPkg = modulePath + "/cmd/phalanx-scheduler"
)

// findModuleDir walks up from the working directory to this module's root.
func findModuleDir() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		data, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil {
			for _, line := range strings.Split(string(data), "\n") {
				if f := strings.Fields(line); len(f) == 2 && f[0] == "module" && f[1] == modulePath {
					return dir, nil
				}
			}
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("no go.mod of %s above the working directory: run from the repository, or pass prebuilt scheduler binaries", modulePath)
		}
		dir = parent
	}
}

// kubernetesVersion is the k8s.io/kubernetes version this binary links.
func kubernetesVersion() string {
	if info, ok := debug.ReadBuildInfo(); ok {
		for _, dep := range info.Deps {
			if dep.Path == "k8s.io/kubernetes" {
				return dep.Version
			}
		}
	}
	return "unknown"
}

// buildBinary runs `go build -o out pkg` in moduleDir. The Go build cache
// makes a repeat build of an unchanged tree take seconds.
func buildBinary(ctx context.Context, moduleDir, pkg, out string) error {
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		return err
	}
	cmd := exec.CommandContext(ctx, "go", "build", "-o", out, pkg)
	cmd.Dir = moduleDir
	if output, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build %s: %w\n%s", pkg, err, output)
	}
	return nil
}

// childScheduler is a kube-scheduler binary (upstream's or Phalanx's)
// running as a child process against the sandbox.
type childScheduler struct {
	cmd     *exec.Cmd
	port    int
	logPath string
	exited  chan struct{}
	waitErr error
	// ready is how long after start /readyz first answered 200; 0 until then.
	ready atomic.Int64
}

// schedulerConfig renders the KubeSchedulerConfiguration for a child:
// base (nil for upstream's defaults with one default-scheduler profile)
// pointed at the sandbox, client throttling lifted as for the in-process
// scheduler, leader election off.
func schedulerConfig(base []byte, kubeconfig string) ([]byte, error) {
	cfg := map[string]interface{}{
		"apiVersion": "kubescheduler.config.k8s.io/v1",
		"kind":       "KubeSchedulerConfiguration",
		"profiles":   []interface{}{map[string]interface{}{"schedulerName": upstreamSchedulerName}},
	}
	if base != nil {
		cfg = map[string]interface{}{}
		if err := yaml.Unmarshal(base, &cfg); err != nil {
			return nil, fmt.Errorf("parse scheduler config: %w", err)
		}
	}
	cfg["clientConnection"] = map[string]interface{}{"kubeconfig": kubeconfig, "qps": 5000, "burst": 10000}
	cfg["leaderElection"] = map[string]interface{}{"leaderElect": false}
	return yaml.Marshal(cfg)
}

// startChild starts binary with the given config and feature gates. Its
// HTTPS endpoint listens on a free loopback port and serves /metrics
// without authentication; its output goes to logPath.
func startChild(binary string, configYAML []byte, gates, dir, logPath string, extra ...string) (*childScheduler, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	configPath := filepath.Join(dir, "scheduler-config.yaml")
	if err := os.WriteFile(configPath, configYAML, 0o644); err != nil {
		return nil, err
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	args := []string{
		"--config=" + configPath,
		"--bind-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(port),
		"--cert-dir=" + filepath.Join(dir, "certs"),
		"--authorization-always-allow-paths=/healthz,/readyz,/livez,/metrics,/debug/pprof/*",
	}
	if gates != "" {
		args = append(args, "--feature-gates="+gates)
	}
	args = append(args, extra...)
	cmd := exec.Command(binary, args...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	// The scheduler must not outlive the harness.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return nil, fmt.Errorf("start %s: %w", binary, err)
	}
	c := &childScheduler{cmd: cmd, port: port, logPath: logPath, exited: make(chan struct{})}
	go func() {
		c.waitErr = cmd.Wait()
		logFile.Close()
		close(c.exited)
	}()
	go c.watchReady(time.Now())
	return c, nil
}

// loopbackClient talks to a child's HTTPS endpoint, which serves a
// self-signed certificate on loopback.
var loopbackClient = &http.Client{
	Timeout:   20 * time.Second,
	Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}},
}

// watchReady polls /readyz (which waits for the informers and event
// handlers to sync) and records when it first answers 200.
func (c *childScheduler) watchReady(start time.Time) {
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	url := fmt.Sprintf("https://127.0.0.1:%d/readyz", c.port)
	for {
		select {
		case <-c.exited:
			return
		case <-tick.C:
		}
		resp, err := loopbackClient.Get(url)
		if err != nil {
			continue
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			c.ready.Store(int64(time.Since(start)))
			return
		}
	}
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// metrics scrapes the child's /metrics.
func (c *childScheduler) metrics(ctx context.Context) (report.Samples, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("https://127.0.0.1:%d/metrics", c.port), nil)
	if err != nil {
		return nil, err
	}
	resp, err := loopbackClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET /metrics: %s: %.200s", resp.Status, body)
	}
	return report.ParseMetrics(string(body))
}

// profileChunk is the length of one CPU profile fetched from a child.
const profileChunk = 2 * time.Second

// profile fetches back-to-back CPU profiles of the child from
// /debug/pprof/profile into prefix-NNN.pprof until stop is closed (the
// chunk in flight is finished), ctx is done or the child exits.
// `go tool pprof` merges the chunks.
func (c *childScheduler) profile(ctx context.Context, stop <-chan struct{}, prefix string) {
	url := fmt.Sprintf("https://127.0.0.1:%d/debug/pprof/profile?seconds=%d", c.port, int(profileChunk/time.Second))
	for i := 0; ; i++ {
		select {
		case <-c.exited:
			return
		case <-stop:
			return
		case <-ctx.Done():
			return
		default:
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return
		}
		resp, err := loopbackClient.Do(req)
		if err != nil {
			// Not serving yet: try again shortly.
			select {
			case <-ctx.Done():
			case <-time.After(50 * time.Millisecond):
			}
			continue
		}
		data, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err == nil && resp.StatusCode == http.StatusOK {
			_ = os.WriteFile(fmt.Sprintf("%s-%03d.pprof", prefix, i), data, 0o644)
		}
	}
}

// heapGrowth is how far the child's RSS must grow past the largest seen
// before heapAtPeak fetches another heap profile: small enough to land
// near the peak, large enough not to fetch one a second while it climbs.
const heapGrowth = 16 << 20

// heapAtPeak polls the child's resident set and, whenever it exceeds the
// largest seen by heapGrowth, replaces path with a fresh heap profile, so
// that path ends up holding the in-use heap nearest to the peak RSS.
func (c *childScheduler) heapAtPeak(ctx context.Context, stop <-chan struct{}, path string) {
	pid := strconv.Itoa(c.cmd.Process.Pid)
	var high uint64
	tick := time.NewTicker(500 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-c.exited:
			return
		case <-stop:
			return
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		data, err := os.ReadFile("/proc/" + pid + "/status")
		if err != nil {
			return
		}
		rss := report.ProcField(string(data), "VmRSS") * 1024
		if rss < high+heapGrowth {
			continue
		}
		if c.heapProfile(ctx, path, false) == nil {
			high = rss
		}
	}
}

// heapProfile writes the child's /debug/pprof/heap to path. The profile's
// in-use figures are those of the last garbage collection, which count
// whatever was allocated while it marked (with plans made every few
// milliseconds, tens of MB of garbage); collect runs a collection first,
// so that they are the heap the scheduler really retains.
func (c *childScheduler) heapProfile(ctx context.Context, path string, collect bool) error {
	url := fmt.Sprintf("https://127.0.0.1:%d/debug/pprof/heap", c.port)
	if collect {
		url += "?gc=1"
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := loopbackClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET /debug/pprof/heap: %s", resp.Status)
	}
	return os.WriteFile(path, data, 0o644)
}

// peakRSS is the child's VmHWM; read it before stop.
func (c *childScheduler) peakRSS() uint64 {
	return peakRSS(strconv.Itoa(c.cmd.Process.Pid))
}

// stop terminates the child (SIGTERM, then SIGKILL after 10 s) and returns
// its CPU time.
func (c *childScheduler) stop() time.Duration {
	select {
	case <-c.exited:
	default:
		_ = c.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-c.exited:
		case <-time.After(10 * time.Second):
			_ = c.cmd.Process.Kill()
			<-c.exited
		}
	}
	if c.cmd.ProcessState == nil {
		return 0
	}
	return c.cmd.ProcessState.UserTime() + c.cmd.ProcessState.SystemTime()
}

// exitError describes an unexpected exit, with the end of the log.
func (c *childScheduler) exitError() error {
	err := c.waitErr
	if err == nil {
		err = errors.New("exited with status 0")
	}
	return fmt.Errorf("scheduler process exited early: %w; last log lines:\n%s", err, tail(c.logPath, 15))
}

// tail returns the last n lines of a file.
func tail(path string, n int) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	var lines []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		lines = append(lines, sc.Text())
		if len(lines) > n {
			lines = lines[1:]
		}
	}
	return strings.Join(lines, "\n")
}

// phalanxConfig is the in-process profile, config/second-scheduler.yaml.
func phalanxConfig() []byte { return config.SecondScheduler }
