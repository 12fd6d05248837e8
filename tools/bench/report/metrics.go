package report

import (
	"bufio"
	"fmt"
	"strconv"
	"strings"
)

// Sample is one line of the Prometheus text exposition format.
type Sample struct {
	Name   string
	Labels map[string]string
	Value  float64
}

// Samples is a parsed /metrics page.
type Samples []Sample

// ParseMetrics parses the Prometheus text exposition format (what
// kube-scheduler serves on /metrics). Comment lines are skipped.
func ParseMetrics(text string) (Samples, error) {
	var out Samples
	sc := bufio.NewScanner(strings.NewReader(text))
	sc.Buffer(make([]byte, 64*1024), 4*1024*1024)
	lineNo := 0
	for sc.Scan() {
		lineNo++
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		s, err := parseSample(line)
		if err != nil {
			return nil, fmt.Errorf("metrics line %d %q: %w", lineNo, line, err)
		}
		out = append(out, s)
	}
	return out, sc.Err()
}

func parseSample(line string) (Sample, error) {
	s := Sample{Labels: map[string]string{}}
	i := strings.IndexAny(line, "{ \t")
	if i < 0 {
		return s, fmt.Errorf("no value")
	}
	s.Name = line[:i]
	rest := line[i:]
	if rest[0] == '{' {
		end, err := parseLabels(rest, s.Labels)
		if err != nil {
			return s, err
		}
		rest = rest[end:]
	}
	fields := strings.Fields(rest)
	if len(fields) == 0 {
		return s, fmt.Errorf("no value")
	}
	v, err := strconv.ParseFloat(fields[0], 64)
	if err != nil {
		return s, fmt.Errorf("value: %w", err)
	}
	s.Value = v
	return s, nil
}

// parseLabels reads `{a="x",b="y"}` at the start of text into labels and
// returns the index just after the closing brace.
func parseLabels(text string, labels map[string]string) (int, error) {
	i := 1
	for {
		for i < len(text) && (text[i] == ' ' || text[i] == ',') {
			i++
		}
		if i >= len(text) {
			return 0, fmt.Errorf("unterminated labels")
		}
		if text[i] == '}' {
			return i + 1, nil
		}
		eq := strings.IndexByte(text[i:], '=')
		if eq < 0 {
			return 0, fmt.Errorf("label without value")
		}
		name := strings.TrimSpace(text[i : i+eq])
		i += eq + 1
		if i >= len(text) || text[i] != '"' {
			return 0, fmt.Errorf("label %s: value not quoted", name)
		}
		i++
		var b strings.Builder
		for {
			if i >= len(text) {
				return 0, fmt.Errorf("label %s: unterminated value", name)
			}
			c := text[i]
			if c == '\\' && i+1 < len(text) {
				switch text[i+1] {
				case 'n':
					b.WriteByte('\n')
				default:
					b.WriteByte(text[i+1])
				}
				i += 2
				continue
			}
			if c == '"' {
				i++
				break
			}
			b.WriteByte(c)
			i++
		}
		labels[name] = b.String()
	}
}

// Sum adds the values of the samples called name whose labels include
// every pair of match.
func (ss Samples) Sum(name string, match map[string]string) float64 {
	total := 0.0
	for _, s := range ss {
		if s.Name != name {
			continue
		}
		ok := true
		for k, v := range match {
			if s.Labels[k] != v {
				ok = false
				break
			}
		}
		if ok {
			total += s.Value
		}
	}
	return total
}

// Scheduler metric names read by MetricsBetween.
const (
	metricScheduleAttempts      = "scheduler_schedule_attempts_total"
	metricPodSchedulingAttempts = "scheduler_pod_scheduling_attempts"
	metricPodGroupAttempts      = "scheduler_podgroup_schedule_attempts_total"
	metricPlans                 = "phalanx_plan_duration_seconds_count"
	metricExtensionPoint        = "scheduler_framework_extension_point_duration_seconds"
)

