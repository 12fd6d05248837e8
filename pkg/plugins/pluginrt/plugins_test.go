package pluginrt

import (
	"context"
	"testing"
	"time"

	fwk "k8s.io/kube-scheduler/framework"

	"github.com/phalanx-sched/phalanx/pkg/groups"
)

type plugin struct{ name string }

func (p *plugin) Name() string { return p.name }

type handle struct{ fwk.Handle }

func TestRegisterGetAndForget(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	h1, h2 := &handle{}, &handle{}
	a, b := &plugin{"A"}, &plugin{"A"}
	r := New()
	r.Register(ctx, h1, a)
	r.Register(context.Background(), h2, b)

	if got, ok := r.Plugin(h1, "A"); !ok || got != a {
		t.Fatalf("Plugin(h1, A) = %v, %v; want the plugin registered for h1", got, ok)
	}
	if got, ok := r.Plugin(h2, "A"); !ok || got != b {
		t.Fatalf("Plugin(h2, A) = %v, %v; want the plugin registered for h2", got, ok)
	}
	if _, ok := r.Plugin(h1, "B"); ok {
		t.Fatal("Plugin(h1, B) found a plugin that was never registered")
	}
	cancel()
	deadline := time.Now().Add(5 * time.Second)
	for {
		if _, ok := r.Plugin(h1, "A"); !ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the plugin of a framework whose context ended is still registered")
		}
		time.Sleep(time.Millisecond)
	}
	if _, ok := r.Plugin(h2, "A"); !ok {
		t.Fatal("another framework's plugin was dropped with the first")
	}
}

// permitPlugin is a plugin registered under Gang's name that answers
// PermitWaits.
type permitPlugin struct{ plugin }

func (p *permitPlugin) PermitSince(groups.Key) (time.Time, bool) { return time.Time{}, false }

// TestDiagnosticsReadsOnlyTheProfilesPlugins: a profile's Diagnostics
// holds what that profile's plugins answer, and nothing for a plugin the
// profile does not run or one that does not answer the interface.
func TestDiagnosticsReadsOnlyTheProfilesPlugins(t *testing.T) {
	h1, h2 := &handle{}, &handle{}
	r := New()
	gang := &permitPlugin{plugin{GangName}}
	r.Register(context.Background(), h1, gang)
	r.Register(context.Background(), h1, &plugin{TopologyName})

	d := r.Diagnostics(h1)
	if d.Permits != gang {
		t.Errorf("Permits = %v; want the profile's %s", d.Permits, GangName)
	}
	if d.Plans != nil || d.Victims != nil {
		t.Errorf("Plans = %v, Victims = %v; want nil: the profile's %s reads no plans and it runs no %s", d.Plans, d.Victims, TopologyName, PreemptionName)
	}
	if d := r.Diagnostics(h2); d != (Diagnostics{}) {
		t.Errorf("Diagnostics of a profile without Phalanx plugins = %+v; want none", d)
	}
}
