package sim

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
	kueueclient "sigs.k8s.io/kueue/client-go/clientset/versioned"
	xv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"
	xversioned "sigs.k8s.io/scheduler-plugins/pkg/generated/clientset/versioned"

	v1alpha1 "github.com/phalanx-sched/phalanx/apis/scheduling/v1alpha1"
	"github.com/phalanx-sched/phalanx/pkg/generated/clientset/versioned"
)

// pollInterval is how often waits look at the namespace.
const pollInterval = 100 * time.Millisecond

// settleTimeout bounds how long a snapshot waits for binds and evictions
// in progress to finish.
const settleTimeout = 5 * time.Second

// cleanupTimeout bounds the teardown after a scenario.
const cleanupTimeout = time.Minute

// Cluster is what scenarios run against: the clients of a cluster where
// the Phalanx scheduler (schedulerName phalanx-scheduler), a node agent and
// the Phalanx and Job controllers run, such as a tools/sandbox cluster. Each
// scenario creates its own nodes and deletes them afterwards, so the
// cluster should have no other nodes and scenarios must run one at a time.
type Cluster struct {
	Client  kubernetes.Interface
	Phalanx versioned.Interface
	// SchedulerPlugins creates scheduler-plugins' scheduling.x-k8s.io
	// PodGroups, for scenarios that use them; nil where the cluster does not
	// serve their CRD.
	SchedulerPlugins xversioned.Interface
	// Kueue creates Kueue's objects (queues, flavors, cohorts, workload
	// priority classes), for scenarios that run with Kueue in front; nil
	// where the cluster runs no Kueue.
	Kueue kueueclient.Interface
	// RestartScheduler replaces the cluster's scheduler with one that runs
	// config (a KubeSchedulerConfiguration), or with the cluster's own
	// configuration again when config is nil; the new one must outlive
	// the call. Scenarios with a scheduler block need it; nil where the
	// cluster cannot restart its scheduler.
	RestartScheduler func(config []byte) error
	// SchedulerConfig is the configuration the cluster's scheduler runs,
	// which a scenario's scheduler block changes; empty for
	// config/second-scheduler.yaml.
	SchedulerConfig []byte
}

// Result is the outcome of one scenario.
type Result struct {
	Scenario *Scenario
	// Namespace the scenario ran in.
	Namespace string
	Steps     []StepResult
	// Skipped counts steps not run because an earlier one failed to
	// complete (an action error or a wait that timed out).
	Skipped int
	// Err is set when the scenario could not run to its end or could not
	// clean up after itself.
	Err      error
	Duration time.Duration
}

// Passed is true when every step ran and every check passed.
func (r *Result) Passed() bool {
	if r.Err != nil || r.Skipped > 0 {
		return false
	}
	for _, s := range r.Steps {
		if s.Err != nil {
			return false
		}
		for _, c := range s.Checks {
			if !c.Pass {
				return false
			}
		}
	}
	return true
}

// Checks counts the checks that ran and those that passed.
func (r *Result) Checks() (passed, total int) {
	for _, s := range r.Steps {
		for _, c := range s.Checks {
			total++
			if c.Pass {
				passed++
			}
		}
	}
	return passed, total
}

// StepResult is one step: what it did, the snapshot after it and its checks.
type StepResult struct {
	Name string
	// Action says in words what the step did.
	Action   string
	Snapshot Snapshot
	// Checks are the wait's outcome, if the step waited, then the step's
	// expectations in order.
	Checks []Check
	// Err is an action that failed (an API error, a timeout).
	Err      error
	Duration time.Duration
}

// Check is one verified statement.
type Check struct {
	Text string
	Pass bool
}

// runner is one scenario's run.
type runner struct {
	cl         Cluster
	sc         *Scenario
	ns         string
	nodes      []string
	classes    []string
	priorities map[string]int32
	order      groupOrder
	ev         *evictions
	client     *client // see api
	streams    streams
	// reconfigured is set once the scheduler runs the scenario's
	// configuration, so teardown restores the cluster's.
	reconfigured bool
	// slices and deviceClasses are the DRA objects the scenario's dra
	// block created (dra.go).
	slices, deviceClasses []string
	// clusterObjects are the cluster-wide objects create.objects made
	// (Kueue's ClusterQueues, flavors, cohorts, priority classes), in
	// order, for the teardown.
	clusterObjects []createdObject
}

