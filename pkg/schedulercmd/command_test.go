package schedulercmd

import (
	"io"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/phalanx-sched/phalanx/pkg/inspect"
)

func TestDiagnosticsLimitFlags(t *testing.T) {
	t.Run("every diagnostics limit has a flag with its default", func(t *testing.T) {
		cmd := NewCommand()
		for name, want := range map[string]string{
			inspect.FlagMaxRequestBytes:     "3145728",
			inspect.FlagMaxFitPods:          "1000",
			inspect.FlagMaxTopKeys:          "20",
			inspect.FlagRequestTimeout:      "30s",
			inspect.FlagMaxRequestsInflight: "4",
		} {
			f := cmd.Flags().Lookup(name)
			require.NotNil(t, f, "--%s", name)
			assert.Equal(t, want, f.DefValue, "--%s", name)
		}
	})
	t.Run("a limit that is not positive is refused before the scheduler starts", func(t *testing.T) {
		cmd := NewCommand()
		cmd.SetArgs([]string{"--" + inspect.FlagMaxFitPods + "=0", "--" + inspect.FlagRequestTimeout + "=-1s"})
		cmd.SetOut(io.Discard)
		cmd.SetErr(io.Discard)
		cmd.SilenceUsage = true
		err := cmd.Execute()
		require.Error(t, err)
		assert.Contains(t, err.Error(), "--phalanx-max-fit-pods=0: must be positive")
		assert.Contains(t, err.Error(), "--phalanx-request-timeout=-1s: must be positive")
	})
}
