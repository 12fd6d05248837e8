package devices

import (
	"context"
	"fmt"
	"hash/fnv"
	"slices"
	"sort"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/dynamic-resource-allocation/cel"
	"k8s.io/dynamic-resource-allocation/structured"
)

// Source is the cluster's DRA state as one plan reads it: the scheduler's
// DRA manager, which counts the allocations still in flight.
type Source struct {
	Slices  []*resourceapi.ResourceSlice
	Classes structured.DeviceClassLister
	// Allocated is read and, during Fits, briefly extended and restored:
	// the caller hands over a state of its own.
	Allocated *structured.AllocatedState
	Features  structured.Features
}

// Model keeps what outlives one plan: compiled selectors, which devices of
// a slice match a class, and per node how many members of a claim set fit.
type Model struct {
	cel *cel.Cache

	mu      sync.Mutex
	matches map[matchKey][]string
	fits    map[fitKey]fitEntry
}

// maxMatches and maxFits bound the caches: slices × classes, and shapes ×
// nodes. Both are cheap to refill, so they are cleared when full.
const (
	maxMatches = 1 << 16
	maxFits    = 1 << 18
)

type matchKey struct {
	slice      types.UID
	sliceGen   int64
	class      string
	classGen   int64
	classExist bool
}

type fitKey struct {
	shape string
	node  string
}

type fitEntry struct {
	fingerprint uint64
	count       int
	max         int
}

// NewModel makes an empty model.
func NewModel() *Model {
	return &Model{
		cel:     cel.NewCache(64, cel.Features{EnableConsumableCapacity: true, EnableListTypeAttributes: true}),
		matches: map[matchKey][]string{},
		fits:    map[fitKey]fitEntry{},
	}
}

// View is the device state of one plan.
type View struct {
	m   *Model
	ctx context.Context
	src Source

	// local are the slices of devices attached to one node (spec.nodeName,
	// or a node selector naming that node alone); shared reach nodes
	// through a selector or allNodes, and are offered to every node.
	local  map[string][]*resourceapi.ResourceSlice
	shared []*resourceapi.ResourceSlice
	// allocatedIn lists the allocated devices per pool.
	allocatedIn map[poolID][]string
	sharedPrint uint64

	mu sync.Mutex // Fits extends src.Allocated while it runs
}

type poolID struct{ driver, pool string }

// maxScan is how many allocated devices of a pool Room scans per name
// before it looks names up in the allocated set instead.
const maxScan = 32

// View prepares src for one plan.
func (m *Model) View(ctx context.Context, src Source) *View {
	v := &View{m: m, ctx: ctx, src: src, local: map[string][]*resourceapi.ResourceSlice{}, allocatedIn: map[poolID][]string{}}
	if v.src.Allocated == nil {
		v.src.Allocated = &structured.AllocatedState{AllocatedDevices: sets.New[structured.DeviceID]()}
	}
	if v.src.Allocated.AllocatedDevices == nil {
		v.src.Allocated.AllocatedDevices = sets.New[structured.DeviceID]()
	}
	for _, s := range src.Slices {
		if node := localNode(s); node != "" {
			v.local[node] = append(v.local[node], s)
		} else {
			v.shared = append(v.shared, s)
		}
	}
	for id := range v.src.Allocated.AllocatedDevices {
		p := poolID{id.Driver.String(), id.Pool.String()}
		v.allocatedIn[p] = append(v.allocatedIn[p], id.Device.String())
	}
	h := fnv.New64a()
	for _, s := range v.shared {
		fmt.Fprintf(h, "%s/%d;", s.UID, s.Generation)
		v.writeAllocated(h, s)
	}
	v.sharedPrint = h.Sum64()
	return v
}

// localNode is the one node a slice's devices are attached to, "" for a
// slice that reaches nodes by selector or allNodes.
func localNode(s *resourceapi.ResourceSlice) string {
	if s.Spec.NodeName != nil && *s.Spec.NodeName != "" {
		return *s.Spec.NodeName
	}
	// A node selector on metadata.name In [one node] attaches the slice to
	// that node as surely as nodeName (drivers that publish many nodes'
	// pools from one place use it).
	if sel := s.Spec.NodeSelector; sel != nil && len(sel.NodeSelectorTerms) == 1 {
		t := sel.NodeSelectorTerms[0]
		if len(t.MatchExpressions) == 0 && len(t.MatchFields) == 1 {
			f := t.MatchFields[0]
			if f.Key == "metadata.name" && f.Operator == corev1.NodeSelectorOpIn && len(f.Values) == 1 {
				return f.Values[0]
			}
		}
	}
	return ""
}