// phaseHistograms name the duration histograms MetricsBetween sums, by the
// phase they are reported under.
var phaseHistograms = map[string]string{
	"SchedulingAttempt":   "scheduler_scheduling_attempt_duration_seconds",
	"SchedulingAlgorithm": "scheduler_scheduling_algorithm_duration_seconds",
	"PermitWait":          "scheduler_permit_wait_duration_seconds",
	"PodGroupAttempt":     "scheduler_podgroup_scheduling_attempt_duration_seconds",
	"PodGroupAlgorithm":   "scheduler_podgroup_scheduling_algorithm_duration_seconds",
}

// MetricsBetween turns two scrapes of a scheduler's metrics (before and
// after the measured window; before may be nil for a fresh process) into
// SchedulerMetrics for one profile ("" for all). Histograms without a
// profile label count for every profile.
func MetricsBetween(before, after Samples, profile, source string) *SchedulerMetrics {
	delta := func(name string, match map[string]string) float64 {
		return after.Sum(name, match) - before.Sum(name, match)
	}
	withProfile := func(m map[string]string) map[string]string {
		if profile != "" {
			m["profile"] = profile
		}
		return m
	}
	m := &SchedulerMetrics{
		Scheduled:        delta(metricScheduleAttempts, withProfile(map[string]string{"result": "scheduled"})),
		Unschedulable:    delta(metricScheduleAttempts, withProfile(map[string]string{"result": "unschedulable"})),
		Error:            delta(metricScheduleAttempts, withProfile(map[string]string{"result": "error"})),
		PodGroupAttempts: delta(metricPodGroupAttempts, withProfile(map[string]string{})),
		Plans:            delta(metricPlans, nil),
		PhaseSeconds:     map[string]float64{},
		Source:           source,
	}
	if n := delta(metricPodSchedulingAttempts+"_count", nil); n > 0 {
		m.AttemptsPerBoundPod = delta(metricPodSchedulingAttempts+"_sum", nil) / n
	}
	points := map[string]bool{}
	for _, s := range after {
		if s.Name == metricExtensionPoint+"_sum" && (profile == "" || s.Labels["profile"] == profile) {
			points[s.Labels["extension_point"]] = true
		}
	}
	for point := range points {
		if d := delta(metricExtensionPoint+"_sum", withProfile(map[string]string{"extension_point": point})); d > 0 {
			m.PhaseSeconds[point] = d
		}
	}
	for phase, name := range phaseHistograms {
		// Only some of these carry a profile label; match it where present.
		match := map[string]string{}
		for _, s := range after {
			if s.Name == name+"_sum" {
				if _, has := s.Labels["profile"]; has && profile != "" {
					match["profile"] = profile
				}
				break
			}
		}
		if d := delta(name+"_sum", match); d > 0 {
			m.PhaseSeconds[phase] = d
		}
	}
	return m
}

// metricAPIRequests is the API server's request counter.
const metricAPIRequests = "apiserver_request_total"

// readVerbs are the verbs APIWrites leaves out.
var readVerbs = map[string]bool{"GET": true, "LIST": true, "WATCH": true, "WATCHLIST": true, "CONNECT": true}

// APIRequestsBetween counts the requests an API server served between two
// scrapes of its metrics, by "VERB resource[.group][/subresource]". Only
// keys that grew are returned.
func APIRequestsBetween(before, after Samples) map[string]float64 {
	key := func(s Sample) string {
		k := s.Labels["verb"] + " " + s.Labels["resource"]
		if g := s.Labels["group"]; g != "" {
			k += "." + g
		}
		if sub := s.Labels["subresource"]; sub != "" {
			k += "/" + sub
		}
		return k
	}
	counts := map[string]float64{}
	for _, s := range after {
		if s.Name == metricAPIRequests {
			counts[key(s)] += s.Value
		}
	}
	for _, s := range before {
		if s.Name == metricAPIRequests {
			counts[key(s)] -= s.Value
		}
	}
	for k, v := range counts {
		if v <= 0 {
			delete(counts, k)
		}
	}
	return counts
}

// APIWrites sums the requests of counts that are not reads.
func APIWrites(counts map[string]float64) float64 {
	total := 0.0
	for k, v := range counts {
		verb, _, _ := strings.Cut(k, " ")
		if !readVerbs[verb] {
			total += v
		}
	}
	return total
}
