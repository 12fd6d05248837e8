package sim

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	sigsjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"
)

// Scenario is a scripted run against a sandbox cluster.
type Scenario struct {
	// Name identifies the scenario (`phalanx-sim run <name>`) and prefixes
	// its namespace. A DNS label of at most 40 characters.
	Name string `json:"name"`
	// Description tells a reader what the scenario shows and why.
	Description string `json:"description,omitempty"`
	// Cluster is the shape of the simulated nodes created before step 1.
	Cluster ClusterSpec `json:"cluster"`
	// PriorityClasses are created before step 1 and deleted afterwards.
	PriorityClasses []PriorityClass `json:"priorityClasses,omitempty"`
	// Scheduler changes the scheduler's configuration for this scenario
	// only: the cluster restarts its scheduler with it before step 1 and
	// with its own configuration after the last step. Unset, the scenario
	// runs under the cluster's configuration as it is.
	Scheduler *SchedulerSpec `json:"scheduler,omitempty"`
	// Kueue says the scenario runs with Kueue in front: Kueue admits its
	// Jobs by quota and preempts them, Phalanx places their pods.
	// phalanx-sim run starts Kueue's manager when a scenario it runs asks
	// for it; create.objects may then hold Kueue's objects.
	Kueue bool `json:"kueue,omitempty"`
	// Steps run in order.
	Steps []Step `json:"steps"`

	// Source is where the scenario was loaded from ("built-in" or a path).
	Source string `json:"-"`
	// validated is set once Validate has filled the parsed fields below the
	// YAML ones.
	validated bool
}

// ClusterSpec is Zones × Racks × NodesPerRack identical nodes, named
// node-z<zone>-r<rack>-n<node> and labelled topology.kubernetes.io/zone
// (zone-<z>), topology.phalanx.dev/rack (zone-<z>-rack-<r>) and
// kubernetes.io/hostname; with RacksPerBlock also
// topology.phalanx.dev/block (zone-<z>-block-<b>).
type ClusterSpec struct {
	Zones int `json:"zones"`
	// Racks is the number of racks per zone.
	Racks        int `json:"racks"`
	NodesPerRack int `json:"nodesPerRack"`
	// RacksPerBlock groups each zone's racks, in order, into blocks of
	// this many; 0 leaves the block label off.
	RacksPerBlock int `json:"racksPerBlock,omitempty"`
	// CPU, Memory, GPUs (nvidia.com/gpu) and Pods are per node; defaults
	// 8, 64Gi, 0 and 110.
	CPU    Amount `json:"cpu,omitempty"`
	Memory Amount `json:"memory,omitempty"`
	GPUs   int    `json:"gpus,omitempty"`
	Pods   int    `json:"pods,omitempty"`
	// DRA publishes DRA devices on the cluster's nodes (dra.go).
	DRA *DRASpec `json:"dra,omitempty"`
}

// DRASpec publishes ResourceSlices for the scenario's nodes, as DRA
// drivers would, and the DeviceClasses that select their devices; the
// teardown removes them.
type DRASpec struct {
	// DevicesPerNode are the GPUs of driver and DeviceClass
	// gpu.phalanx.dev (the sandbox's) on every node, each node's own pool.
	DevicesPerNode int `json:"devicesPerNode,omitempty"`
	// DomainKey and DomainDevices: for each value of the node label
	// DomainKey ("rack" and the other short forms work), a pool of
	// DomainDevices devices of driver and DeviceClass channel.phalanx.dev
	// that every node of that domain reaches, as the channels of an
	// NVLink domain (a ComputeDomain) are. One claim allocated from it
	// serves pods on every node of the domain, and no other.
	DomainKey     string `json:"domainKey,omitempty"`
	DomainDevices int    `json:"domainDevices,omitempty"`
}

// SchedulerSpec is what a scenario sets in the scheduler's configuration.
type SchedulerSpec struct {
	// Reservation is the PhalanxTopology reservation block (see
	// "Reservations and backfill" in the user guide), in every profile.
	Reservation *Reservation `json:"reservation"`
}

// Reservation mirrors PhalanxTopology's reservation arguments; unset
// fields take the plugin's defaults.
type Reservation struct {
	AfterSeconds    int64 `json:"afterSeconds"`
	MaxHoldSeconds  int64 `json:"maxHoldSeconds,omitempty"`
	MaxSharePercent int32 `json:"maxSharePercent,omitempty"`
	Backfill        *bool `json:"backfill,omitempty"`
}

