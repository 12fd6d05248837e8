package sim

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// arrival is one pod of a stream: when it is created, counted from the
// stream's start, and how long it runs.
type arrival struct {
	at, runtime time.Duration
}

// schedule draws the stream's arrivals from its seed: exponential gaps of
// mean 1/RatePerSecond (a Poisson process, so arrivals bunch and thin out
// as real submissions do) and runtimes uniform in [minRuntime, maxRuntime].
// The same seed gives the same schedule on every run and machine.
func (s *Stream) schedule() []arrival {
	rng := rand.New(rand.NewPCG(uint64(s.Seed), 0x5eed))
	out := make([]arrival, s.Count)
	var at time.Duration
	for i := range out {
		at += time.Duration(rng.ExpFloat64() / s.RatePerSecond * float64(time.Second))
		span := float64(s.maxRuntime - s.minRuntime)
		rt := s.minRuntime + time.Duration(rng.Float64()*span)
		// The node agent reads the runtime to the millisecond.
		out[i] = arrival{at: at, runtime: rt.Round(time.Millisecond)}
	}
	return out
}

// podName numbers a stream's pods with as many digits as the largest
// needs (at least two), so they sort.
func (s *Stream) podName(i int) string {
	width := max(2, len(strconv.Itoa(s.Count-1)))
	return fmt.Sprintf("%s-%0*d", s.Name, width, i)
}

// pod is the stream's i-th pod, which runs for runtime.
func (s *Stream) pod(i int, runtime time.Duration) *corev1.Pod {
	p := newPod(s.podName(i), map[string]string{PodSetLabel: s.Name}, s.CPU, s.Memory, s.GPUs, s.PriorityClass)
	setRuntime(p, runtime)
	if s.DeadlineSlack != "" {
		secs := int64(math.Ceil(runtime.Seconds())) + int64(math.Ceil(s.slack.Seconds()))
		p.Spec.ActiveDeadlineSeconds = ptr.To(secs)
	}
	return p
}

// streams are a scenario's running streams.
type streams struct {
	wg     sync.WaitGroup
	cancel []context.CancelFunc
	mu     sync.Mutex
	err    error
}

// start creates s's pods on its schedule in the background until the last
// one or stop. The first failure ends the stream; failed reports it.
func (st *streams) start(ctx context.Context, cl Cluster, ns string, s *Stream) {
	ctx, cancel := context.WithCancel(ctx)
	st.cancel = append(st.cancel, cancel)
	plan := s.schedule()
	begin := time.Now()
	st.wg.Go(func() {
		timer := time.NewTimer(0)
		defer timer.Stop()
		for i, a := range plan {
			timer.Reset(time.Until(begin.Add(a.at)))
			select {
			case <-ctx.Done():
				return
			case <-timer.C:
			}
			_, err := cl.Client.CoreV1().Pods(ns).Create(ctx, s.pod(i, a.runtime), metav1.CreateOptions{})
			if err != nil {
				if ctx.Err() == nil {
					st.mu.Lock()
					st.err = fmt.Errorf("stream %s: create pod %s: %w", s.Name, s.podName(i), err)
					st.mu.Unlock()
				}
				return
			}
		}
	})
}

// failed is the first error of any stream, once.
func (st *streams) failed() error {
	st.mu.Lock()
	defer st.mu.Unlock()
	err := st.err
	st.err = nil
	return err
}

// stop ends every stream and waits for them.
func (st *streams) stop() {
	for _, c := range st.cancel {
		c()
	}
	st.wg.Wait()
}

// describe says what the stream does, e.g. "start a stream of 24 plain
// pods job-00..23 of 4 cpu: one arrives every 1s on average (Poisson, seed
// 1), each runs 3s to 6s".
func (s *Stream) describe() string {
	out := fmt.Sprintf("start a stream of %d plain pods %s..%s of %s in the background: one arrives every %s on average (Poisson, seed %d), each runs %s to %s",
		s.Count, s.podName(0), s.podName(s.Count - 1)[len(s.Name)+1:], requests(s.CPU, s.Memory, s.GPUs),
		time.Duration(float64(time.Second)/s.RatePerSecond).Round(10*time.Millisecond), s.Seed, s.minRuntime, s.maxRuntime)
	if s.DeadlineSlack != "" {
		out += fmt.Sprintf(" and declares activeDeadlineSeconds of its runtime + %s", s.slack)
	}
	if s.PriorityClass != "" {
		out += " (priority " + s.PriorityClass + ")"
	}
	return out
}