// createdObject is an object the teardown deletes by name.
type createdObject struct {
	api  *kindAPI
	name string
}

// Run runs a scenario in a new namespace of the cluster, streaming a table
// per step to out (nil discards it), and cleans up its pods, groups, nodes
// and PriorityClasses afterwards.
func Run(ctx context.Context, cl Cluster, sc *Scenario, out io.Writer) *Result {
	if out == nil {
		out = io.Discard
	}
	start := time.Now()
	res := &Result{Scenario: sc}
	if err := sc.Validate(); err != nil {
		res.Err = err
		return res
	}
	writeHeader(out, sc)
	r := &runner{cl: cl, sc: sc, priorities: map[string]int32{}, order: groupOrder{}}
	defer func() {
		if err := r.teardown(ctx); err != nil {
			res.Err = errors.Join(res.Err, fmt.Errorf("clean up after scenario %s: %w", sc.Name, err))
		}
		res.Duration = time.Since(start)
		writeFooter(out, res)
	}()
	if err := r.setup(ctx); err != nil {
		res.Err = fmt.Errorf("set up scenario %s: %w", sc.Name, err)
		res.Skipped = len(sc.Steps)
		return res
	}
	res.Namespace = r.ns
	for i := range sc.Steps {
		sr, stop := r.step(ctx, &sc.Steps[i])
		var prev Snapshot
		if i > 0 {
			prev = res.Steps[i-1].Snapshot
		}
		res.Steps = append(res.Steps, sr)
		writeStep(out, sc, i, &sr, prev)
		if stop {
			res.Skipped = len(sc.Steps) - i - 1
			break
		}
	}
	return res
}

func (r *runner) setup(ctx context.Context) error {
	ns, err := r.cl.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
		GenerateName: "sim-" + r.sc.Name + "-",
		Labels:       map[string]string{"sim.phalanx.dev/scenario": r.sc.Name},
	}}, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("create namespace: %w", err)
	}
	r.ns = ns.Name
	if r.sc.Kueue && r.cl.Kueue == nil {
		return errors.New("the scenario runs with Kueue in front, and this cluster runs no Kueue (phalanx-sim run starts it for such a scenario)")
	}
	if r.sc.Scheduler != nil {
		if r.cl.RestartScheduler == nil {
			return errors.New("the scenario sets the scheduler's configuration, and this cluster cannot restart its scheduler")
		}
		cfg, err := r.sc.Scheduler.apply(r.cl.SchedulerConfig)
		if err != nil {
			return err
		}
		r.reconfigured = true
		if err := r.cl.RestartScheduler(cfg); err != nil {
			return fmt.Errorf("restart the scheduler with the scenario's configuration: %w", err)
		}
	}
	for _, pc := range r.sc.PriorityClasses {
		if err := r.createPriorityClass(ctx, pc); err != nil {
			return err
		}
		r.priorities[pc.Name] = pc.Value
	}
	if err := r.createNodes(ctx, r.sc.Cluster.nodes()); err != nil {
		return err
	}
	if err := r.publishDevices(ctx, r.sc.Cluster.nodes()); err != nil {
		return err
	}
	r.ev, err = watchEvictions(ctx, r.cl.Client, r.ns)
	return err
}

// createPriorityClass creates a class, or reuses an identical one.
func (r *runner) createPriorityClass(ctx context.Context, pc PriorityClass) error {
	obj := &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: pc.Name}, Value: pc.Value,
		Description: "created by phalanx-sim scenario " + r.sc.Name}
	if pc.PreemptionPolicy != "" {
		obj.PreemptionPolicy = ptr.To(pc.PreemptionPolicy)
	}
	_, err := r.cl.Client.SchedulingV1().PriorityClasses().Create(ctx, obj, metav1.CreateOptions{})
	if err == nil {
		r.classes = append(r.classes, pc.Name)
		return nil
	}
	if !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create PriorityClass %s: %w", pc.Name, err)
	}
	have, err := r.cl.Client.SchedulingV1().PriorityClasses().Get(ctx, pc.Name, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("get PriorityClass %s: %w", pc.Name, err)
	}
	wantPolicy := pc.PreemptionPolicy
	if wantPolicy == "" {
		wantPolicy = corev1.PreemptLowerPriority
	}
	if have.Value != pc.Value || ptr.Deref(have.PreemptionPolicy, corev1.PreemptLowerPriority) != wantPolicy {
		return fmt.Errorf("PriorityClass %s already exists with value %d and policy %s; the scenario needs %d and %s: delete it or rename the scenario's class",
			pc.Name, have.Value, ptr.Deref(have.PreemptionPolicy, corev1.PreemptLowerPriority), pc.Value, wantPolicy)
	}
	return nil
}

