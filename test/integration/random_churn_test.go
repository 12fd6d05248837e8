package integration

import (
	"fmt"
	"sort"
	"strconv"
	"time"

	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"

	v1alpha1 "github.com/phalanx-sched/phalanx/apis/scheduling/v1alpha1"
	"github.com/phalanx-sched/phalanx/pkg/controller"
	"github.com/phalanx-sched/phalanx/tools/sandbox"
)

// The randomized runner's churn: gang Jobs that come, finish pods and go,
// node drains, label gangs whose members disagree, and gangs whose members
// carry pod constraints the plan must honour.

// eventWant is the event a pending pod must have: one of reasons, with
// note in its message ("" for any).
type eventWant struct {
	reasons []string
	note    string
}

// Kinds of member constraints.
const (
	consAnti   = "anti"   // required pod anti-affinity among members, one per node
	consPort   = "port"   // a host port
	consSpread = "spread" // DoNotSchedule topology spread among members
)

// rConstraint is a pod constraint every member of a group carries.
type rConstraint struct {
	kind    string
	port    int32  // consPort
	key     string // consSpread: topology key
	maxSkew int32  // consSpread
}

func (c *rConstraint) String() string {
	switch {
	case c == nil:
		return "none"
	case c.kind == consPort:
		return fmt.Sprintf("hostPort %d", c.port)
	case c.kind == consSpread:
		return fmt.Sprintf("spread over %s maxSkew %d", c.key, c.maxSkew)
	}
	return "one per node"
}

// apply adds the constraint to a member of group.
func (c *rConstraint) apply(spec *corev1.PodSpec, group string) {
	if c == nil {
		return
	}
	members := &metav1.LabelSelector{MatchLabels: map[string]string{v1alpha1.PodGroupLabel: group}}
	switch c.kind {
	case consAnti:
		spec.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{
			RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{LabelSelector: members, TopologyKey: sandbox.HostnameLabel}},
		}}
	case consPort:
		spec.Containers[0].Ports = []corev1.ContainerPort{{ContainerPort: c.port, HostPort: c.port, Protocol: corev1.ProtocolTCP}}
	case consSpread:
		spec.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{{
			MaxSkew: c.maxSkew, TopologyKey: c.key, WhenUnsatisfiable: corev1.DoNotSchedule, LabelSelector: members,
		}}
	}
}

// createConstrainedGroup is a gang PodGroup whose members are one per
// node, share a host port (two port numbers, so gangs contend for them), or
// spread over nodes or racks.
func (r *randomRunner) createConstrainedGroup(a int) {
	g := &rGroup{name: fmt.Sprintf("k%d", a), gang: true, size: 2 + r.rng.Intn(3), key: r.randomKey(), class: r.randomClass()}
	g.cpu, g.mem = r.randomRequests()
	g.minCount = 1 + r.rng.Intn(g.size)
	switch r.rng.Intn(3) {
	case 0:
		g.cons = &rConstraint{kind: consAnti}
	case 1:
		g.cons = &rConstraint{kind: consPort, port: int32(8080 + r.rng.Intn(2))}
	default:
		g.cons = &rConstraint{kind: consSpread, key: []string{sandbox.HostnameLabel, sandbox.RackLabel}[r.rng.Intn(2)], maxSkew: int32(1 + r.rng.Intn(2))}
	}
	createPodGroup(r.t, r.c, r.ns, r.podGroupObject(g))
	r.createMembers(g)
	r.groups[g.name] = g
	r.logf("create %s, members: %s", g, g.cons)
}

// createDisagreeingLabelGang is a label gang whose members carry different
// min-available values. The first member asks for at least 2, so it never
// forms a gang alone; from the second member on the group disagrees.
func (r *randomRunner) createDisagreeingLabelGang(a int) {
	g := &rGroup{name: fmt.Sprintf("d%d", a), label: true, gang: true, size: 2 + r.rng.Intn(3), class: r.randomClass(), disagree: true}
	g.cpu, g.mem = r.randomRequests()
	first := 2 + r.rng.Intn(g.size-1)
	second := 1 + r.rng.Intn(g.size-1)
	if second >= first {
		second++
	}
	votes := []int{first, second}
	for len(votes) < g.size {
		votes = append(votes, votes[r.rng.Intn(2)])
	}
	g.minCount = max(first, second)
	for i, v := range votes {
		labels := map[string]string{v1alpha1.LightweightNameLabel: g.name, v1alpha1.LightweightMinAvailableLabel: strconv.Itoa(v)}
		r.createPod(&rPod{name: fmt.Sprintf("%s-%d", g.name, i), group: g.name, class: g.class, cpu: g.cpu, mem: g.mem, labels: labels})
	}
	r.groups[g.name] = g
	r.logf("create label gang %s whose members disagree on min-available: %v", g, votes)
}