// PriorityClass is a scheduling.k8s.io/v1 PriorityClass the scenario needs.
type PriorityClass struct {
	Name  string `json:"name"`
	Value int32  `json:"value"`
	// PreemptionPolicy is PreemptLowerPriority (the default) or Never.
	PreemptionPolicy corev1.PreemptionPolicy `json:"preemptionPolicy,omitempty"`
}

// Step does exactly one action, then the engine snapshots the namespace and
// checks Expect against the snapshot.
type Step struct {
	Name        string       `json:"name"`
	Create      *Create      `json:"create,omitempty"`
	AddNodes    *AddNodes    `json:"addNodes,omitempty"`
	DeleteNodes *DeleteNodes `json:"deleteNodes,omitempty"`
	Delete      *Delete      `json:"delete,omitempty"`
	Wait        *Wait        `json:"wait,omitempty"`
	Stream      *Stream      `json:"stream,omitempty"`
	// Expect is checked once, against the snapshot taken after the action.
	Expect []Expectation `json:"expect,omitempty"`
}

// Create makes objects in the scenario's namespace: first Objects in order,
// then the generated gangs and pod sets.
type Create struct {
	// Objects are inline Kubernetes objects: v1 Pod, batch/v1 Job,
	// scheduling.phalanx.dev/v1alpha1 PodGroup, CompositePodGroup and
	// Workload, and resource.k8s.io/v1 ResourceClaim and
	// ResourceClaimTemplate. metadata.namespace must be empty.
	Objects []json.RawMessage `json:"objects,omitempty"`
	// Gangs each become a PodGroup (or a label-pair gang) and its pods.
	Gangs []Gang `json:"gangs,omitempty"`
	// Pods are sets of plain pods that belong to no group.
	Pods []PodSet `json:"pods,omitempty"`
	// Interleave creates the generated groups first, then their pods
	// round-robin (a-0, b-0, a-1, b-1, ...), the way two jobs submitted at
	// the same moment arrive.
	Interleave bool `json:"interleave,omitempty"`

	objects []inlineObject
}

// Gang generates a PodGroup with a gang policy and Size pods named
// <podPrefix><i> that carry the scheduling.phalanx.dev/pod-group label.
type Gang struct {
	Name string `json:"name"`
	Size int    `json:"size"`
	// MinCount defaults to Size.
	MinCount int `json:"minCount,omitempty"`
	// CPU (default 1), Memory (default none) and GPUs are each pod's requests.
	CPU    Amount `json:"cpu,omitempty"`
	Memory Amount `json:"memory,omitempty"`
	GPUs   int    `json:"gpus,omitempty"`
	// PriorityClass names one of the scenario's priorityClasses; the group
	// and its pods both carry it.
	PriorityClass string `json:"priorityClass,omitempty"`
	// TopologyKey puts every pod on nodes sharing one value of this node
	// label. "zone", "block", "rack" and "hostname" are short for the
	// sandbox keys.
	TopologyKey string `json:"topologyKey,omitempty"`
	// PreferredTopology lists preferred levels below TopologyKey,
	// narrowest first, in the same short forms: [rack, block] packs the
	// gang into one rack when one holds it, else into the fewest racks of
	// one block, and so on up to TopologyKey.
	PreferredTopology []string `json:"preferredTopology,omitempty"`
	// DisruptionAll sets disruptionMode all: the group is evicted whole.
	DisruptionAll bool `json:"disruptionAll,omitempty"`
	// Parent names the group's CompositePodGroup.
	Parent string `json:"parent,omitempty"`
	// LabelPair makes an implicit gang from the
	// pod-group.scheduling.sigs.k8s.io/{name,min-available} labels instead
	// of a PodGroup object (the TFJob demo). It allows no topologyKey,
	// disruptionAll or parent, which need an object.
	LabelPair bool `json:"labelPair,omitempty"`
	// ReserveAfter lengthens the scheduler's reservation.afterSeconds for
	// this gang (the scheduling.phalanx.dev/reserve-after-seconds
	// annotation of its PodGroup), e.g. 5s; a shorter value has no effect,
	// and "never" never reserves for it.
	ReserveAfter string `json:"reserveAfter,omitempty"`
	// ClaimTemplate gives each pod a claim made from this
	// ResourceClaimTemplate of the scenario (created among its objects):
	// DRA devices of its own.
	ClaimTemplate string `json:"claimTemplate,omitempty"`
	// SharedClaim makes every pod name this ResourceClaim of the
	// scenario: one allocation all of them use, such as a ComputeDomain
	// channel.
	SharedClaim string `json:"sharedClaim,omitempty"`
	// Ranked gives pod i the rank i (the scheduling.phalanx.dev/rank
	// annotation), as an indexed Job's completion index would: the
	// scheduler lays the ranks out in order over the gang's nodes, and
	// the report shows the ring's boundary crossings.
	Ranked bool `json:"ranked,omitempty"`
	// MinRuntime protects the gang's running members from preemption for
	// this long once it is whole (spec.minRuntimeSeconds, or the
	// scheduling.phalanx.dev/min-runtime-seconds annotation of an upstream
	// PodGroup): a whole number of seconds such as 10s.
	MinRuntime string `json:"minRuntime,omitempty"`
	// PodPrefix names the pods; default "<name>-".
	PodPrefix string `json:"podPrefix,omitempty"`
	// Runtime is how long each pod runs once started (a duration such as
	// 20s); the node agent then marks it Succeeded. Unset, pods run until
	// deleted.
	Runtime string `json:"runtime,omitempty"`
	// API is the API the gang is written in: "" for Phalanx's own
	// (scheduling.phalanx.dev PodGroup and pod-group label), "upstream"
	// for upstream's scheduling.k8s.io/v1beta1 PodGroup and
	// pod.spec.schedulingGroup. An upstream gang's parent is an upstream
	// CompositePodGroup (scheduling.k8s.io/v1alpha3).
	API string `json:"api,omitempty"`

	runtime time.Duration
}

