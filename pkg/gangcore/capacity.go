package gangcore

import (
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/phalanx-sched/phalanx/pkg/placement"
)

// ExceedsAllocatable is PreFilter's size check of a leaf gang: why need
// members, whose requests are requests (one entry per live member), can
// never fit the allocatable alloc of the nodes even if they were empty;
// "" when they might. Each member requests at least the element-wise
// minimum of the members' requests (and one pod slot), so no placement can
// hold more members per node than that minimum fits.
func ExceedsAllocatable(need int, requests []placement.Resources, alloc []placement.Resources) string {
	if len(requests) == 0 {
		return ""
	}
	least := make(placement.Resources, len(requests[0]))
	for name, v := range requests[0] {
		least[name] = v
	}
	same := true
	for _, req := range requests[1:] {
		for name, v := range least {
			if req[name] != v {
				same = false
			}
			if req[name] < v {
				least[name] = req[name]
			}
		}
		if len(req) != len(least) {
			same = false
		}
	}
	holds := 0
	for _, node := range alloc {
		fit := -1
		if pods, ok := node[corev1.ResourcePods]; ok {
			fit = int(pods)
		}
		for name, v := range least {
			if v <= 0 || name == corev1.ResourcePods {
				continue
			}
			if n := int(node[name] / v); fit < 0 || n < fit {
				fit = n
			}
		}
		if fit < 0 {
			// Nothing requested and no pod limit: the node bounds nothing.
			return ""
		}
		holds += fit
		if holds >= need {
			return ""
		}
	}
	of := "of"
	if !same {
		of = "of at least"
	}
	return fmt.Sprintf("needs %d pods %s %s; the cluster's allocatable holds at most %d (%d nodes)", need, of, Describe(least), holds, len(alloc))
}

// Describe prints requests the way a user wrote them, e.g. "1 cpu, 4Gi memory".
func Describe(r placement.Resources) string { return Amounts(r, false) }

// Amounts is Describe that, with zeros set, also prints the resources of r
// that are 0 ("0 cpu free").
func Amounts(r placement.Resources, zeros bool) string {
	names := make([]string, 0, len(r))
	for n, v := range r {
		if v > 0 || (zeros && v == 0) {
			names = append(names, string(n))
		}
	}
	sort.Strings(names)
	parts := make([]string, 0, len(names))
	for _, n := range names {
		v := r[corev1.ResourceName(n)]
		switch corev1.ResourceName(n) {
		case corev1.ResourceCPU:
			if v%1000 == 0 || v == 0 {
				parts = append(parts, fmt.Sprintf("%d cpu", v/1000))
			} else {
				parts = append(parts, fmt.Sprintf("%dm cpu", v))
			}
		case corev1.ResourceMemory, corev1.ResourceEphemeralStorage:
			parts = append(parts, fmt.Sprintf("%s %s", bytes(v), n))
		case corev1.ResourcePods:
			if v == 1 {
				parts = append(parts, "1 pod")
			} else {
				parts = append(parts, fmt.Sprintf("%d pods", v))
			}
		default:
			parts = append(parts, fmt.Sprintf("%d %s", v, n))
		}
	}
	if len(parts) == 0 {
		return "no requests"
	}
	return strings.Join(parts, ", ")
}

func bytes(v int64) string {
	for _, u := range []struct {
		suffix string
		size   int64
	}{{"Ti", 1 << 40}, {"Gi", 1 << 30}, {"Mi", 1 << 20}, {"Ki", 1 << 10}} {
		if v >= u.size && v%u.size == 0 {
			return fmt.Sprintf("%d%s", v/u.size, u.suffix)
		}
	}
	return fmt.Sprintf("%d", v)
}
