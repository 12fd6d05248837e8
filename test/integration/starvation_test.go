package integration

import (
	"context"
	"fmt"
	"math"
	"math/rand"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	v1alpha1 "github.com/phalanx-sched/phalanx/apis/scheduling/v1alpha1"
	"github.com/phalanx-sched/phalanx/config"
	"github.com/phalanx-sched/phalanx/tools/sandbox"
)

// starvationArm is one scheduler configuration of the starvation
// experiment.
type starvationArm struct {
	name string
	// reservation is the PhalanxTopology reservation args block, "" for off.
	reservation string
}

// starvationResult is what one arm measured.
type starvationResult struct {
	arm          string
	gangStart    time.Duration // from the gang's creation; -1 when it never started
	smallDone    int
	smallBound   int
	smallPending int
	meanWait     time.Duration
	utilisation  float64
}

// The starvation experiment: 2 racks × 4 nodes × 4 cpu (32 cpu). A
// stream of 1-node jobs (4 cpu, runtime uniform in 5-15s, declared with
// activeDeadlineSeconds of the runtime rounded up plus 2s) arrives as a
// Poisson process at starvationRate jobs/s (PHALANX_STARVATION_RATE
// overrides; 0.85 offers about 106% of the cluster), from t=0. At
// t=5s a gang of 4 × 4 cpu that needs one whole rack arrives, with a 20s
// runtime. The run lasts starvationWindow; the node agent ends pods when
// their runtime does.
// starvationRate is the default arrival rate of small jobs per second.
var starvationRate = 0.85

const (
	starvationWindow  = 90 * time.Second
	starvationGangAt  = 5 * time.Second
	starvationGangRun = 20
)

// TestStarvation runs the experiment under each arm and prints the table
// of docs/benchmarks.md. It takes about 6 minutes, so it runs only with
// PHALANX_STARVATION=1 (seed: PHALANX_STARVATION_SEED, default 1).
func TestStarvation(t *testing.T) {
	if os.Getenv("PHALANX_STARVATION") == "" {
		t.Skip("set PHALANX_STARVATION=1 to run the starvation experiment (about 6 minutes)")
	}
	seed := int64(1)
	if v := os.Getenv("PHALANX_STARVATION_SEED"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		require.NoError(t, err)
		seed = n
	}
	arms := []starvationArm{
		{name: "reservation off"},
		{name: "reservation on, backfill off", reservation: "reservation:\n        afterSeconds: 5\n        maxHoldSeconds: 120\n        backfill: false"},
		{name: "reservation on, backfill on", reservation: "reservation:\n        afterSeconds: 5\n        maxHoldSeconds: 120"},
	}
	rate := starvationRate
	if v := os.Getenv("PHALANX_STARVATION_RATE"); v != "" {
		f, err := strconv.ParseFloat(v, 64)
		require.NoError(t, err)
		rate = f
	}
	var results []starvationResult
	for _, arm := range arms {
		results = append(results, runStarvation(t, arm, seed, rate))
	}
	var b strings.Builder
	fmt.Fprintf(&b, "| arm | big gang start | small jobs done | small jobs started | still pending | mean wait of started small jobs | utilisation |\n|---|---|---|---|---|---|---|\n")
	for _, r := range results {
		start := "never (in the window)"
		if r.gangStart >= 0 {
			start = fmt.Sprintf("%.0fs", r.gangStart.Seconds())
		}
		fmt.Fprintf(&b, "| %s | %s | %d | %d | %d | %.1fs | %.0f%% |\n", r.arm, start, r.smallDone, r.smallBound, r.smallPending, r.meanWait.Seconds(), 100*r.utilisation)
	}
	t.Logf("starvation experiment, seed %d, %.2f jobs/s, window %s:\n%s", seed, rate, starvationWindow, b.String())
}