// APIUpstream is Gang.API for upstream's scheduling.k8s.io objects.
const APIUpstream = "upstream"

// PodSet generates Count plain pods named <name>-<ii>. They belong to no
// group; reports show them together under Name.
type PodSet struct {
	Name          string `json:"name"`
	Count         int    `json:"count"`
	CPU           Amount `json:"cpu,omitempty"`
	Memory        Amount `json:"memory,omitempty"`
	GPUs          int    `json:"gpus,omitempty"`
	PriorityClass string `json:"priorityClass,omitempty"`
}

// AddNodes creates Count nodes named <prefix>-<i>.
type AddNodes struct {
	Prefix string `json:"prefix"`
	Count  int    `json:"count"`
	// CPU, Memory and GPUs per node; defaults as for the cluster.
	CPU    Amount `json:"cpu,omitempty"`
	Memory Amount `json:"memory,omitempty"`
	GPUs   int    `json:"gpus,omitempty"`
	// Zone, Block and Rack are the values of the zone, block and rack
	// labels; a node without them is drawn outside every zone.
	Zone  string `json:"zone,omitempty"`
	Block string `json:"block,omitempty"`
	Rack  string `json:"rack,omitempty"`
}

// DeleteNodes removes nodes, and the pods bound to them as the pod garbage
// collector would. Exactly one of Names and Prefix.
type DeleteNodes struct {
	Names  []string `json:"names,omitempty"`
	Prefix string   `json:"prefix,omitempty"`
}

// Delete removes objects of one kind from the scenario's namespace by name
// or by name prefix, and waits until they are gone. Pods are deleted
// without a grace period.
type Delete struct {
	// Kind is Pod, Job, PodGroup, CompositePodGroup or Workload.
	Kind   string `json:"kind"`
	Name   string `json:"name,omitempty"`
	Prefix string `json:"prefix,omitempty"`
}

// Stream starts plain pods arriving in the background, Count of them at
// random moments (a Poisson process of RatePerSecond, drawn from Seed, so
// every run has the same schedule), each running a random time in
// [MinRuntime, MaxRuntime]. The step returns at once; later steps run
// while the pods keep arriving, and the stream stops at the scenario's
// end. The pods are named <name>-<iii> and shown together under Name.
type Stream struct {
	Name          string  `json:"name"`
	Count         int     `json:"count"`
	RatePerSecond float64 `json:"ratePerSecond"`
	Seed          int64   `json:"seed,omitempty"`
	// MinRuntime and MaxRuntime are durations such as 5s.
	MinRuntime string `json:"minRuntime"`
	MaxRuntime string `json:"maxRuntime"`
	// DeadlineSlack, when set, makes every pod declare its runtime bound
	// (activeDeadlineSeconds) as its runtime rounded up to the second plus
	// this much: the declaration reservations backfill on.
	DeadlineSlack string `json:"deadlineSlack,omitempty"`
	CPU           Amount `json:"cpu,omitempty"`
	Memory        Amount `json:"memory,omitempty"`
	GPUs          int    `json:"gpus,omitempty"`
	PriorityClass string `json:"priorityClass,omitempty"`

	minRuntime, maxRuntime, slack time.Duration
}

