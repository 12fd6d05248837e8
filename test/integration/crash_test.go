package integration

import (
	"context"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	v1alpha1 "github.com/phalanx-sched/phalanx/apis/scheduling/v1alpha1"
	"github.com/phalanx-sched/phalanx/tools/sandbox"
)

// TestSchedulerCrashDuringABind kills the scheduler while one member's
// binding request is in flight: an admission webhook holds the binding of
// g-2 of a rack-constrained gang of 3 until the scheduler is gone, after its
// siblings are bound. Outcome: the crash unbinds nothing; the in-flight
// binding dies with its client (the API server abandons the webhook call);
// the new scheduler counts the two bound members toward the gang and binds
// the third in their rack, although the planner's BestFit would put a lone
// pod in the other, fuller rack.
func TestSchedulerCrashDuringABind(t *testing.T) {
	c := startCluster(t, sandbox.Options{Scheduler: true})
	ctx := context.Background()
	rackNodes(t, c, "n", 2, 2, "4", nil)
	ns := namespace(t, c)
	// Rack 1 keeps 2 cpu free: too little for the gang (6 cpu), the best fit
	// for one more 2-cpu member.
	for i, cpu := range []string{"4", "2"} {
		p := member{name: fmt.Sprintf("fill-%d", i), cpu: cpu}.pod()
		p.Spec.NodeName = fmt.Sprintf("n-r1-n%d", i)
		_, err := c.Client.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	hold := holdBinding(t, c, "g-2")

	pg := gangPG("g", 3)
	pg.Spec.SchedulingConstraints = &v1alpha1.PodGroupSchedulingConstraints{Topology: topo(sandbox.RackLabel)}
	createPodGroup(t, c, ns, pg)
	for i := 0; i < 3; i++ {
		createPods(t, c, ns, member{name: fmt.Sprintf("g-%d", i), labels: inGroup("g"), cpu: "2"})
	}
	select {
	case <-hold.arrived:
	case <-time.After(60 * time.Second):
		t.Fatal("the binding of g-2 never reached the webhook")
	}
	waitBound(t, c, ns, "g-", 2)
	before := boundPods(t, c, ns)
	require.NotContains(t, before, "g-2", "g-2's binding is held")
	require.Equal(t, map[string]int{"n-rack-0": 2}, domainsOf(t, c, ns, "g-", sandbox.RackLabel))

	c.StopScheduler()
	select {
	case <-hold.abandoned:
		t.Log("the API server abandoned the held binding when the scheduler's request died")
	case <-time.After(40 * time.Second):
		t.Fatal("the held binding was never abandoned")
	}
	hold.release()
	consistently(t, 2*time.Second, "the crash unbinds nothing and binds nothing", func() bool {
		now := boundPods(t, c, ns)
		return len(now) == len(before) && now["g-0"] == before["g-0"] && now["g-1"] == before["g-1"]
	})

	_, err := c.StartScheduler(ctx)
	require.NoError(t, err)
	waitBound(t, c, ns, "g-", 3)
	assert.Equal(t, map[string]int{"n-rack-0": 3}, domainsOf(t, c, ns, "g-", sandbox.RackLabel), "g-2 joined its gang's rack")
	for name, node := range before {
		assert.Equal(t, node, boundPods(t, c, ns)[name], "%s stayed on its node", name)
	}
}

// heldBinding is an admission webhook that holds the binding of one pod.
type heldBinding struct {
	arrived   chan struct{} // closed when the binding reaches the webhook
	abandoned chan struct{} // closed when the API server gives up the call
	release   func()
}

// holdBinding serves a validating webhook for pods/binding over TLS and
// registers it. The binding of a pod named pod waits in the webhook until
// release is called or the API server abandons the call; every other
// binding is allowed at once. It returns once the webhook is in force.
func holdBinding(t *testing.T, c *sandbox.Cluster, pod string) *heldBinding {
	t.Helper()
	ctx := context.Background()
	h := &heldBinding{arrived: make(chan struct{}), abandoned: make(chan struct{})}
	released := make(chan struct{})
	var once, arrive, abandon sync.Once
	h.release = func() { once.Do(func() { close(released) }) }
	var mu sync.Mutex
	seen := map[string]bool{}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var review admissionv1.AdmissionReview
		if err := json.NewDecoder(r.Body).Decode(&review); err != nil || review.Request == nil {
			http.Error(w, "bad review", http.StatusBadRequest)
			return
		}
		req := review.Request
		mu.Lock()
		seen[req.Name] = true
		mu.Unlock()
		if req.Name == pod && req.SubResource == "binding" {
			arrive.Do(func() { close(h.arrived) })
			select {
			case <-released:
			case <-r.Context().Done():
				abandon.Do(func() { close(h.abandoned) })
				return
			}
		}
		review.Response = &admissionv1.AdmissionResponse{UID: req.UID, Allowed: true}
		review.Request = nil
		_ = json.NewEncoder(w).Encode(&review)
	}))
	srv.StartTLS()
	t.Cleanup(func() {
		h.release()
		srv.Close()
	})
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	url := srv.URL + "/validate"
	_, err := c.Client.AdmissionregistrationV1().ValidatingWebhookConfigurations().Create(ctx, &admissionregistrationv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "hold-" + pod},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{{
			Name:         "hold.bindings.phalanx.test",
			ClientConfig: admissionregistrationv1.WebhookClientConfig{URL: &url, CABundle: ca},
			Rules: []admissionregistrationv1.RuleWithOperations{{
				Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
				Rule:       admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"pods/binding"}},
			}},
			SideEffects:             ptr.To(admissionregistrationv1.SideEffectClassNone),
			AdmissionReviewVersions: []string{"v1"},
			TimeoutSeconds:          ptr.To[int32](30),
			FailurePolicy:           ptr.To(admissionregistrationv1.Fail),
		}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	// The configuration takes effect asynchronously: try to bind a gated
	// throwaway pod (the API server refuses that after admission) until the
	// webhook sees the request.
	probe := namespace(t, c)
	createPods(t, c, probe, member{name: "probe", cpu: "1", gated: true})
	eventually(t, 30*time.Second, "the webhook in force", func() (bool, error) {
		_ = c.Client.CoreV1().Pods(probe).Bind(ctx, &corev1.Binding{
			ObjectMeta: metav1.ObjectMeta{Name: "probe"}, Target: corev1.ObjectReference{Kind: "Node", Name: "no-such-node"}}, metav1.CreateOptions{})
		mu.Lock()
		defer mu.Unlock()
		return seen["probe"], nil
	})
	return h
}