func runStarvation(t *testing.T, arm starvationArm, seed int64, rate float64) starvationResult {
	cfg := string(config.SecondScheduler)
	if arm.reservation != "" {
		cfg = strings.Replace(cfg, "      planTTLSeconds: 30", "      planTTLSeconds: 30\n      "+arm.reservation, 1)
		require.Contains(t, cfg, "reservation:")
	}
	c := startCluster(t, sandbox.Options{Scheduler: true, NodeAgent: true, SchedulerConfig: []byte(cfg)})
	defer c.Stop()
	ctx := context.Background()
	rackNodes(t, c, "s", 2, 4, "4", nil)
	ns := namespace(t, c)

	rng := rand.New(rand.NewSource(seed))
	runtimes := map[string]float64{}
	created := map[string]time.Time{}
	begin := time.Now()
	gangCreated := false
	var gangAt time.Time
	next := time.Duration(0)
	for i := 0; ; i++ {
		next += time.Duration(rng.ExpFloat64() / rate * float64(time.Second))
		if next >= starvationWindow {
			break
		}
		if !gangCreated && next >= starvationGangAt {
			time.Sleep(time.Until(begin.Add(starvationGangAt)))
			pg := gangPG("big", 4)
			pg.Spec.SchedulingConstraints = &v1alpha1.PodGroupSchedulingConstraints{Topology: topo(sandbox.RackLabel)}
			createPodGroup(t, c, ns, pg)
			for j := 0; j < 4; j++ {
				p := member{name: fmt.Sprintf("big-%d", j), labels: inGroup("big"), cpu: "4"}.pod()
				p.Annotations = map[string]string{sandbox.RuntimeAnnotation: strconv.Itoa(starvationGangRun)}
				_, err := c.Client.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{})
				require.NoError(t, err)
				runtimes[p.Name] = starvationGangRun
			}
			gangCreated, gangAt = true, time.Now()
		}
		time.Sleep(time.Until(begin.Add(next)))
		runtime := 5 + 10*rng.Float64()
		name := fmt.Sprintf("job-%03d", i)
		p := member{name: name, cpu: "4"}.pod()
		p.Annotations = map[string]string{sandbox.RuntimeAnnotation: strconv.FormatFloat(runtime, 'f', 2, 64)}
		p.Spec.ActiveDeadlineSeconds = ptr.To(int64(math.Ceil(runtime)) + 2)
		_, err := c.Client.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{})
		require.NoError(t, err)
		runtimes[name] = runtime
		created[name] = time.Now()
	}
	time.Sleep(time.Until(begin.Add(starvationWindow)))
	end := time.Now()

	pods, err := c.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	res := starvationResult{arm: arm.name, gangStart: -1}
	var busy float64 // cpu-seconds
	var waits time.Duration
	var gangLast time.Time
	gangStarted := 0
	for _, p := range pods.Items {
		if p.Status.StartTime == nil {
			if !strings.HasPrefix(p.Name, "big-") {
				res.smallPending++
			}
			continue
		}
		start := p.Status.StartTime.Time
		stop := start.Add(time.Duration(runtimes[p.Name] * float64(time.Second)))
		if stop.After(end) {
			stop = end
		}
		if stop.After(start) {
			busy += 4 * stop.Sub(start).Seconds()
		}
		if strings.HasPrefix(p.Name, "big-") {
			gangStarted++
			if start.After(gangLast) {
				gangLast = start
			}
			continue
		}
		res.smallBound++
		waits += start.Sub(created[p.Name])
		if p.Status.Phase == corev1.PodSucceeded {
			res.smallDone++
		}
	}
	if gangStarted == 4 {
		res.gangStart = gangLast.Sub(gangAt)
	}
	if res.smallBound > 0 {
		res.meanWait = waits / time.Duration(res.smallBound)
	}
	res.utilisation = busy / (32 * end.Sub(begin).Seconds())
	t.Logf("%s: %+v", arm.name, res)
	return res
}
