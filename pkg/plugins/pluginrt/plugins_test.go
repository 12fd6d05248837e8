package pluginrt

import (
	"context"
	"testing"
	"time"

	fwk "k8s.io/kube-scheduler/framework"
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