// votes returns the distinct min-available values of label gang g's
// members, sorted.
func (r *randomRunner) votes(g *rGroup) []int {
	seen := map[int]bool{}
	for _, p := range r.pods {
		if p.group == g.name {
			if v, err := strconv.Atoi(p.labels[v1alpha1.LightweightMinAvailableLabel]); err == nil {
				seen[v] = true
			}
		}
	}
	out := make([]int, 0, len(seen))
	for v := range seen {
		out = append(out, v)
	}
	sort.Ints(out)
	return out
}

// rJob is a gang Job the runner created. Its PodGroup (<name>-workers,
// made by phalanx-controller) is tracked as an rGroup with job set.
type rJob struct {
	name                     string
	parallelism, completions int32
	gated                    bool
}

// createJob creates a Job annotated for gang scheduling; a quarter of them
// without the scheduling gate in the template, as a user who forgot it
// would write it.
func (r *randomRunner) createJob(a int) {
	j := &rJob{name: fmt.Sprintf("j%d", a), parallelism: int32(1 + r.rng.Intn(3)), gated: r.rng.Intn(4) != 0}
	j.completions = j.parallelism
	if r.rng.Intn(3) == 0 {
		j.completions += int32(1 + r.rng.Intn(2))
	}
	g := &rGroup{name: j.name + "-" + v1alpha1.JobTemplateName, gang: true, job: j.name, size: int(j.completions), class: r.randomClass()}
	g.cpu, g.mem = r.randomRequests()
	g.minCount = int(min(j.parallelism, j.completions))
	pod := member{cpu: fmt.Sprintf("%dm", g.cpu), priorityClass: g.class}.pod()
	pod.Spec.Containers[0].Resources.Requests[corev1.ResourceMemory] = *resource.NewQuantity(g.mem, resource.BinarySI)
	pod.Spec.NodeSelector = map[string]string{"seed": r.prefix}
	pod.Spec.RestartPolicy = corev1.RestartPolicyNever
	if j.gated {
		pod.Spec.SchedulingGates = []corev1.PodSchedulingGate{{Name: controller.GangSchedulingGate}}
	}
	job := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: j.name, Annotations: map[string]string{v1alpha1.GangAnnotation: "true"}},
		Spec: batchv1.JobSpec{
			Parallelism: ptr.To(j.parallelism),
			Completions: ptr.To(j.completions),
			Template:    corev1.PodTemplateSpec{Spec: pod.Spec},
		},
	}
	_, err := r.c.Client.BatchV1().Jobs(r.ns).Create(r.ctx, job, metav1.CreateOptions{})
	require.NoError(r.t, err)
	r.jobs[j.name] = j
	r.groups[g.name] = g
	r.logf("create gang Job %s parallelism=%d completions=%d gated=%v cpu=%dm mem=%dMi class=%q", j.name, j.parallelism, j.completions, j.gated, g.cpu, g.mem>>20, g.class)
}

// deleteJob deletes a gang Job; the garbage collector deletes its pods,
// Workload and PodGroup.
func (r *randomRunner) deleteJob() {
	names := sortedKeys(r.jobs)
	if len(names) == 0 {
		return
	}
	name := names[r.rng.Intn(len(names))]
	require.NoError(r.t, r.c.Client.BatchV1().Jobs(r.ns).Delete(r.ctx, name, metav1.DeleteOptions{PropagationPolicy: ptr.To(metav1.DeletePropagationBackground)}))
	group := name + "-" + v1alpha1.JobTemplateName
	for _, p := range sortedKeys(r.pods) {
		if r.pods[p].job == name {
			r.gone[p] = true
			delete(r.pods, p)
		}
	}
	delete(r.groups, group)
	delete(r.jobs, name)
	r.logf("delete gang Job %s", name)
}

