package gang

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// The command syncs the dynamic informers of watchedResources before the
// scheduler starts, so the scheduler's polling wait for them passes at its
// first check. A resource registered for a hint but missing from the list
// would bring that wait back; one listed but not registered would be
// watched for nothing.
func TestWatchedResourcesAreTheRegisteredCustomResources(t *testing.T) {
	regs, err := (&Gang{}).EventsToRegister(context.Background())
	require.NoError(t, err)
	var registered []schema.GroupVersionResource
	for _, r := range regs {
		// The scheduler watches a resource named <plural>.<version>.<group>
		// through its dynamic informer factory.
		if s := string(r.Event.Resource); strings.Count(s, ".") >= 2 {
			gvr, _ := schema.ParseResourceArg(s)
			registered = append(registered, *gvr)
		}
	}
	require.NotEmpty(t, registered)
	assert.ElementsMatch(t, registered, watchedResources())
}
