package preemption

import (
	"sort"
	"time"

	"github.com/phalanx-sched/phalanx/pkg/groups"
)

// Eviction is the plugin's last preemption for a hierarchy while its
// victims may still be terminating: the group does not preempt again until
// they are gone or victimWait has passed.
type Eviction struct {
	At time.Time
	// Victims are namespace/name, sorted.
	Victims []string
	// Left are the victims the API server still has.
	Left []string
}

// LastEviction returns root's remembered preemption, false when there is
// none or it is older than the wait for its victims. It only reads: the
// memory is cleared by the group's next PostFilter.
func (p *Preemption) LastEviction(root groups.Key) (Eviction, bool) {
	p.mu.Lock()
	pe := p.pending[root]
	p.mu.Unlock()
	if pe == nil || p.now().Sub(pe.at) > victimWait {
		return Eviction{}, false
	}
	e := Eviction{At: pe.at}
	for uid, name := range pe.victims {
		e.Victims = append(e.Victims, name)
		ns, n := splitKey(name)
		if pod, err := p.pods.Pods(ns).Get(n); err == nil && pod.UID == uid {
			e.Left = append(e.Left, name)
		}
	}
	sort.Strings(e.Victims)
	sort.Strings(e.Left)
	return e, true
}
