package integration

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/phalanx-sched/phalanx/tools/sandbox"
	"github.com/phalanx-sched/phalanx/tools/sim"
)

// TestScenarios runs every built-in phalanx-sim scenario (the `make run`
// demo) on one sandbox, as `phalanx-sim run all` does: every expectation
// passes, each scenario cleans up after itself, and the HTML report has a
// picture per step.
func TestScenarios(t *testing.T) {
	c := startCluster(t, sandbox.Options{Scheduler: true, AlsoDefaultScheduler: true, NodeAgent: true, Controllers: true, SchedulerPluginsCRD: true,
		Kueue: &sandbox.Kueue{Binary: kueueBinary(t)}})
	ctx := context.Background()
	scenarios, err := sim.Builtins()
	require.NoError(t, err)
	require.NotEmpty(t, scenarios)

	var results []*sim.Result
	steps := 0
	for _, sc := range scenarios {
		t.Run(sc.Name, func(t *testing.T) {
			steps += len(sc.Steps)
			var out bytes.Buffer
			res := sim.Run(ctx, sim.Cluster{Client: c.Client, Phalanx: c.Phalanx, SchedulerPlugins: xClient(t, c),
				RestartScheduler: c.RestartScheduler, Kueue: c.KueueClient()}, sc, &out)
			results = append(results, res)
			t.Log("\n" + out.String())
			require.NoError(t, res.Err)
			require.Len(t, res.Steps, len(sc.Steps), "every step ran")
			passed, total := res.Checks()
			assert.Positive(t, total, "the scenario checks something")
			for i, s := range res.Steps {
				assert.NoError(t, s.Err, "step %d %q", i+1, s.Name)
				for _, check := range s.Checks {
					assert.True(t, check.Pass, "step %d %q: %s", i+1, s.Name, check.Text)
				}
			}
			assert.Equal(t, total, passed)
			assert.True(t, res.Passed())

			nodes, err := c.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
			require.NoError(t, err)
			assert.Empty(t, nodes.Items, "the scenario deleted its nodes")
			pods, err := c.Client.CoreV1().Pods(res.Namespace).List(ctx, metav1.ListOptions{})
			require.NoError(t, err)
			assert.Empty(t, pods.Items, "the scenario deleted its pods")
		})
	}

	var page bytes.Buffer
	require.NoError(t, sim.WriteReport(&page, results))
	html := page.String()
	assert.Contains(t, html, "<svg ")
	assert.Equal(t, steps, strings.Count(html, `<section class="frame"`), "one frame per step")
	assert.Equal(t, steps, strings.Count(html, "<svg "), "one picture per frame")
	assert.Contains(t, html, "scenarios passed.")
	assert.NotContains(t, html, "FAIL</span>")
}