// createNodes creates nodes with a few workers.
func (r *runner) createNodes(ctx context.Context, nodes []*corev1.Node) error {
	const workers = 8
	var mu sync.Mutex
	var errs []error
	work := make(chan *corev1.Node)
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for n := range work {
				created, err := r.cl.Client.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{})
				if err == nil {
					mu.Lock()
					r.nodes = append(r.nodes, n.Name)
					mu.Unlock()
					// A kubelet would report the status; create drops it.
					created.Status = n.Status
					_, err = r.cl.Client.CoreV1().Nodes().UpdateStatus(ctx, created, metav1.UpdateOptions{})
				}
				if err != nil {
					mu.Lock()
					errs = append(errs, fmt.Errorf("create node %s: %w", n.Name, err))
					mu.Unlock()
				}
			}
		})
	}
	for _, n := range nodes {
		work <- n
	}
	close(work)
	wg.Wait()
	return errors.Join(errs...)
}

// step runs one step. stop says the scenario cannot go on.
func (r *runner) step(ctx context.Context, st *Step) (sr StepResult, stop bool) {
	start := time.Now()
	sr = StepResult{Name: st.Name, Action: st.describe()}
	var err error
	switch {
	case st.Create != nil:
		err = r.create(ctx, st.Create)
	case st.AddNodes != nil:
		err = r.createNodes(ctx, st.AddNodes.nodes(r.sc.Cluster))
	case st.DeleteNodes != nil:
		err = r.deleteNodes(ctx, st.DeleteNodes)
	case st.Delete != nil:
		err = r.delete(ctx, st.Delete)
	case st.Wait != nil:
		var c Check
		c, err = r.wait(ctx, st.Wait)
		if err == nil {
			sr.Checks = append(sr.Checks, c)
			stop = !c.Pass
		}
	case st.Stream != nil:
		r.order.rank(groupRef{KindPods, st.Stream.Name})
		r.streams.start(ctx, r.cl, r.ns, st.Stream)
	}
	if err == nil {
		err = r.streams.failed()
	}
	if err != nil {
		sr.Err = err
		stop = true
	}
	snap, serr := r.snapshot(ctx)
	if serr != nil {
		sr.Err = errors.Join(sr.Err, serr)
		sr.Duration = time.Since(start)
		return sr, true
	}
	sr.Snapshot = snap
	sr.Checks = append(sr.Checks, evaluate(st.Expect, snap)...)
	sr.Duration = time.Since(start)
	return sr, stop
}

// snapshot observes the namespace once the scheduler has settled (see
// observation.settling): every pending pod has its verdict, no gang is
// caught between its first and last bind (a picture of 2 of 5 bound would
// suggest a partial start that is not happening), and no eviction is half
// done. It gives up waiting after settleTimeout and shows what it sees.
func (r *runner) snapshot(ctx context.Context) (Snapshot, error) {
	var o *observation
	err := wait.PollUntilContextTimeout(ctx, pollInterval, settleTimeout, true, func(ctx context.Context) (bool, error) {
		var err error
		if o, err = r.observe(ctx, true); err != nil {
			return false, err
		}
		return !o.settling() && !r.ev.evicting(o), nil
	})
	if err != nil && (o == nil || !wait.Interrupted(err)) {
		return Snapshot{}, fmt.Errorf("snapshot: %w", err)
	}
	r.ev.note(o.pods)
	return buildSnapshot(o, r.ev.counts(o), r.priorities, r.order), nil
}

