package topology

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"
)

// The informers of ResourceSlices and ResourceClaims keep their objects
// without managedFields, and everything else of them.
func TestDeviceInformersDropManagedFields(t *testing.T) {
	managed := []metav1.ManagedFieldsEntry{{Manager: "kube-scheduler", Operation: metav1.ManagedFieldsOperationUpdate, Subresource: "status"}}
	client := fake.NewClientset(
		&resourceapi.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: "n1-gpus", ManagedFields: managed},
			Spec: resourceapi.ResourceSliceSpec{Driver: "gpu.example.com", Devices: []resourceapi.Device{{Name: "gpu-0"}}}},
		&resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "c", ManagedFields: managed,
			Annotations: map[string]string{resourceapi.PodResourceClaimAnnotation: "gpu"}}},
	)
	f := informers.NewSharedInformerFactory(client, 0)
	slices, claims := f.Resource().V1().ResourceSlices(), f.Resource().V1().ResourceClaims()
	sliceInf, claimInf := slices.Informer(), claims.Informer()
	stripManagedFields(sliceInf, claimInf)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	f.Start(ctx.Done())
	defer f.Shutdown()
	defer cancel() // before Shutdown, which waits for the informers to stop
	require.True(t, cache.WaitForCacheSync(ctx.Done(), sliceInf.HasSynced, claimInf.HasSynced))

	s, err := slices.Lister().Get("n1-gpus")
	require.NoError(t, err)
	require.Nil(t, s.ManagedFields)
	require.Equal(t, "gpu-0", s.Spec.Devices[0].Name)
	c, err := claims.Lister().ResourceClaims("ns").Get("c")
	require.NoError(t, err)
	require.Nil(t, c.ManagedFields)
	require.Equal(t, "gpu", c.Annotations[resourceapi.PodResourceClaimAnnotation])
}
