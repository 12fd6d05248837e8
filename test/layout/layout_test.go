// Package layout checks the repository's layering: what ships in the
// images never links the tooling, and the group model links no API
// machinery.
package layout

import (
	"os/exec"
	"strings"
	"testing"
)

const module = "github.com/phalanx-sched/phalanx/"

// TestShippedBinariesLinkNoTooling: the sandbox, the simulator and the
// bench link kube-apiserver, etcd and test helpers; none of it may end up
// in phalanx-scheduler, phalanx-controller or kubectl-phalanx, and no
// package under pkg/ may import it.
func TestShippedBinariesLinkNoTooling(t *testing.T) {
	deps := goList(t, "-deps", "../../cmd/...")
	for _, p := range deps {
		rel := strings.TrimPrefix(p, module)
		if strings.HasPrefix(rel, "tools/") || strings.HasPrefix(rel, "test/") || strings.HasPrefix(rel, "hack/") {
			t.Errorf("a shipped binary links %s", p)
		}
	}
	if len(deps) == 0 {
		t.Fatal("go list found no dependencies of ./cmd/...")
	}
	for _, line := range goList(t, "-f", `{{.ImportPath}} {{join .Imports " "}}`, "../../pkg/...") {
		fields := strings.Fields(line)
		for _, imp := range fields[1:] {
			if strings.HasPrefix(imp, module+"tools/") {
				t.Errorf("%s imports the tooling package %s", fields[0], imp)
			}
		}
	}
}

// TestGroupModelReadsNoAPI: pkg/groups is the group model and its
// in-memory Cache, which the planner's tests, the diagnostics and the
// fuzzers build without an API server; pkg/groupcache is what feeds it
// from informers. The model must not link client-go's informers, listers
// or cache machinery, nor the scheduler framework (which links all of
// them), or the split is only a folder name.
func TestGroupModelReadsNoAPI(t *testing.T) {
	forbidden := []string{
		"k8s.io/client-go/tools/cache",
		"k8s.io/client-go/informers",
		"k8s.io/client-go/listers",
		"k8s.io/kube-scheduler/framework",
		"k8s.io/kubernetes/pkg/scheduler",
	}
	deps := goList(t, "-deps", "../../pkg/groups")
	if len(deps) == 0 {
		t.Fatal("go list found no dependencies of pkg/groups")
	}
	for _, p := range deps {
		for _, f := range forbidden {
			if p == f || strings.HasPrefix(p, f+"/") {
				t.Errorf("pkg/groups links %s", p)
			}
		}
	}
}

func goList(t *testing.T, args ...string) []string {
	t.Helper()
	out, err := exec.Command("go", append([]string{"list"}, args...)...).Output()
	if err != nil {
		if ee, ok := err.(*exec.ExitError); ok {
			t.Fatalf("go list %v: %v\n%s", args, err, ee.Stderr)
		}
		t.Fatalf("go list %v: %v", args, err)
	}
	return strings.Split(strings.TrimSpace(string(out)), "\n")
}
