// Package debugapi is the JSON the Phalanx scheduler serves under
// /debug/phalanx on its diagnostics port, and what kubectl phalanx reads.
// It depends on nothing heavier than apimachinery's metav1, so the kubectl
// plugin does not link the scheduler.
package debugapi

import (
	"encoding/json"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Paths served, all under Prefix. Each is authorized as a non-resource URL
// (verbs get and post, the lower-case HTTP methods), the way kube-scheduler authorizes
// /metrics, so a ClusterRole grants them (manifests/base/debug-reader.yaml).
const (
	Prefix = "/debug/phalanx"
	// GroupsPath: GET the group cache, or GroupsPath/<namespace>/<name>
	// for the groups of that name with their members.
	GroupsPath = Prefix + "/groups"
	// ExplainPath: GET ExplainPath/<kind>/<namespace>/<name>, kind one of
	// Kinds (a resource name, singular or plural, optionally qualified by
	// its API group, e.g. podgroups.scheduling.k8s.io).
	ExplainPath = Prefix + "/explain"
	// FitPath: POST a FitRequest.
	FitPath = Prefix + "/fit"
	// TopPath: GET; ?keys=a,b picks the node label keys of the capacity table.
	TopPath = Prefix + "/top"
)

// Stages of a group, as explain and top report them.
const (
	// StageInvalid: the group or its hierarchy cannot be scheduled as
	// written (a missing parent, members that disagree, a bad definition).
	StageInvalid = "Invalid"
	// StageWaitingForPods: fewer members exist than the minimum; they are
	// held before the scheduling queue.
	StageWaitingForPods = "WaitingForPods"
	// StageInfeasible: the planner finds no placement for the whole group
	// now, and preemption could not make one (or may not).
	StageInfeasible = "Infeasible"
	// StagePreempting: victims were chosen and are terminating; the group
	// is placed once they are gone.
	StagePreempting = "Preempting"
	// StageQueued: the group fits now and waits for its next attempt
	// (backoff, or the queue ahead of it).
	StageQueued = "Queued"
	// StageWaitingInPermit: members are reserved and wait for the rest of
	// their gang.
	StageWaitingInPermit = "WaitingInPermit"
	// StageBinding: the gang passed Permit; its members are being bound.
	StageBinding = "Binding"
	// StageScheduled: the group's minimum is bound.
	StageScheduled = "Scheduled"
)

// APIVersion is the apiVersion of every answer, so that kubectl's
// printers (-o json, yaml, jsonpath, go-template) take them.
const APIVersion = "debug.phalanx.dev/v1alpha1"

// Answer says who answered and when. Every response carries it.
type Answer struct {
	// Scheduler identifies the replica: its leader-election identity, or
	// its host name.
	Scheduler string `json:"scheduler"`
	// Profile is the scheduling profile (schedulerName) that answered.
	Profile string      `json:"profile,omitempty"`
	Time    metav1.Time `json:"time"`
	// Nodes counts the nodes of the snapshot the answer was computed on.
	Nodes int `json:"nodes,omitempty"`
}

// GroupRef names a group the way kubectl addresses it.
type GroupRef struct {
	// Kind is PodGroup, CompositePodGroup or LabelGang.
	Kind string `json:"kind"`
	// APIGroup is scheduling.phalanx.dev, scheduling.k8s.io or
	// scheduling.x-k8s.io; empty for a label gang.
	APIGroup  string `json:"apiGroup,omitempty"`
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
}

// Group is one group of the scheduler's group cache.
type Group struct {
	GroupRef `json:",inline"`
	// Exists is false while pods or children name a group the scheduler
	// has not seen.
	Exists bool `json:"exists"`
	// Policy is Gang or Basic.
	Policy        string `json:"policy"`
	MinCount      int    `json:"minCount,omitempty"`
	MinGroupCount int    `json:"minGroupCount,omitempty"`
	TopologyKey   string `json:"topologyKey,omitempty"`
	DisruptionAll bool   `json:"disruptionAll,omitempty"`

	PriorityClassName   string `json:"priorityClassName,omitempty"`
	Priority            *int32 `json:"priority,omitempty"`
	PreemptionPolicy    string `json:"preemptionPolicy,omitempty"`
	PriorityFromMembers bool   `json:"priorityFromMembers,omitempty"`

	Parent   string       `json:"parent,omitempty"`
	Children []GroupRef   `json:"children,omitempty"`
	Created  *metav1.Time `json:"created,omitempty"`
	Invalid  string       `json:"invalid,omitempty"`

	// Member counts of a leaf, by state.
	Pending  int `json:"pending"`
	Assumed  int `json:"assumed"`
	Bound    int `json:"bound"`
	Finished int `json:"finished"`
	// Members are listed for a single group (GroupsPath/<ns>/<name>).
	Members []Member `json:"members,omitempty"`
}

// Member is a pod of a leaf group.
type Member struct {
	Name string `json:"name"`
	// State is Pending, Assumed, Bound or Finished.
	State string `json:"state"`
	Node  string `json:"node,omitempty"`
}

// GroupList is GroupsPath's answer.
type GroupList struct {
	metav1.TypeMeta `json:",inline"`
	Answer          `json:",inline"`
	Groups          []Group `json:"groups"`
}

// ExplanationList is ExplainPath's answer: one explanation per hierarchy
// the object asked about belongs to (a Workload may have several).
type ExplanationList struct {
	metav1.TypeMeta `json:",inline"`
	Answer          `json:",inline"`
	// Target is what was asked about, e.g. "Pod team-a/w-0".
	Target string        `json:"target"`
	Items  []Explanation `json:"items"`
}

// Explanation is the hierarchy of the group asked about (or of the pod's
// group): its stage, and what the scheduler would do with it now.
type Explanation struct {
	// Profile is the scheduling profile of the hierarchy's pods.
	Profile string `json:"profile,omitempty"`
	// Root is the hierarchy's root group.
	Root GroupRef `json:"root"`
	// Stage and Message: where the hierarchy is, in one word and one line.
	Stage   string `json:"stage"`
	Message string `json:"message"`
	// Since is when the hierarchy entered Stage, where the scheduler or
	// the group's conditions know it.
	Since *metav1.Time `json:"since,omitempty"`
	// Groups are every group of the hierarchy, root first.
	Groups []GroupState `json:"groups"`
	// Assessment is a fresh attempt of the scheduler's planner and victim
	// search for the hierarchy, as its next scheduling attempt would make
	// them; absent when the hierarchy is not at a stage where it is
	// planned (waiting for pods, invalid, scheduled).
	Assessment *Assessment `json:"assessment,omitempty"`
	// StoredPlan is the plan the scheduler holds for the hierarchy.
	StoredPlan *StoredPlan `json:"storedPlan,omitempty"`
	// Preemption is the scheduler's last preemption for the hierarchy,
	// while its victims may still be terminating.
	Preemption *Eviction `json:"preemption,omitempty"`
}

// GroupState is one group of an explained hierarchy.
type GroupState struct {
	GroupRef `json:",inline"`
	Parent   string `json:"parent,omitempty"`
	Policy   string `json:"policy"`
	// Min is minCount (pods) for a leaf, minGroupCount (child groups) for
	// a composite; 1 for a basic group.
	Min         int    `json:"min"`
	TopologyKey string `json:"topologyKey,omitempty"`
	// Present counts live members (a leaf) or child groups with enough
	// live members (a composite); Bound bound members or child groups at
	// their minimum bound.
	Present int          `json:"present"`
	Placed  int          `json:"placed"`
	Bound   int          `json:"bound"`
	Pending int          `json:"pending"`
	Created *metav1.Time `json:"created,omitempty"`
	// Conditions are the group object's, with their ages.
	Conditions []Condition `json:"conditions,omitempty"`
	Invalid    string      `json:"invalid,omitempty"`
}

// Condition is a group condition as written on the object.
type Condition struct {
	Type    string      `json:"type"`
	Status  string      `json:"status"`
	Reason  string      `json:"reason,omitempty"`
	Message string      `json:"message,omitempty"`
	Since   metav1.Time `json:"since"`
}

// StoredPlan is the plan the topology plugin holds for a hierarchy.
type StoredPlan struct {
	Made       metav1.Time       `json:"made"`
	Infeasible string            `json:"infeasible,omitempty"`
	Domains    map[string]string `json:"domains,omitempty"`
	// Nodes counts the planned members per node.
	Nodes map[string]int `json:"nodes,omitempty"`
}

// Eviction is a preemption whose victims may still be terminating.
type Eviction struct {
	At      metav1.Time `json:"at"`
	Victims []string    `json:"victims"`
	Left    []string    `json:"left,omitempty"`
}

// Assessment is what the scheduler's planner and victim search make of a
// hierarchy against its current view: the snapshot of its cache with the
// room nominated to other pods counted as used.
type Assessment struct {
	// Fits: the planner places the hierarchy's minimum now.
	Fits bool `json:"fits"`
	// Placement is the plan when it fits.
	Placement *Placement `json:"placement,omitempty"`
	// Infeasible is the planner's verdict when it does not.
	Infeasible *Infeasible `json:"infeasible,omitempty"`
	// Preemption is the victim search's answer when it does not fit, or,
	// when its minimum fits but members beyond it do not, the search
	// those members' own attempts then make (Fits stays true; its
	// Placement is then the whole hierarchy's).
	Preemption *Preemption `json:"preemption,omitempty"`
	// Blocked is set when a check before planning stops the hierarchy:
	// fewer members than the minimum, members that disagree, a gang
	// larger than the cluster.
	Blocked string `json:"blocked,omitempty"`
	// Devices are, for a hierarchy whose members claim DRA devices the
	// plan counts, the devices of each class in each domain of its
	// topology levels (the whole cluster when it has none), as the plan
	// saw them.
	Devices []DomainDevices `json:"devices,omitempty"`
}

// DomainDevices is the DRA devices of one class in one domain.
type DomainDevices struct {
	// Key is the topology level, Domain its value; both "" for the whole
	// cluster.
	Key    string `json:"key,omitempty"`
	Domain string `json:"domain,omitempty"`
	Class  string `json:"class"`
	// Free are the devices no claim holds, of Total matching the class.
	Free  int64 `json:"free"`
	Total int64 `json:"total"`
}

// DeviceResourcePrefix starts the resource names under which plans count
// the devices of a DRA device class (in Short), followed by the class.
const DeviceResourcePrefix = "devices.phalanx.dev/"

// Placement is a plan: where each member goes.
type Placement struct {
	// Domains maps each constrained group ("Kind ns/name" as the cache
	// names it) to its domain, e.g. topology.phalanx.dev/rack=zone-0-rack-1.
	Domains map[string]string `json:"domains,omitempty"`
	// Pods maps member pod names (namespace/name) to nodes.
	Pods map[string]string `json:"pods"`
	// Unplaced are pending members beyond the minimum that the plan leaves
	// waiting.
	Unplaced []string `json:"unplaced,omitempty"`
}

// Infeasible is the planner's explanation of a group that does not fit.
type Infeasible struct {
	Group       string `json:"group"`
	Reason      string `json:"reason"`
	TopologyKey string `json:"topologyKey,omitempty"`
	BestDomain  string `json:"bestDomain,omitempty"`
	Fits        int    `json:"fits"`
	Need        int    `json:"need"`
	// Short is what is missing in BestDomain, e.g. {"nvidia.com/gpu": "4"}.
	Short map[string]string `json:"short,omitempty"`
	// Domains are the closest domains the group was tried in.
	Domains []DomainFit `json:"domains,omitempty"`
	// Cause is, for a composite, the child that failed.
	Cause *Infeasible `json:"cause,omitempty"`
}

// DomainFit is one domain a group was tried in.
type DomainFit struct {
	Domain string            `json:"domain"`
	Fits   int               `json:"fits"`
	Need   int               `json:"need"`
	Short  map[string]string `json:"short,omitempty"`
	Reason string            `json:"reason"`
}

// Preemption is the victim search's answer for a hierarchy that does not
// fit as the cluster stands.
type Preemption struct {
	// Possible: evicting Victims lets the hierarchy (its minimum at least)
	// fit.
	Possible bool `json:"possible"`
	// Reason says why preemption cannot help or may not run: the group's
	// preemptionPolicy is Never, no pod has a lower priority, no set of
	// victims is enough (with the planner's verdict once every candidate
	// is gone).
	Reason string `json:"reason,omitempty"`
	// Priority is the hierarchy's priority, which victims must be below.
	Priority int32    `json:"priority"`
	Victims  []Victim `json:"victims,omitempty"`
	// Placement is where the members go once the victims are gone.
	Placement *Placement `json:"placement,omitempty"`
	// Candidates counts the pods the search could evict.
	Candidates int `json:"candidates,omitempty"`
}

// Victim is a pod preemption would evict.
type Victim struct {
	Pod      string `json:"pod"`
	Node     string `json:"node"`
	Priority int32  `json:"priority"`
	// Group is the victim's group, when it is evicted with it (disruption
	// mode all).
	Group string `json:"group,omitempty"`
	// ViolatesPDB: evicting it breaks a PodDisruptionBudget.
	ViolatesPDB bool `json:"violatesPDB,omitempty"`
}

// FitRequest asks whether groups and pods that do not exist yet would fit.
// Objects are PodGroups and CompositePodGroups of any API Phalanx reads,
// and Pods, as the API server would store them (kubectl phalanx fit has
// them through a server-side dry run, so admission defaults are applied).
// The groups must form one hierarchy, and every pod must belong to it.
type FitRequest struct {
	Namespace string            `json:"namespace"`
	Objects   []json.RawMessage `json:"objects"`
}

// FitAnswer is FitPath's answer.
type FitAnswer struct {
	metav1.TypeMeta `json:",inline"`
	Answer          `json:",inline"`
	Root            GroupRef `json:"root"`
	// Verdict is Fits, FitsWithPreemption (also when only the members
	// beyond the minimum evict), DoesNotFit or Blocked.
	Verdict    string       `json:"verdict"`
	Message    string       `json:"message"`
	Groups     []GroupState `json:"groups"`
	Assessment Assessment   `json:"assessment"`
}

// Fit verdicts.
const (
	VerdictFits               = "Fits"
	VerdictFitsWithPreemption = "FitsWithPreemption"
	VerdictDoesNotFit         = "DoesNotFit"
	VerdictBlocked            = "Blocked"
)

// Top is TopPath's answer: every hierarchy by stage, and the cluster's
// room per topology domain.
type Top struct {
	metav1.TypeMeta `json:",inline"`
	Answer          `json:",inline"`
	Groups          []TopGroup `json:"groups"`
	// Keys are the node label keys of Domains.
	Keys    []string         `json:"keys"`
	Domains []DomainCapacity `json:"domains"`
}

// TopGroup is one hierarchy, by its root.
type TopGroup struct {
	GroupRef `json:",inline"`
	Policy   string       `json:"policy"`
	Stage    string       `json:"stage"`
	Since    *metav1.Time `json:"since,omitempty"`
	// Leaves counts the leaf groups of the hierarchy; the pod counts sum
	// over them.
	Leaves  int `json:"leaves"`
	Min     int `json:"min"`
	Present int `json:"present"`
	Pending int `json:"pending"`
	Placed  int `json:"placed"`
	Bound   int `json:"bound"`
	// Held is what its placed members request (cpu in cores, as
	// quantities).
	Held map[string]string `json:"held,omitempty"`
}

// DomainCapacity is one topology domain's room.
type DomainCapacity struct {
	Key   string `json:"key"`
	Value string `json:"value"`
	Nodes int    `json:"nodes"`
	// Allocatable, Requested (pods bound or assumed) and Nominated (room
	// promised to pending pods), and Free, what is left of Allocatable.
	Allocatable map[string]string `json:"allocatable"`
	Requested   map[string]string `json:"requested,omitempty"`
	Nominated   map[string]string `json:"nominated,omitempty"`
	Free        map[string]string `json:"free"`
}

// KubeconfigExtension names the extension of a kubeconfig cluster entry
// that says where the cluster's Phalanx scheduler serves Prefix (an
// Endpoint). The sandbox writes it; kubectl phalanx reads it when no
// --scheduler-url is given.
const KubeconfigExtension = "phalanx.dev/scheduler"

// Endpoint is where a scheduler serves Prefix.
type Endpoint struct {
	// Server is the base URL, e.g. https://127.0.0.1:10260.
	Server string `json:"server"`
	// CertificateAuthorityData is the PEM of the certificate authority
	// that signed the scheduler's serving certificate.
	CertificateAuthorityData []byte `json:"certificate-authority-data,omitempty"`
}

// Error is the body of a failed request.
type Error struct {
	Message string `json:"message"`
}