// create makes the inline objects, then the generated groups, then the
// generated pods (round-robin across generators when interleaved).
func (r *runner) create(ctx context.Context, c *Create) error {
	// Rows of the tables follow the order in which groups are created.
	for _, o := range c.objects {
		switch obj := o.obj.(type) {
		case *corev1.Pod:
			r.order.rank(groupOf(obj))
		case *v1alpha1.PodGroup:
			r.order.rank(groupRef{KindPodGroup, obj.Name})
		case *xv1alpha1.PodGroup:
			r.order.rank(groupRef{KindPodGroup, obj.Name})
		case *v1alpha1.CompositePodGroup:
			r.order.rank(groupRef{KindComposite, obj.Name})
		}
		if err := r.createObject(ctx, o); err != nil {
			return err
		}
	}
	var queues [][]*corev1.Pod
	for i := range c.Gangs {
		g := &c.Gangs[i]
		if pg := g.upstreamPodGroup(); pg != nil {
			r.order.rank(groupRef{KindPodGroup, g.Name})
			if err := r.createObject(ctx, inlineObject{kind: "PodGroup", obj: pg}); err != nil {
				return err
			}
		} else if pg := g.podGroup(); pg != nil {
			r.order.rank(groupRef{KindPodGroup, g.Name})
			if err := r.createObject(ctx, inlineObject{kind: "PodGroup", obj: pg}); err != nil {
				return err
			}
		} else {
			r.order.rank(groupRef{KindLabelGang, g.Name})
		}
		queues = append(queues, g.pods())
	}
	for i := range c.Pods {
		r.order.rank(groupRef{KindPods, c.Pods[i].Name})
		queues = append(queues, c.Pods[i].pods())
	}
	var order []*corev1.Pod
	if c.Interleave {
		for i := 0; ; i++ {
			added := false
			for _, q := range queues {
				if i < len(q) {
					order = append(order, q[i])
					added = true
				}
			}
			if !added {
				break
			}
		}
	} else {
		for _, q := range queues {
			order = append(order, q...)
		}
	}
	for _, p := range order {
		if err := r.createObject(ctx, inlineObject{kind: "Pod", obj: p}); err != nil {
			return err
		}
	}
	return nil
}

// delete removes the objects a Delete names and waits until they are gone.
func (r *runner) delete(ctx context.Context, d *Delete) error {
	kc := r.api().deletable(d.Kind)
	have, err := kc.names(ctx)
	if err != nil {
		return fmt.Errorf("list %ss: %w", d.Kind, err)
	}
	var targets []string
	for _, n := range have {
		if n == d.Name || (d.Prefix != "" && strings.HasPrefix(n, d.Prefix)) {
			targets = append(targets, n)
		}
	}
	if len(targets) == 0 {
		what := d.Name
		if d.Prefix != "" {
			what = "named " + d.Prefix + "*"
		}
		return fmt.Errorf("no %s %s in the scenario's namespace (it has %d: %s)", d.Kind, what, len(have), orNone(have))
	}
	for _, n := range targets {
		if err := kc.delete(ctx, n); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("delete %s %s: %w", d.Kind, n, err)
		}
	}
	return r.waitGone(ctx, kc, targets)
}

// waitGone polls until none of names is listed.
func (r *runner) waitGone(ctx context.Context, res *kindAPI, names []string) error {
	var left []string
	err := wait.PollUntilContextTimeout(ctx, pollInterval, defaultTimeout, true, func(ctx context.Context) (bool, error) {
		have, err := res.names(ctx)
		if err != nil {
			return false, err
		}
		left = left[:0]
		present := map[string]bool{}
		for _, n := range have {
			present[n] = true
		}
		for _, n := range names {
			if present[n] {
				left = append(left, n)
			}
		}
		return len(left) == 0, nil
	})
	if err != nil {
		return fmt.Errorf("%d %ss still there after %s (%s): %w", len(left), res.kind, defaultTimeout, strings.Join(left, ", "), err)
	}
	return nil
}

// deleteNodes removes nodes and the pods bound to them.
func (r *runner) deleteNodes(ctx context.Context, d *DeleteNodes) error {
	nodes := r.api().nodes
	have, err := nodes.names(ctx)
	if err != nil {
		return fmt.Errorf("list nodes: %w", err)
	}
	exists := map[string]bool{}
	for _, n := range have {
		exists[n] = true
	}
	var targets []string
	if d.Prefix != "" {
		for _, n := range have {
			if strings.HasPrefix(n, d.Prefix) {
				targets = append(targets, n)
			}
		}
		if len(targets) == 0 {
			return fmt.Errorf("no node name starts with %q", d.Prefix)
		}
	} else {
		for _, n := range d.Names {
			if !exists[n] {
				return fmt.Errorf("no node %s to delete", n)
			}
		}
		targets = d.Names
	}
	for _, n := range targets {
		pods, err := r.cl.Client.CoreV1().Pods(metav1.NamespaceAll).List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + n})
		if err != nil {
			return fmt.Errorf("list pods on node %s: %w", n, err)
		}
		for _, p := range pods.Items {
			err := r.cl.Client.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)})
			if err != nil && !apierrors.IsNotFound(err) {
				return fmt.Errorf("delete pod %s/%s of node %s: %w", p.Namespace, p.Name, n, err)
			}
		}
		if err := nodes.delete(ctx, n); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("delete node %s: %w", n, err)
		}
	}
	return r.waitGone(ctx, nodes, targets)
}

