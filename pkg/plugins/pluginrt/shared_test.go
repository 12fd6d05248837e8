package pluginrt

import (
	"errors"
	"testing"

	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
)

// Every profile's plugin asks for the scheduler-wide state; only the first
// builds it, and a failed build leaves nothing for the next to reuse.
func TestSharedIsBuiltOncePerInstance(t *testing.T) {
	i := &Instance{shared: map[string]any{}}
	if _, err := Shared(i, "p", func() (*int, error) { return nil, errors.New("no") }); err == nil {
		t.Fatal("a failed build returned no error")
	}
	builds := 0
	build := func() (*int, error) { builds++; n := builds; return &n, nil }
	a, err := Shared(i, "p", build)
	if err != nil {
		t.Fatal(err)
	}
	b, err := Shared(i, "p", build)
	if err != nil {
		t.Fatal(err)
	}
	if a != b || builds != 1 {
		t.Fatalf("two profiles got different state (%d builds)", builds)
	}
	if _, err := Shared(i, "p", func() (string, error) { return "", nil }); err == nil {
		t.Fatal("state of another type under the same name was returned")
	}
	other := &Instance{shared: map[string]any{}}
	c, _ := Shared(other, "p", build)
	if c == a {
		t.Fatal("a new scheduler run reused the previous run's state")
	}
}

// Preemption, which runs after PreFilter in the same cycle and in clones of
// its state, must see why the group was refused.
func TestGroupVerdictReachesLaterPluginsAndClones(t *testing.T) {
	state := framework.NewCycleState()
	if _, ok := GroupRefused(state); ok {
		t.Fatal("a cycle no plugin refused reports a refusal")
	}
	RefuseGroup(state, GroupIncomplete)
	for name, s := range map[string]fwk.CycleState{"cycle": state, "clone": state.Clone()} {
		if v, ok := GroupRefused(s); !ok || v != GroupIncomplete {
			t.Fatalf("%s: GroupRefused = %v, %v; want incomplete", name, v, ok)
		}
	}
}
