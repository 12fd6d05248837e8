package report

import (
	"bytes"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The sampler follows upstream's rules: nothing before the first scheduled
// pod, the first tick only a baseline, an interval without progress merged
// into the next and counted once per interval it spans.
func TestThroughputSampler(t *testing.T) {
	t0 := time.Unix(1000, 0)
	s := &ThroughputSampler{Interval: time.Second}
	s.Observe(t0, 0)
	assert.Nil(t, s.Summary(), "nothing scheduled yet")
	s.Observe(t0.Add(1*time.Second), 5) // baseline
	assert.Nil(t, s.Summary(), "the first sample only sets the baseline")
	s.Observe(t0.Add(2*time.Second), 15)  // 10/s
	s.Observe(t0.Add(3*time.Second), 15)  // nothing: merged
	s.Observe(t0.Add(4*time.Second), 55)  // 40 over 2 s: 20/s, twice
	s.Observe(t0.Add(5*time.Second), 155) // 100/s
	got := s.Summary()
	require.NotNil(t, got)
	assert.Equal(t, 4, got.Samples)
	assert.InDelta(t, (10+20+20+100)/4.0, got.Average, 1e-9)
	assert.InDelta(t, 20, got.Perc50, 1e-9)
	assert.InDelta(t, 100, got.Perc99, 1e-9)
}

func TestHistogramQuantiles(t *testing.T) {
	metrics := func(b1, b2, inf, sum float64) Samples {
		text := `
# TYPE h histogram
h_bucket{result="scheduled",le="0.1"} ` + f(b1) + `
h_bucket{result="scheduled",le="0.2"} ` + f(b2) + `
h_bucket{result="scheduled",le="+Inf"} ` + f(inf) + `
h_sum{result="scheduled"} ` + f(sum) + `
h_count{result="scheduled"} ` + f(inf) + `
h_bucket{result="error",le="0.1"} 100
h_bucket{result="error",le="0.2"} 100
h_bucket{result="error",le="+Inf"} 100
h_sum{result="error"} 1
h_count{result="error"} 100
`
		s, err := ParseMetrics(text)
		require.NoError(t, err)
		return s
	}
	before := metrics(10, 10, 10, 0.5)
	after := metrics(60, 110, 110, 10.5)
	q, ok := HistogramQuantiles(before, after, "h", map[string]string{"result": "scheduled"})
	require.True(t, ok)
	assert.Equal(t, 100.0, q.Count, "only the window, only the matching series")
	assert.InDelta(t, 100, q.Average, 1e-9, "10 s over 100 observations = 100 ms")
	assert.InDelta(t, 100, q.Perc50, 1e-9, "the 50th of 100 observations is the top of the first bucket")
	assert.InDelta(t, 180, q.Perc90, 1e-9, "interpolated inside the second bucket")

	_, ok = HistogramQuantiles(after, after, "h", map[string]string{"result": "scheduled"})
	assert.False(t, ok, "nothing observed in the window")
	_, ok = HistogramQuantiles(nil, after, "missing", nil)
	assert.False(t, ok)

	assert.Equal(t, "h{a=1,b=2}", HistogramKey("h", map[string]string{"b": "2", "a": "1"}))
	assert.Equal(t, "h", HistogramKey("h", nil))
}

func f(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }

func TestWritePerfTable(t *testing.T) {
	ok := Verdict{Pods: 9, Bound: 9, Groups: 3, CompleteGroups: 3}
	results := []PerfResult{
		{Workload: "GangScheduling/x", Arm: ArmPhalanx, Nodes: 10, MeasuredPods: 9, Stop: "all scheduled", DurationSeconds: 1, PodsPerSecond: 9,
			Throughput: &Throughput{Average: 40, Perc50: 40, Perc99: 50, Samples: 3}, Verdict: ok,
			Histograms: map[string]Quantiles{keyAttempt: {Count: 9, Perc50: 5, Perc99: 9}, keyPhalanxGroup: {Count: 3, Perc50: 2, Perc99: 4}}},
		{Workload: "GangScheduling/x", Arm: ArmUpstream, Nodes: 10, MeasuredPods: 9, Stop: "all scheduled", DurationSeconds: 2, PodsPerSecond: 4.5,
			Throughput: &Throughput{Average: 20, Perc50: 20, Perc99: 30, Samples: 3}, Verdict: ok,
			Histograms: map[string]Quantiles{keyPodGroupAttempt: {Count: 3, Perc50: 30, Perc99: 60}}},
		{Workload: "GangScheduling/y", Arm: ArmPhalanx, Error: "boom\nmore"},
	}
	var b bytes.Buffer
	require.NoError(t, WritePerfTable(&b, results))
	out := b.String()
	assert.Contains(t, out, "40.0 / 40.0 / 50.0")
	assert.Contains(t, out, "2.0 / 4.0 (gang Permit wait)")
	assert.Contains(t, out, "30.0 / 60.0 (pod-group cycle)")
	assert.Contains(t, out, "ERROR: boom")
	assert.NotContains(t, out, "more")
	assert.Contains(t, out, "2.00×", "throughput ratio")
	assert.Contains(t, out, "0.50×", "duration ratio")
	assert.True(t, results[0].OK())
	assert.False(t, results[2].OK())
}