// wait runs a Wait and says whether its condition was met. An error is an
// API failure, not a timeout. Polls observe under the scenario's context,
// not the poll's: a list started just before the timeout would otherwise
// fail with the client's rate-limiter error (it will not wait past a
// deadline) instead of the wait timing out.
func (r *runner) wait(ctx context.Context, w *Wait) (Check, error) {
	what := w.selection()
	var last *observation
	want := func(sel []*corev1.Pod) int {
		if w.Count > 0 {
			return w.Count
		}
		return max(len(sel), 1)
	}
	if w.For == "bound" || w.For == "done" {
		count, verb := countBound, "bound"
		if w.For == "done" {
			count, verb = countDone, "done"
		}
		var reached, target int
		err := wait.PollUntilContextTimeout(ctx, pollInterval, w.timeout, true, func(context.Context) (bool, error) {
			o, err := r.observe(ctx, false)
			if err != nil {
				return false, err
			}
			last = o
			sel := o.selectPods(w.Group, w.Prefix)
			target, reached = want(sel), count(sel)
			return reached >= target, nil
		})
		text := countOf(w.Count, what) + " " + verb
		if err != nil {
			if ctx.Err() != nil || !wait.Interrupted(err) {
				return Check{}, err
			}
			return Check{Text: fmt.Sprintf("%s: only %d of %d after %s%s", text, reached, target, w.timeout, pendingHint(last, w)), Pass: false}, nil
		}
		return Check{Text: text, Pass: true}, nil
	}

	// Pending: first the scheduler's verdict on enough pending pods, then a hold.
	var pending, target int
	verdict := false
	err := wait.PollUntilContextTimeout(ctx, pollInterval, w.timeout, true, func(context.Context) (bool, error) {
		o, err := r.observe(ctx, false)
		if err != nil {
			return false, err
		}
		sel := o.selectPods(w.Group, w.Prefix)
		target, pending = want(sel), len(sel)-countBound(sel)
		verdict = o.schedulerReported(sel, w.Group)
		return pending >= target && verdict, nil
	})
	text := fmt.Sprintf("%s stayed pending for %s", countOf(w.Count, what), w.duration)
	if err != nil {
		if ctx.Err() != nil || !wait.Interrupted(err) {
			return Check{}, err
		}
		why := fmt.Sprintf("%d of %d pending", pending, target)
		if !verdict {
			why += ", and the scheduler reported nothing on them"
		}
		return Check{Text: fmt.Sprintf("%s: %s after %s", text, why, w.timeout)}, nil
	}
	holdStart := time.Now()
	for {
		o, err := r.observe(ctx, false)
		if err != nil {
			return Check{}, err
		}
		sel := o.selectPods(w.Group, w.Prefix)
		if p := len(sel) - countBound(sel); p < target {
			return Check{Text: fmt.Sprintf("%s: after %s only %d pending%s", text,
				time.Since(holdStart).Round(100*time.Millisecond), p, boundNames(sel))}, nil
		}
		if time.Since(holdStart) >= w.duration {
			return Check{Text: text, Pass: true}, nil
		}
		select {
		case <-ctx.Done():
			return Check{}, ctx.Err()
		case <-time.After(pollInterval):
		}
	}
}

// schedulerReported is true once the scheduler has said something about
// the pods: a PodScheduled=False condition on one of them, or a
// Schedulable=False condition on their group.
func (o *observation) schedulerReported(sel []*corev1.Pod, group string) bool {
	groupFalse := func(conds []metav1.Condition) bool {
		for _, c := range conds {
			if c.Type == v1alpha1.PodGroupSchedulable && c.Status == metav1.ConditionFalse {
				return true
			}
		}
		return false
	}
	if pg := o.podGroups[group]; pg != nil && groupFalse(pg.Status.Conditions) {
		return true
	}
	if cpg := o.composites[group]; cpg != nil && groupFalse(cpg.Status.Conditions) {
		return true
	}
	for _, p := range sel {
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse {
				return true
			}
		}
		if ref := groupOf(p); ref.kind == KindPodGroup {
			if pg := o.podGroups[ref.name]; pg != nil && groupFalse(pg.Status.Conditions) {
				return true
			}
		}
	}
	return false
}

