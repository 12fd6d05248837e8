// Package instances lets code outside the scheduling framework find the
// plugin objects a profile runs. kube-scheduler's framework keeps them
// private, but the diagnostics endpoints (pkg/inspect) must read what the
// running plugins hold for a group (its stored plan, the nodes its members
// were refused on, victims still terminating) to explain it as the
// scheduler sees it.
package instances

import (
	"context"
	"sync"

	fwk "k8s.io/kube-scheduler/framework"
)

type entry struct {
	handle fwk.Handle
	name   string
}

var (
	mu      sync.Mutex
	plugins = map[entry]fwk.Plugin{}
)

// Register records p as the plugin its Name() reports in the profile behind
// h, until ctx (the framework's) is done. h is the handle the framework
// passed to p's factory, which is the profile's framework itself.
func Register(ctx context.Context, h fwk.Handle, p fwk.Plugin) {
	e := entry{handle: h, name: p.Name()}
	mu.Lock()
	plugins[e] = p
	mu.Unlock()
	go func() {
		<-ctx.Done()
		mu.Lock()
		if plugins[e] == p {
			delete(plugins, e)
		}
		mu.Unlock()
	}()
}

// Get returns the plugin called name that the profile behind h runs. h may
// be a framework wrapped after the plugins were built (gang's
// QuietMemberEvents), which offers the framework it wraps.
func Get(h fwk.Handle, name string) (fwk.Plugin, bool) {
	if w, ok := h.(interface{ Unwrap() fwk.Handle }); ok {
		h = w.Unwrap()
	}
	mu.Lock()
	defer mu.Unlock()
	p, ok := plugins[entry{handle: h, name: name}]
	return p, ok
}