// Wait blocks until pods reach a state, with a deadline.
type Wait struct {
	// For is "bound": at least Count pods of the selection are bound
	// (finished ones included, they were bound); "done": at least Count
	// pods have run and finished (Succeeded or Failed); or "pending": at
	// least Count pods are pending and the scheduler has reported on them,
	// and they stay pending for Duration.
	For string `json:"for"`
	// Group (a PodGroup, CompositePodGroup, label gang or pod set name) or
	// Prefix (of pod names) selects the pods; exactly one.
	Group  string `json:"group,omitempty"`
	Prefix string `json:"prefix,omitempty"`
	// Count defaults to every pod of the selection that exists.
	Count int `json:"count,omitempty"`
	// Timeout bounds the wait (default 30s); Duration is how long pending
	// pods must stay pending (default 2s).
	Timeout  string `json:"timeout,omitempty"`
	Duration string `json:"duration,omitempty"`

	timeout, duration time.Duration
}

// Expectation is checked against the snapshot after a step. Each field set
// is one check; counts are of pods that are not terminating, except Evicted,
// which counts every pod of the group the scheduler marked with a
// DisruptionTarget condition since the scenario began. Bound counts pods
// on a node and not finished; Done those that ran and finished.
type Expectation struct {
	Group   string `json:"group"`
	Bound   *int   `json:"bound,omitempty"`
	Pending *int   `json:"pending,omitempty"`
	Done    *int   `json:"done,omitempty"`
	Evicted *int   `json:"evicted,omitempty"`
	// SameDomain is a node label key ("zone", "block", "rack", "hostname"
	// are short forms): every bound pod of the group runs on nodes with one
	// value of it.
	SameDomain string `json:"sameDomain,omitempty"`
	// Spans counts the values of a node label key over the nodes of the
	// group's bound pods, e.g. {key: rack, count: 2}.
	Spans *Spans `json:"spans,omitempty"`
	// Crossings counts the ring boundary crossings of the group's bound
	// pods at the level Key ("hostname" for nodes): neighbours by rank
	// (and the last rank with rank 0) on different domains of Key, e.g.
	// {key: rack, count: 2}. Pods without a rank count by the ordinal at
	// the end of their names.
	Crossings *Spans `json:"crossings,omitempty"`
}

// Spans is an expected number of domains of Key (or, for crossings, of
// ring boundary crossings at the level Key).
type Spans struct {
	Key   string `json:"key"`
	Count int    `json:"count"`
}

// Amount is a resource quantity as written in a scenario: 4, "4", "500m",
// "64Gi". It is parsed by Validate, which names the field when it is wrong.
type Amount string

// UnmarshalJSON accepts a JSON number or string.
func (a *Amount) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if len(b) > 0 && b[0] == '"' {
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		*a = Amount(s)
		return nil
	}
	var n json.Number
	if err := json.Unmarshal(b, &n); err != nil {
		return fmt.Errorf("a quantity must be a number or a string such as \"500m\" or \"64Gi\", got %s", b)
	}
	*a = Amount(n.String())
	return nil
}

// Decode parses and validates a scenario. Unknown fields and invalid values
// are errors that name the field, e.g. `steps[2].wait.timeout`.
func Decode(data []byte) (*Scenario, error) {
	js, err := yaml.YAMLToJSONStrict(data)
	if err != nil {
		return nil, fmt.Errorf("parse scenario YAML: %w", err)
	}
	sc := &Scenario{}
	strict, err := sigsjson.UnmarshalStrict(js, sc)
	if err != nil {
		return nil, fmt.Errorf("decode scenario: %w", err)
	}
	if len(strict) > 0 {
		ve := &ValidationError{Scenario: sc.Name}
		for _, e := range strict {
			// sigs.k8s.io/json names the whole path: unknown field "steps[0].create.gang".
			ve.Problems = append(ve.Problems, e.Error())
		}
		return nil, ve
	}
	if err := sc.Validate(); err != nil {
		return nil, err
	}
	return sc, nil
}

// ValidationError lists everything wrong with a scenario, one problem per
// line, each naming its field.
type ValidationError struct {
	Scenario string
	Problems []string
}

func (e *ValidationError) Error() string {
	name := e.Scenario
	if name == "" {
		name = "(unnamed)"
	}
	return fmt.Sprintf("invalid scenario %s:\n  %s", name, strings.Join(e.Problems, "\n  "))
}
