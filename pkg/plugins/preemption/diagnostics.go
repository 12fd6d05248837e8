package preemption

import (
	"sort"
	"time"

	"github.com/phalanx-sched/phalanx/pkg/groups"
)

// Eviction is the plugin's last preemption for a hierarchy while its
// victims may still be terminating: the group does not preempt again until
// they are gone or their wait has ended (waitEnd).
type Eviction struct {
	At time.Time
	// Victims are namespace/name, sorted.
	Victims []string
	// Left are the victims the API server still has.
	Left []string
}

// LastEviction returns root's remembered preemption, false when there is
// none or the wait for every victim has ended. It only reads: the memory is
// cleared by the group's next PostFilter.
func (p *Preemption) LastEviction(root groups.Key) (Eviction, bool) {
	pe, victims := p.pendingVictims(root)
	if pe == nil {
		return Eviction{}, false
	}
	now := p.now()
	e := Eviction{At: pe.at}
	waiting := false
	for uid, v := range victims {
		e.Victims = append(e.Victims, v.name)
		pod := p.victimPod(uid, v)
		if pod != nil {
			e.Left = append(e.Left, v.name)
		}
		waiting = waiting || !now.After(waitEnd(pe.at, v, pod))
	}
	if !waiting {
		return Eviction{}, false
	}
	sort.Strings(e.Victims)
	sort.Strings(e.Left)
	return e, true
}
