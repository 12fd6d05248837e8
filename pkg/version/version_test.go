package version

import (
	"strings"
	"testing"
)

func TestStringNamesVersionAndCommit(t *testing.T) {
	oldV, oldC := Version, Commit
	t.Cleanup(func() { Version, Commit = oldV, oldC })
	Version, Commit = "v1.2.3", "0123456789abcdef"
	got := String("phalanx-controller")
	if !strings.HasPrefix(got, "phalanx-controller v1.2.3 (commit 0123456789abcdef, Kubernetes ") {
		t.Errorf("String = %q", got)
	}
}
