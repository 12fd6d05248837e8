package integration

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/phalanx-sched/phalanx/config"
	"github.com/phalanx-sched/phalanx/pkg/debugapi"
	"github.com/phalanx-sched/phalanx/pkg/generated/clientset/versioned"
	"github.com/phalanx-sched/phalanx/pkg/reservation"
	"github.com/phalanx-sched/phalanx/tools/sandbox"
)

// TestSandboxKubeconfigAppearsWhenReady watches for the kubeconfig of a
// starting sandbox, as a script waiting on `phalanx-sim up` does, and uses
// the cluster the moment the file exists: every simulated node and its DRA
// devices are listed, the Phalanx CRDs are served and the file already
// says where the scheduler serves its diagnostics.
func TestSandboxKubeconfigAppearsWhenReady(t *testing.T) {
	path := filepath.Join(t.TempDir(), "up", "kubeconfig")
	topology := sandbox.Topology{Zones: 1, RacksPerZone: 2, NodesPerRack: 2, CPU: "8", Memory: "32Gi"}

	type seen struct {
		nodes, slices int
		crdErr        error
		diagnostics   bool
		err           error
	}
	watched := make(chan seen, 1)
	stopWatching := make(chan struct{})
	go func() {
		for {
			select {
			case <-stopWatching:
				watched <- seen{err: os.ErrNotExist}
				return
			default:
			}
			data, err := os.ReadFile(path)
			if err != nil {
				time.Sleep(time.Millisecond)
				continue
			}
			// The first read must already be a whole kubeconfig.
			var s seen
			kc, err := clientcmd.Load(data)
			if err != nil {
				watched <- seen{err: err}
				return
			}
			_, s.diagnostics = kc.Clusters["sandbox"].Extensions[debugapi.KubeconfigExtension]
			cfg, err := clientcmd.RESTConfigFromKubeConfig(data)
			if err != nil {
				watched <- seen{err: err}
				return
			}
			ctx := context.Background()
			client := kubernetes.NewForConfigOrDie(cfg)
			nodes, err := client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
			if err != nil {
				watched <- seen{err: err}
				return
			}
			s.nodes = len(nodes.Items)
			slices, err := client.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{})
			if err != nil {
				watched <- seen{err: err}
				return
			}
			s.slices = len(slices.Items)
			cfg.ContentType, cfg.AcceptContentTypes = "application/json", "application/json"
			_, s.crdErr = versioned.NewForConfigOrDie(cfg).SchedulingV1alpha1().PodGroups("default").List(ctx, metav1.ListOptions{})
			watched <- s
			return
		}
	}()

	c := startCluster(t, sandbox.Options{
		KubeconfigPath: path,
		Topology:       &topology,
		Devices:        &sandbox.Devices{PerNode: 1},
		Scheduler:      true,
		Diagnostics:    true,
		NodeAgent:      true,
		Controllers:    true,
	})
	assert.Equal(t, path, c.KubeconfigPath)
	var s seen
	select {
	case s = <-watched:
	case <-time.After(30 * time.Second):
		close(stopWatching)
		s = <-watched
	}
	require.NoError(t, s.err, "the kubeconfig exists once Start returns and is usable at first sight")
	assert.Equal(t, topology.Size(), s.nodes, "every simulated node is listed as soon as the kubeconfig appears")
	assert.Equal(t, topology.Size(), s.slices, "every node's DRA devices are published as soon as the kubeconfig appears")
	assert.NoError(t, s.crdErr, "the Phalanx CRDs are served as soon as the kubeconfig appears")
	assert.True(t, s.diagnostics, "the kubeconfig names the scheduler's diagnostics endpoint from the start: the scheduler runs")

	info, err := os.Stat(path)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), info.Mode().Perm(), "the kubeconfig holds the admin token: owner only")
	leftovers, err := filepath.Glob(filepath.Join(filepath.Dir(path), ".kubeconfig-*"))
	require.NoError(t, err)
	assert.Empty(t, leftovers, "no temporary file is left beside the kubeconfig")
}

// TestSandboxUpConfig is `phalanx-sim up --config FILE`: the file is
// checked as phalanx-scheduler checks its --config, a wrong field is
// refused with its path before anything starts, and a valid file runs as
// the sandbox's scheduler: with reservation switched on in it, a starving
// rack-wide gang gets a rack held.
func TestSandboxUpConfig(t *testing.T) {
	write := func(t *testing.T, data string) string {
		path := filepath.Join(t.TempDir(), "scheduler.yaml")
		require.NoError(t, os.WriteFile(path, []byte(data), 0o644))
		return path
	}
	second := string(config.SecondScheduler)
	for _, tc := range []struct {
		name, from, to string
		want           []string
	}{
		{"a misspelt Phalanx plugin argument", "      planTTLSeconds: 30", "      planTTLSeconds: 30\n      reservaton:\n        afterSeconds: 1",
			[]string{"profiles[0].pluginConfig[1].args", `unknown field "reservaton"`}},
		{"a Phalanx plugin argument out of range", "permitWaitingTimeSeconds: 60", "permitWaitingTimeSeconds: 7200",
			[]string{"profiles[0].pluginConfig[0].args", "permitWaitingTimeSeconds=7200 is out of range"}},
		{"a field kube-scheduler does not know", "- schedulerName: phalanx-scheduler", "- schedulerName: phalanx-scheduler\n  percentageOfNodes: 50",
			[]string{`unknown field "profiles[0].percentageOfNodes"`}},
		{"a value kube-scheduler's validation refuses", "- schedulerName: phalanx-scheduler", "- schedulerName: phalanx-scheduler\n  percentageOfNodesToScore: 150",
			[]string{"profiles[0].percentageOfNodesToScore", "not in valid range [0-100]"}},
	} {
		t.Run(tc.name+" is refused with its field path", func(t *testing.T) {
			data := strings.Replace(second, tc.from, strings.ReplaceAll(tc.to, `\n`, "\n"), 1)
			require.NotEqual(t, second, data)
			_, err := sandbox.LoadSchedulerConfig(write(t, data))
			require.Error(t, err)
			for _, w := range tc.want {
				assert.Contains(t, err.Error(), w)
			}
		})
	}

	// The file as a user writes it, loaded and run as `up` runs it.
	data, err := sandbox.LoadSchedulerConfig(write(t, string(reservationConfig(t, 25))))
	require.NoError(t, err)
	c := startCluster(t, sandbox.Options{
		Scheduler: true, NodeAgent: true, SchedulerConfig: data,
		AlsoDefaultScheduler: true, ExtraSchedulerNames: []string{"scheduler-plugins-scheduler"},
	})
	assert.Equal(t, []string{"default-scheduler", "phalanx-scheduler", "scheduler-plugins-scheduler"}, c.Scheduler().SchedulerNames())
	ns := namespace(t, c)
	nodes := rackNodes(t, c, "cfg", 2, 2, "4", nil)
	for i, n := range nodes {
		filler(t, c, ns, fmt.Sprintf("fill-%d", i), n, 0)
	}
	waitBound(t, c, ns, "fill-", len(nodes))
	bigGang(t, c, ns)
	cond := reserved(t, c, ns, "big", metav1.ConditionTrue, reservation.ReasonHolding, 30*time.Second)
	assert.True(t, strings.HasPrefix(heldRack(t, cond), "cfg-rack-"), cond.Message)
}