func (v *View) writeAllocated(h interface{ Write([]byte) (int, error) }, s *resourceapi.ResourceSlice) {
	devs := v.allocatedIn[poolID{s.Spec.Driver, s.Spec.Pool.Name}]
	if len(devs) == 0 {
		return
	}
	sorted := slices.Clone(devs)
	sort.Strings(sorted)
	fmt.Fprintf(h, "a:%s;", strings.Join(sorted, ","))
}

// HasDevices says whether any slice attaches devices to node or reaches
// nodes by selector.
func (v *View) HasDevices(node string) bool {
	return len(v.local[node]) > 0 || len(v.shared) > 0
}

// Room counts, on node, the node-local devices that match class and how
// many of them are allocated. A class that does not exist matches nothing.
func (v *View) Room(node, class string) (total, used int64) {
	for _, s := range v.local[node] {
		names := v.m.matching(v.ctx, s, v.src.Classes, class)
		total += int64(len(names))
		// A node's pool has a handful of allocated devices, listed once per
		// view: scanning them beats making a device ID per name, whose
		// three interned strings made Room a sixth of a plan's CPU at
		// 1,000 nodes. A large pool is looked up in the allocated set.
		allocated := v.allocatedIn[poolID{s.Spec.Driver, s.Spec.Pool.Name}]
		for _, name := range names {
			switch {
			case len(allocated) == 0:
			case len(allocated) <= maxScan:
				if slices.Contains(allocated, name) {
					used++
				}
			case v.src.Allocated.AllocatedDevices.Has(structured.MakeDeviceID(s.Spec.Driver, s.Spec.Pool.Name, name)):
				used++
			}
		}
	}
	return total, used
}

// matching lists the devices of s that every selector of class matches,
// as the allocator would test them.
func (m *Model) matching(ctx context.Context, s *resourceapi.ResourceSlice, classes structured.DeviceClassLister, class string) []string {
	dc, err := classes.Get(class)
	key := matchKey{slice: s.UID, sliceGen: s.Generation, class: class}
	if err == nil && dc != nil {
		key.classGen, key.classExist = dc.Generation, true
	}
	m.mu.Lock()
	names, ok := m.matches[key]
	m.mu.Unlock()
	if ok {
		return names
	}
	names = []string{}
	if key.classExist {
		for _, d := range s.Spec.Devices {
			if m.matchesAll(ctx, s.Spec.Driver, d, dc.Spec.Selectors) {
				names = append(names, d.Name)
			}
		}
	}
	m.mu.Lock()
	if len(m.matches) >= maxMatches {
		clear(m.matches)
	}
	m.matches[key] = names
	m.mu.Unlock()
	return names
}

// matchesAll evaluates selectors on d; an expression that does not
// compile or fails to evaluate does not match, as the allocator refuses
// such a device.
func (m *Model) matchesAll(ctx context.Context, driver string, d resourceapi.Device, selectors []resourceapi.DeviceSelector) bool {
	for _, sel := range selectors {
		if sel.CEL == nil {
			return false
		}
		expr := m.cel.GetOrCompile(sel.CEL.Expression)
		if expr.Error != nil {
			return false
		}
		ok, _, err := expr.DeviceMatches(ctx, cel.Device{Driver: driver, Attributes: d.Attributes, Capacity: d.Capacity, AllowMultipleAllocations: d.AllowMultipleAllocations})
		if err != nil || !ok {
			return false
		}
	}
	return true
}

