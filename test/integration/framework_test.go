// Package integration runs Phalanx end to end against the in-process control
// plane of tools/sandbox: real kube-apiserver, real CRDs, real scheduler. It is
// the only test package that links the API server, to keep builds cheap.
package integration

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/restmapper"
	"k8s.io/klog/v2"

	"github.com/phalanx-sched/phalanx/tools/sandbox"
)

func TestMain(m *testing.M) {
	// The control plane logs a lot at info level; keep test output readable.
	// PHALANX_TEST_LOG=/path/file[:verbosity] writes the control plane's
	// logs there, for debugging a failing test.
	fs := flag.NewFlagSet("klog", flag.ContinueOnError)
	klog.InitFlags(fs)
	_ = fs.Set("logtostderr", "false")
	_ = fs.Set("stderrthreshold", "FATAL")
	klog.SetOutput(io.Discard)
	if dest := os.Getenv("PHALANX_TEST_LOG"); dest != "" {
		path, v, _ := strings.Cut(dest, ":")
		if v == "" {
			v = "4"
		}
		if f, err := os.Create(path); err == nil {
			_ = fs.Set("v", v)
			klog.SetOutput(f)
		}
	}
	code := m.Run()
	processFiles.remove()
	os.Exit(code)
}

// processFiles are files the test process made outside any test's
// TempDir (binaries shared by several tests), removed when it ends.
var processFiles fileList

type fileList struct {
	mu    sync.Mutex
	paths []string
}

func (l *fileList) add(path string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.paths = append(l.paths, path)
}

func (l *fileList) remove() {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, p := range l.paths {
		_ = os.Remove(p)
	}
}

// startCluster starts a sandbox for one test and stops it at cleanup.
func startCluster(t *testing.T, opts sandbox.Options) *sandbox.Cluster {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	start := time.Now()
	c, err := sandbox.Start(ctx, opts)
	require.NoError(t, err, "start sandbox")
	t.Logf("sandbox started in %v", time.Since(start).Round(time.Millisecond))
	t.Cleanup(func() {
		c.Stop()
		cancel()
	})
	return c
}

// namespace creates a fresh namespace for a test.
func namespace(t *testing.T, c *sandbox.Cluster) string {
	t.Helper()
	ns, err := c.Client.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "t-"},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	return ns.Name
}

// applyYAML creates every document of a multi-document YAML stream in ns
// (cluster-scoped objects ignore ns). It returns the first error the API
// server reports, naming the object.
func applyYAML(ctx context.Context, c *sandbox.Cluster, ns string, data []byte) error {
	dc, err := discovery.NewDiscoveryClientForConfig(c.Config)
	if err != nil {
		return err
	}
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(dc))
	dyn, err := dynamic.NewForConfig(c.Config)
	if err != nil {
		return err
	}
	decoder := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	for {
		obj := &unstructured.Unstructured{}
		if err := decoder.Decode(&obj.Object); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
		if len(obj.Object) == 0 {
			continue
		}
		gvk := obj.GroupVersionKind()
		mapping, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if err != nil {
			return fmt.Errorf("map %s: %w", gvk, err)
		}
		var ri dynamic.ResourceInterface = dyn.Resource(mapping.Resource)
		if mapping.Scope.Name() == meta.RESTScopeNameNamespace {
			ri = dyn.Resource(mapping.Resource).Namespace(ns)
		}
		if _, err := ri.Create(ctx, obj, metav1.CreateOptions{FieldValidation: "Strict"}); err != nil {
			return fmt.Errorf("create %s %s: %w", gvk.Kind, obj.GetName(), err)
		}
	}
}

// eventually polls cond until it returns true or the deadline passes.
func eventually(t *testing.T, timeout time.Duration, what string, cond func() (bool, error)) {
	t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, timeout, true, func(context.Context) (bool, error) {
		return cond()
	})
	require.NoError(t, err, "waiting for %s", what)
}

// boundPods returns the pods of ns that have a node, by name.
func boundPods(t *testing.T, c *sandbox.Cluster, ns string) map[string]string {
	t.Helper()
	pods, err := c.Client.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{})
	require.NoError(t, err)
	out := map[string]string{}
	for _, p := range pods.Items {
		if p.Spec.NodeName != "" {
			out[p.Name] = p.Spec.NodeName
		}
	}
	return out
}

func contains(s, sub string) bool { return strings.Contains(s, sub) }
