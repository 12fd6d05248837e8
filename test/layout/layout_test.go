// Package layout checks the repository's layering: what ships in the
// images never links the tooling.
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