// finishJobPod reports a bound pod of a gang Job as exited, as its kubelet
// would: two times in three it succeeded, else it failed and the Job
// controller retries it.
func (r *randomRunner) finishJobPod() {
	var running []string
	for _, name := range sortedKeys(r.pods) {
		if r.pods[name].job != "" && r.isBound(name) {
			running = append(running, name)
		}
	}
	if len(running) == 0 {
		return
	}
	name := running[r.rng.Intn(len(running))]
	phase := corev1.PodSucceeded
	if r.rng.Intn(3) == 0 {
		phase = corev1.PodFailed
	}
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		p, err := r.c.Client.CoreV1().Pods(r.ns).Get(r.ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		p.Status.Phase = phase
		_, err = r.c.Client.CoreV1().Pods(r.ns).UpdateStatus(r.ctx, p, metav1.UpdateOptions{})
		return err
	})
	if apierrors.IsNotFound(err) {
		return
	}
	require.NoError(r.t, err)
	rp := r.pods[name]
	r.disturb(rp.group, fmt.Sprintf("member %s %s", name, phase))
	r.gone[name] = true
	delete(r.pods, name)
	r.logf("pod %s of Job %s %s", name, rp.job, phase)
}

// syncJobs tracks the pods the Job controller created since the last
// check, as members of their Job's group.
func (r *randomRunner) syncJobs(s snapshot) {
	for _, name := range sortedKeys(s.pods) {
		p := s.pods[name]
		job := r.jobs[p.Labels[batchv1.JobNameLabel]]
		if job == nil || r.pods[name] != nil || r.gone[name] {
			continue
		}
		g := r.groups[job.name+"-"+v1alpha1.JobTemplateName]
		r.pods[name] = &rPod{name: name, group: g.name, class: g.class, cpu: g.cpu, mem: g.mem, labels: p.Labels, job: job.name}
	}
}

// jobMinCount reads the minCount phalanx-controller gave the Job's
// PodGroup (what is still to run); false when there is no PodGroup yet.
func (r *randomRunner) jobMinCount(g *rGroup) bool {
	pg, err := r.c.Phalanx.SchedulingV1alpha1().PodGroups(r.ns).Get(r.ctx, g.name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return false
	}
	require.NoError(r.t, err)
	if pg.Spec.SchedulingPolicy.Gang == nil {
		return false
	}
	g.minCount = int(pg.Spec.SchedulingPolicy.Gang.MinCount)
	return true
}

// drainNode cordons a node and evicts its pods, as kubectl drain does; half
// the time the runner's lost group members are re-created (a Job's
// controller re-creates its own). One time in three it uncordons a
// cordoned node instead.
func (r *randomRunner) drainNode() {
	if cordoned := sortedKeys(r.cordoned); len(cordoned) > 0 && r.rng.Intn(3) == 0 {
		node := cordoned[r.rng.Intn(len(cordoned))]
		r.setUnschedulable(node, false)
		delete(r.cordoned, node)
		r.logf("uncordon node %s", node)
		return
	}
	var open []string
	for _, n := range sortedKeys(r.nodes) {
		if !r.cordoned[n] {
			open = append(open, n)
		}
	}
	if len(open) < 2 {
		return
	}
	node := open[r.rng.Intn(len(open))]
	r.setUnschedulable(node, true)
	r.cordoned[node] = true
	pods, err := r.c.Client.CoreV1().Pods(r.ns).List(r.ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + node})
	require.NoError(r.t, err)
	recreate := r.rng.Intn(2) == 0
	var lost []*rPod
	evicted := 0
	for _, p := range pods.Items {
		if p.DeletionTimestamp != nil || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		err := r.c.Client.PolicyV1().Evictions(r.ns).Evict(r.ctx, &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: p.Name, Namespace: r.ns}})
		if apierrors.IsNotFound(err) {
			continue
		}
		require.NoError(r.t, err, "evict %s", p.Name)
		evicted++
		rp := r.pods[p.Name]
		if rp == nil {
			r.gone[p.Name] = true // a Job's pod not tracked yet
			continue
		}
		if rp.group != "" {
			r.disturb(rp.group, fmt.Sprintf("member %s was evicted by the drain of node %s", p.Name, node))
		}
		if rp.job != "" {
			r.gone[p.Name] = true
		} else if recreate && rp.group != "" {
			lost = append(lost, rp)
		}
		delete(r.pods, p.Name)
	}
	r.logf("drain node %s: cordoned, %d pods evicted, re-create %d lost members: %v", node, evicted, len(lost), recreate)
	for _, rp := range lost {
		eventually(r.t, 30*time.Second, rp.name+" gone", func() (bool, error) {
			_, err := r.c.Client.CoreV1().Pods(r.ns).Get(r.ctx, rp.name, metav1.GetOptions{})
			return apierrors.IsNotFound(err), nil
		})
		r.createPod(rp)
	}
}