// Fits is how many members, each with its own copy of claims (unallocated
// claims, the same for every member), node holds, up to max: the claims
// are allocated on the node one member after another, each allocation
// counted before the next, as the members' DynamicResources Filter and
// Reserve will do when the scheduler takes them in turn. shape keys the
// answer, which is kept until the node's devices or their allocations
// change.
func (v *View) Fits(shape string, node *corev1.Node, claims []*resourceapi.ResourceClaim, max int) (int, error) {
	if max <= 0 || len(claims) == 0 {
		return max, nil
	}
	print := v.fingerprint(node.Name)
	key := fitKey{shape: shape, node: node.Name}
	v.m.mu.Lock()
	e, ok := v.m.fits[key]
	v.m.mu.Unlock()
	// A count below the old bound is exact; one at the bound may grow
	// with a larger bound.
	if ok && e.fingerprint == print && (e.count < e.max || e.max >= max) {
		return min(e.count, max), nil
	}
	n, err := v.allocateInTurn(node, claims, max)
	if err != nil {
		return 0, err
	}
	v.m.mu.Lock()
	if len(v.m.fits) >= maxFits {
		clear(v.m.fits)
	}
	v.m.fits[key] = fitEntry{fingerprint: print, count: n, max: max}
	v.m.mu.Unlock()
	return n, nil
}

// fingerprint hashes what Fits on node reads: the node's slices, the
// shared slices, and the allocated devices among them.
func (v *View) fingerprint(node string) uint64 {
	h := fnv.New64a()
	fmt.Fprintf(h, "%d;", v.sharedPrint)
	for _, s := range v.local[node] {
		fmt.Fprintf(h, "%s/%d;", s.UID, s.Generation)
		v.writeAllocated(h, s)
	}
	return h.Sum64()
}

// Allocate is the allocation of claims on node, as the allocator would
// make it now, nil when they cannot be allocated there. Allocations
// reaching several nodes are what decides where members sharing the
// claims may go.
func (v *View) Allocate(node *corev1.Node, claims []*resourceapi.ResourceClaim) ([]resourceapi.AllocationResult, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	candidates := append(slices.Clone(v.local[node.Name]), v.shared...)
	a, err := structured.NewAllocator(v.ctx, v.src.Features, *v.src.Allocated, v.src.Classes, candidates, v.m.cel)
	if err != nil {
		return nil, fmt.Errorf("device allocator: %w", err)
	}
	results, err := a.Allocate(v.ctx, node, claims)
	if err != nil {
		return nil, fmt.Errorf("allocate devices on node %s: %w", node.Name, err)
	}
	if len(results) != len(claims) {
		return nil, nil
	}
	return results, nil
}

func (v *View) allocateInTurn(node *corev1.Node, claims []*resourceapi.ResourceClaim, max int) (int, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	state := v.src.Allocated
	var added []structured.DeviceID
	var addedShared []structured.SharedDeviceID
	defer func() {
		for _, id := range added {
			state.AllocatedDevices.Delete(id)
		}
		for _, id := range addedShared {
			state.AllocatedSharedDeviceIDs.Delete(id)
		}
	}()
	candidates := append(slices.Clone(v.local[node.Name]), v.shared...)
	n := 0
	for n < max {
		a, err := structured.NewAllocator(v.ctx, v.src.Features, *state, v.src.Classes, candidates, v.m.cel)
		if err != nil {
			return 0, fmt.Errorf("device allocator: %w", err)
		}
		results, err := a.Allocate(v.ctx, node, claims)
		if err != nil {
			return 0, fmt.Errorf("allocate devices on node %s: %w", node.Name, err)
		}
		if len(results) != len(claims) {
			break
		}
		for _, r := range results {
			for _, d := range r.Devices.Results {
				if d.AdminAccess != nil && *d.AdminAccess {
					continue
				}
				id := structured.MakeDeviceID(d.Driver, d.Pool, d.Device)
				if d.ShareID != nil {
					if state.AllocatedSharedDeviceIDs == nil {
						state.AllocatedSharedDeviceIDs = sets.New[structured.SharedDeviceID]()
					}
					sid := structured.MakeSharedDeviceID(id, d.ShareID)
					if !state.AllocatedSharedDeviceIDs.Has(sid) {
						state.AllocatedSharedDeviceIDs.Insert(sid)
						addedShared = append(addedShared, sid)
					}
					continue
				}
				if !state.AllocatedDevices.Has(id) {
					state.AllocatedDevices.Insert(id)
					added = append(added, id)
				}
			}
		}
		n++
	}
	return n, nil
}