func countBound(pods []*corev1.Pod) int {
	n := 0
	for _, p := range pods {
		if p.Spec.NodeName != "" {
			n++
		}
	}
	return n
}

// countDone counts the pods that ran and finished.
func countDone(pods []*corev1.Pod) int {
	n := 0
	for _, p := range pods {
		if finished(p) {
			n++
		}
	}
	return n
}

// finished is a pod whose containers are done: it no longer holds its
// node's resources.
func finished(p *corev1.Pod) bool {
	return p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed
}

// boundNames lists a few bound pods and their nodes, for a failed hold.
func boundNames(pods []*corev1.Pod) string {
	var b []string
	for _, p := range pods {
		if p.Spec.NodeName != "" && len(b) < 3 {
			b = append(b, p.Name+" on "+p.Spec.NodeName)
		}
	}
	if len(b) == 0 {
		return ""
	}
	return " (bound: " + strings.Join(b, ", ") + ")"
}

// pendingHint explains a bound wait that timed out with the scheduler's
// latest message on a pending pod of the selection.
func pendingHint(o *observation, w *Wait) string {
	if o == nil {
		return ""
	}
	for _, p := range o.selectPods(w.Group, w.Prefix) {
		if p.Spec.NodeName != "" {
			continue
		}
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Message != "" {
				return fmt.Sprintf("; %s: %s", p.Name, c.Message)
			}
		}
	}
	return ""
}

// teardown deletes what the scenario made, even after ctx is cancelled.
func (r *runner) teardown(parent context.Context) error {
	r.streams.stop()
	if r.ev != nil {
		r.ev.stop()
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(parent), cleanupTimeout)
	defer cancel()
	var errs []error
	api := r.api()
	if r.ns != "" {
		bg := metav1.DeleteOptions{PropagationPolicy: ptr.To(metav1.DeletePropagationBackground)}
		for _, res := range []*kindAPI{api.jobs, api.workloads, api.composites, api.podGroups, api.schedulerPluginsPodGroups} {
			if res != nil {
				errs = append(errs, res.deleteAll(ctx, bg))
			}
		}
		// Controllers may still be creating pods; delete until none are left.
		err := wait.PollUntilContextTimeout(ctx, 2*pollInterval, defaultTimeout, true, func(ctx context.Context) (bool, error) {
			if err := api.pods.deleteAll(ctx, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}); err != nil {
				return false, err
			}
			left, err := api.pods.names(ctx)
			return err == nil && len(left) == 0, err
		})
		if err != nil {
			errs = append(errs, fmt.Errorf("delete pods of %s: %w", r.ns, err))
		}
	}
	if api.localQueues != nil {
		errs = append(errs, api.localQueues.deleteAll(ctx, metav1.DeleteOptions{}))
	}
	// Cluster-wide objects the scenario created, newest first: a
	// ClusterQueue before the flavor and cohort it names.
	for i := len(r.clusterObjects) - 1; i >= 0; i-- {
		o := r.clusterObjects[i]
		if err := o.api.delete(ctx, o.name); err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("delete %s %s: %w", o.api.kind, o.name, err))
		}
	}
	errs = append(errs, r.unpublishDevices(ctx))
	for _, n := range r.nodes {
		if err := api.nodes.delete(ctx, n); err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("delete node %s: %w", n, err))
		}
	}
	for _, pc := range r.classes {
		if err := r.cl.Client.SchedulingV1().PriorityClasses().Delete(ctx, pc, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("delete PriorityClass %s: %w", pc, err))
		}
	}
	if len(r.nodes) > 0 {
		errs = append(errs, r.waitGone(ctx, api.nodes, r.nodes))
	}
	if r.reconfigured {
		if err := r.cl.RestartScheduler(nil); err != nil {
			errs = append(errs, fmt.Errorf("restart the scheduler with the cluster's configuration: %w", err))
		}
	}
	return errors.Join(errs...)
}