func (r *randomRunner) setUnschedulable(node string, v bool) {
	require.NoError(r.t, retry.RetryOnConflict(retry.DefaultRetry, func() error {
		n, err := r.c.Client.CoreV1().Nodes().Get(r.ctx, node, metav1.GetOptions{})
		if err != nil {
			return err
		}
		n.Spec.Unschedulable = v
		_, err = r.c.Client.CoreV1().Nodes().Update(r.ctx, n, metav1.UpdateOptions{})
		return err
	}))
}

// nodesChanged notes that the set of nodes changed: a spread group's
// bound members may now exceed maxSkew against the new set of domains.
func (r *randomRunner) nodesChanged(why string) {
	for _, g := range r.groups {
		if g.cons != nil && g.cons.kind == consSpread && g.spreadDisturbed == "" {
			g.spreadDisturbed = why
		}
	}
}

// checkConstraints checks the bound members of g against their pod
// constraint: one per node, or within maxSkew of each other across the
// domains of the seed's nodes (upstream's rule, which counts domains
// without members as 0). Terminating members count as the scheduler
// counts them: for anti-affinity, not for spread.
func (r *randomRunner) checkConstraints(s snapshot, g *rGroup, bound map[string]string) {
	if g.cons == nil || len(bound) == 0 {
		return
	}
	switch g.cons.kind {
	case consAnti:
		byNode := map[string][]string{}
		for _, p := range s.onNodes {
			if rp := r.pods[p.Name]; rp != nil && rp.group == g.name {
				byNode[p.Spec.NodeName] = append(byNode[p.Spec.NodeName], p.Name)
			}
		}
		for _, node := range sortedKeys(byNode) {
			if len(byNode[node]) > 1 {
				r.violation("group %s has required anti-affinity one per node, but %v share node %s", g.name, byNode[node], node)
			}
		}
	case consSpread:
		if g.spreadDisturbed != "" {
			return
		}
		counts := map[string]int{}
		for _, n := range s.nodes {
			if v := n.labels[g.cons.key]; v != "" {
				counts[v] += 0
			}
		}
		for _, node := range bound {
			if n := s.nodes[node]; n != nil {
				counts[n.labels[g.cons.key]]++
			}
		}
		lo, hi := -1, 0
		for _, c := range counts {
			if lo < 0 || c < lo {
				lo = c
			}
			hi = max(hi, c)
		}
		if int32(hi-lo) > g.cons.maxSkew {
			r.violation("group %s spreads over %s with maxSkew %d (DoNotSchedule), but its bound members count %v per domain", g.name, g.cons.key, g.cons.maxSkew, counts)
		}
	}
}

// checkHostPorts fails when two pods on one node use the same host port.
func (r *randomRunner) checkHostPorts(s snapshot) {
	users := map[string][]string{} // node/port -> pods
	for _, p := range s.onNodes {
		for _, c := range p.Spec.Containers {
			for _, port := range c.Ports {
				if port.HostPort != 0 {
					k := fmt.Sprintf("%s/%d", p.Spec.NodeName, port.HostPort)
					users[k] = append(users[k], p.Name)
				}
			}
		}
	}
	for _, k := range sortedKeys(users) {
		if len(users[k]) > 1 {
			r.violation("host port %s is used by %v", k, users[k])
		}
	}
}

// slotsFor caps a node's room for one more member of g by g's constraint:
// one per node for anti-affinity and host ports, none where a member, or
// any pod using the port, already is.
func slotsFor(s snapshot, r *randomRunner, g *rGroup, n *nodeRoom, slots int) int {
	if g.cons == nil {
		return slots
	}
	for _, p := range s.onNodes {
		if p.Spec.NodeName != n.name {
			continue
		}
		switch g.cons.kind {
		case consAnti:
			if rp := r.pods[p.Name]; rp != nil && rp.group == g.name {
				return 0
			}
		case consPort:
			for _, c := range p.Spec.Containers {
				for _, port := range c.Ports {
					if port.HostPort == g.cons.port {
						return 0
					}
				}
			}
		}
	}
	return min(slots, 1)
}
