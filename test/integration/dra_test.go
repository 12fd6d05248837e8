package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	v1alpha1 "github.com/phalanx-sched/phalanx/apis/scheduling/v1alpha1"
	"github.com/phalanx-sched/phalanx/pkg/debugapi"
	"github.com/phalanx-sched/phalanx/tools/sandbox"
)

// draMember is a gang member that asks for one device of the sandbox
// driver's class, through a claim made from template, or through its own
// claim when template is "".
func draMember(name, group, template, claim string) *corev1.Pod {
	p := member{name: name, labels: inGroup(group), cpu: "1"}.pod()
	pc := corev1.PodResourceClaim{Name: "gpu"}
	if template != "" {
		pc.ResourceClaimTemplateName = ptr.To(template)
	} else {
		pc.ResourceClaimName = ptr.To(claim)
	}
	p.Spec.ResourceClaims = []corev1.PodResourceClaim{pc}
	p.Spec.Containers[0].Resources.Claims = []corev1.ResourceClaim{{Name: "gpu"}}
	return p
}

func oneGPU() resourceapi.DeviceClaim {
	return resourceapi.DeviceClaim{Requests: []resourceapi.DeviceRequest{{
		Name:    "gpu",
		Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: sandbox.DeviceClass},
	}}}
}

// deviceRefusals lists the events of ns that show a member refused for
// devices after it was planned: what a plan that miscounts devices causes.
func deviceRefusals(t *testing.T, c *sandbox.Cluster, ns string) []string {
	evs, err := c.Client.EventsV1().Events(ns).List(context.Background(), metav1.ListOptions{})
	require.NoError(t, err)
	var out []string
	for _, e := range evs.Items {
		if strings.Contains(e.Note, "cannot allocate all claims") || strings.Contains(e.Note, "DynamicResources") {
			out = append(out, e.Regarding.Name+": "+e.Note)
		}
	}
	return out
}

// TestDRAGangs: gangs whose members each allocate a GPU through a
// ResourceClaim, on 4 racks of 4 nodes with one GPU each published by
// upstream's ResourceSlice controller, claims made from templates by
// upstream's resourceclaim controller. A plan that counted only cpu would
// put several members on one node, where the DynamicResources filter
// refuses all but one and the gang retries as a unit.
func TestDRAGangs(t *testing.T) {
	c := startCluster(t, sandbox.Options{Scheduler: true, NodeAgent: true, Controllers: true, Diagnostics: true, Topology: &sandbox.Topology{
		Zones: 1, RacksPerZone: 4, NodesPerRack: 4, CPU: "32", Memory: "64Gi", Pods: 110}})
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel) // stops the device publishers before the cluster
	nodes, err := c.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	var nodeList []*corev1.Node
	for i := range nodes.Items {
		nodeList = append(nodeList, &nodes.Items[i])
	}
	require.NoError(t, sandbox.PublishDevices(ctx, c.Client, nodeList, sandbox.Devices{PerNode: 1}))
	ns := namespace(t, c)
	_, err = c.Client.ResourceV1().ResourceClaimTemplates(ns).Create(ctx, &resourceapi.ResourceClaimTemplate{
		ObjectMeta: metav1.ObjectMeta{Name: "gpu"},
		Spec:       resourceapi.ResourceClaimTemplateSpec{Spec: resourceapi.ResourceClaimSpec{Devices: oneGPU()}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)

	t.Run("a rack gang that needs more devices than a rack has binds nothing and names the class and the shortfall", func(t *testing.T) {
		createPodGroup(t, c, ns, rackGang("big", 5, sandbox.RackLabel))
		for i := range 5 {
			_, err := c.Client.CoreV1().Pods(ns).Create(ctx, draMember(fmt.Sprintf("big-%d", i), "big", "gpu", ""), metav1.CreateOptions{})
			require.NoError(t, err)
		}
		cond := waitGroupCondition(t, c, ns, "big", "Schedulable", "short 1 device of class "+sandbox.DeviceClass)
		assert.Contains(t, cond.Message, "fits 4", "a rack holds 4 of the 5 members: one device each")
		assert.Empty(t, boundPods(t, c, ns))
		require.NoError(t, c.Client.CoreV1().Pods(ns).DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: ptr.To(int64(0))}, metav1.ListOptions{LabelSelector: "scheduling.phalanx.dev/pod-group=big"}))
		eventually(t, 30*time.Second, "big's pods gone", func() (bool, error) {
			pods, err := c.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
			return err == nil && len(pods.Items) == 0, err
		})
	})

	t.Run("a rack gang of members with claims from a template binds whole, one member per device, with no refusal for devices", func(t *testing.T) {
		createPodGroup(t, c, ns, rackGang("tmpl", 4, sandbox.RackLabel))
		for i := range 4 {
			_, err := c.Client.CoreV1().Pods(ns).Create(ctx, draMember(fmt.Sprintf("tmpl-%d", i), "tmpl", "gpu", ""), metav1.CreateOptions{})
			require.NoError(t, err)
		}
		eventually(t, 60*time.Second, "4 members of tmpl bound", func() (bool, error) { return countPrefix(boundPods(t, c, ns), "tmpl-") == 4, nil })
		assert.Len(t, domainsOf(t, c, ns, "tmpl-", sandbox.RackLabel), 1, "one rack")
		assert.Len(t, domainsOf(t, c, ns, "tmpl-", sandbox.HostnameLabel), 4, "one member per node: each node has one device")
		assert.Empty(t, deviceRefusals(t, c, ns), "no member was refused for devices after it was planned")
	})

	t.Run("the user guide's sample DRA gang binds whole in one rack", func(t *testing.T) {
		data, err := os.ReadFile("../../manifests/samples/dra-gang.yaml")
		require.NoError(t, err)
		require.NoError(t, applyYAML(ctx, c, ns, data))
		eventually(t, 60*time.Second, "4 members of dra-trainer bound", func() (bool, error) { return countPrefix(boundPods(t, c, ns), "dra-trainer-") == 4, nil })
		assert.Len(t, domainsOf(t, c, ns, "dra-trainer-", sandbox.RackLabel), 1, "one rack")
		assert.Len(t, domainsOf(t, c, ns, "dra-trainer-", sandbox.HostnameLabel), 4, "one member per node")
	})

	t.Run("a rack gang of members with claims of their own binds whole in another rack", func(t *testing.T) {
		createPodGroup(t, c, ns, rackGang("own", 4, sandbox.RackLabel))
		for i := range 4 {
			name := fmt.Sprintf("own-%d", i)
			_, err := c.Client.ResourceV1().ResourceClaims(ns).Create(ctx, &resourceapi.ResourceClaim{
				ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: resourceapi.ResourceClaimSpec{Devices: oneGPU()},
			}, metav1.CreateOptions{})
			require.NoError(t, err)
			_, err = c.Client.CoreV1().Pods(ns).Create(ctx, draMember(name, "own", "", name), metav1.CreateOptions{})
			require.NoError(t, err)
		}
		eventually(t, 60*time.Second, "4 members of own bound", func() (bool, error) { return countPrefix(boundPods(t, c, ns), "own-") == 4, nil })
		assert.Len(t, domainsOf(t, c, ns, "own-", sandbox.RackLabel), 1, "one rack")
		assert.Len(t, domainsOf(t, c, ns, "own-", sandbox.HostnameLabel), 4, "one member per node")
		assert.Empty(t, deviceRefusals(t, c, ns))
		claims, err := c.Client.ResourceV1().ResourceClaims(ns).List(ctx, metav1.ListOptions{})
		require.NoError(t, err)
		allocated := 0
		for _, cl := range claims.Items {
			if cl.Status.Allocation != nil {
				allocated++
			}
		}
		assert.Equal(t, 12, allocated, "every member of the three gangs holds its device")
	})

	t.Run("members sharing one claim of a rack-wide device land where its allocation reaches, in the rack with free GPUs", func(t *testing.T) {
		var racks []string
		for _, n := range nodeList {
			if r := n.Labels[sandbox.RackLabel]; !slices.Contains(racks, r) {
				racks = append(racks, r)
			}
		}
		require.NoError(t, sandbox.PublishDomainDevices(ctx, c.Client, "channel.phalanx.dev", sandbox.RackLabel, racks, 2))
		_, err := c.Client.ResourceV1().ResourceClaims(ns).Create(ctx, &resourceapi.ResourceClaim{
			ObjectMeta: metav1.ObjectMeta{Name: "cd-channel"},
			Spec: resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{Requests: []resourceapi.DeviceRequest{{
				Name: "channel", Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: "channel.phalanx.dev"},
			}}}},
		}, metav1.CreateOptions{})
		require.NoError(t, err)
		// No topology constraint: only the shared claim keeps the gang
		// in one rack.
		createPodGroup(t, c, ns, gangPG("cd", 4))
		for i := range 4 {
			p := draMember(fmt.Sprintf("cd-%d", i), "cd", "gpu", "")
			p.Spec.ResourceClaims = append(p.Spec.ResourceClaims, corev1.PodResourceClaim{Name: "channel", ResourceClaimName: ptr.To("cd-channel")})
			_, err := c.Client.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{})
			require.NoError(t, err)
		}
		eventually(t, 60*time.Second, "4 members of cd bound", func() (bool, error) { return countPrefix(boundPods(t, c, ns), "cd-") == 4, nil })
		assert.Len(t, domainsOf(t, c, ns, "cd-", sandbox.RackLabel), 1, "one rack: the channel's")
		assert.Empty(t, deviceRefusals(t, c, ns))
		claim, err := c.Client.ResourceV1().ResourceClaims(ns).Get(ctx, "cd-channel", metav1.GetOptions{})
		require.NoError(t, err)
		require.NotNil(t, claim.Status.Allocation, "the shared claim is allocated once")
		assert.Len(t, claim.Status.ReservedFor, 4, "for every member")
	})

	t.Run("a gang whose PodGroup carries the claim its members share binds whole where the claim reaches, the claim allocated once for the group", func(t *testing.T) {
		_, err := c.Client.ResourceV1().ResourceClaims(ns).Create(ctx, &resourceapi.ResourceClaim{
			ObjectMeta: metav1.ObjectMeta{Name: "grp-channel"},
			Spec: resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{Requests: []resourceapi.DeviceRequest{{
				Name: "channel", Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: "channel.phalanx.dev"},
			}}}},
		}, metav1.CreateOptions{})
		require.NoError(t, err)
		// No topology constraint and no device of a node's own: the
		// group's claim alone keeps the gang in one rack.
		pg := gangPG("grp", 4)
		pg.Spec.ResourceClaims = []v1alpha1.PodGroupResourceClaim{{Name: "channel", ResourceClaimName: ptr.To("grp-channel")}}
		createPodGroup(t, c, ns, pg)
		for i := range 4 {
			p := member{name: fmt.Sprintf("grp-%d", i), labels: inGroup("grp"), cpu: "1"}.pod()
			p.Spec.ResourceClaims = []corev1.PodResourceClaim{{Name: "channel", ResourceClaimName: ptr.To("grp-channel")}}
			p.Spec.Containers[0].Resources.Claims = []corev1.ResourceClaim{{Name: "channel"}}
			_, err := c.Client.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{})
			require.NoError(t, err)
		}
		eventually(t, 60*time.Second, "4 members of grp bound", func() (bool, error) { return countPrefix(boundPods(t, c, ns), "grp-") == 4, nil })
		assert.Len(t, domainsOf(t, c, ns, "grp-", sandbox.RackLabel), 1, "one rack: the group claim's")
		assert.Empty(t, deviceRefusals(t, c, ns), "no member was refused for the claim after it was planned")
		claim, err := c.Client.ResourceV1().ResourceClaims(ns).Get(ctx, "grp-channel", metav1.GetOptions{})
		require.NoError(t, err)
		require.NotNil(t, claim.Status.Allocation, "the group's claim is allocated once")
		assert.Equal(t, "PodGroup "+ns+"/grp", claim.Annotations["scheduling.phalanx.dev/allocated-for"], "by Phalanx, for the group")
		assert.Len(t, claim.Status.ReservedFor, 4, "each member reserves it")
	})

	t.Run("the user guide's sample gang sharing its PodGroup's claim binds whole in one rack", func(t *testing.T) {
		data, err := os.ReadFile("../../manifests/samples/dra-group-claim.yaml")
		require.NoError(t, err)
		require.NoError(t, applyYAML(ctx, c, ns, data))
		eventually(t, 60*time.Second, "4 members of fabric-trainer bound", func() (bool, error) { return countPrefix(boundPods(t, c, ns), "fabric-trainer-") == 4, nil })
		assert.Len(t, domainsOf(t, c, ns, "fabric-trainer-", sandbox.RackLabel), 1, "one rack")
	})

	t.Run("a PodGroup whose claim is made from a template is refused with the field named", func(t *testing.T) {
		pg := gangPG("grp-tmpl", 1)
		pg.Spec.ResourceClaims = []v1alpha1.PodGroupResourceClaim{{Name: "gpu", ResourceClaimTemplateName: ptr.To("gpu")}}
		createPodGroup(t, c, ns, pg)
		_, err := c.Client.CoreV1().Pods(ns).Create(ctx, draMember("grp-tmpl-0", "grp-tmpl", "gpu", ""), metav1.CreateOptions{})
		require.NoError(t, err)
		waitGroupCondition(t, c, ns, "grp-tmpl", "Schedulable", "spec.resourceClaims[gpu]")
		require.NoError(t, c.Client.CoreV1().Pods(ns).Delete(ctx, "grp-tmpl-0", metav1.DeleteOptions{GracePeriodSeconds: ptr.To(int64(0))}))
	})

	t.Run("a higher-priority gang preempts the pods holding the devices it needs, and leaves a pod holding another class's device alone", func(t *testing.T) {
		require.NoError(t, sandbox.PublishDevices(ctx, c.Client, nodeList, sandbox.Devices{Driver: "nic.phalanx.dev", PerNode: 1}))
		createPriorityClasses(t, c, &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: "urgent"}, Value: 1000})
		_, err := c.Client.ResourceV1().ResourceClaims(ns).Create(ctx, &resourceapi.ResourceClaim{
			ObjectMeta: metav1.ObjectMeta{Name: "nic"},
			Spec: resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{Requests: []resourceapi.DeviceRequest{{
				Name: "nic", Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: "nic.phalanx.dev"},
			}}}},
		}, metav1.CreateOptions{})
		require.NoError(t, err)
		holder := member{name: "nic-holder", cpu: "1"}.pod()
		holder.Spec.ResourceClaims = []corev1.PodResourceClaim{{Name: "nic", ResourceClaimName: ptr.To("nic")}}
		_, err = c.Client.CoreV1().Pods(ns).Create(ctx, holder, metav1.CreateOptions{})
		require.NoError(t, err)
		waitBound(t, c, ns, "nic-holder", 1)

		pg := rackGang("urgent", 4, sandbox.RackLabel)
		pg.Spec.PriorityClassName = "urgent"
		createPodGroup(t, c, ns, pg)
		for i := range 4 {
			p := draMember(fmt.Sprintf("urgent-%d", i), "urgent", "gpu", "")
			p.Spec.PriorityClassName = "urgent"
			_, err := c.Client.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{})
			require.NoError(t, err)
		}
		eventually(t, 90*time.Second, "4 members of urgent bound", func() (bool, error) { return countPrefix(boundPods(t, c, ns), "urgent-") == 4, nil })
		assert.Len(t, domainsOf(t, c, ns, "urgent-", sandbox.RackLabel), 1, "one rack")
		var whole []string
		left := 0
		for _, g := range []string{"tmpl-", "own-", "cd-", "dra-trainer-"} {
			n := len(podNames(t, c, ns, g))
			left += n
			if n == 4 {
				whole = append(whole, g)
			}
		}
		assert.Equal(t, 12, left, "exactly one rack's 4 device holders were evicted")
		assert.Len(t, whole, 3, "the victims are one gang's members")
		assert.Equal(t, []string{"nic-holder"}, podNames(t, c, ns, "nic-holder"), "the pod holding another class's device stays")
	})

	// A second driver whose devices carry an NVLink clique that cuts
	// across the racks: nodes n0 and n1 of every rack are in clique
	// nvl-a, n2 and n3 in nvl-b; 8 nodes and devices each.
	const xpu = "xpu.phalanx.dev"
	cliqueKey := "device.phalanx.dev/" + xpu + "/clique"
	cliqueOf := func(node string) string {
		if strings.HasSuffix(node, "-n0") || strings.HasSuffix(node, "-n1") {
			return "nvl-a"
		}
		return "nvl-b"
	}
	xpuMember := func(name, group string) *corev1.Pod {
		p := member{name: name, labels: inGroup(group), cpu: "1"}.pod()
		p.Spec.ResourceClaims = []corev1.PodResourceClaim{{Name: "xpu", ResourceClaimTemplateName: ptr.To("xpu")}}
		p.Spec.Containers[0].Resources.Claims = []corev1.ResourceClaim{{Name: "xpu"}}
		return p
	}
	cliqueGang := func(name string, size int32) *v1alpha1.PodGroup {
		return rackGang(name, size, cliqueKey)
	}
	xpuReady := sync.OnceFunc(func() {
		require.NoError(t, sandbox.PublishDevices(ctx, c.Client, nodeList, sandbox.Devices{Driver: xpu, PerNode: 1,
			Attributes: func(n *corev1.Node, _ int) map[resourceapi.QualifiedName]resourceapi.DeviceAttribute {
				return map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{"clique": {StringValue: ptr.To(cliqueOf(n.Name))}}
			}}))
		_, err := c.Client.ResourceV1().ResourceClaimTemplates(ns).Create(ctx, &resourceapi.ResourceClaimTemplate{
			ObjectMeta: metav1.ObjectMeta{Name: "xpu"},
			Spec: resourceapi.ResourceClaimTemplateSpec{Spec: resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{Requests: []resourceapi.DeviceRequest{{
				Name: "xpu", Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: xpu}}}}}},
		}, metav1.CreateOptions{})
		require.NoError(t, err)
	})

	t.Run("the API server refuses a device topology key without the attribute's domain, naming the field", func(t *testing.T) {
		_, err := c.Phalanx.SchedulingV1alpha1().PodGroups(ns).Create(ctx, rackGang("bad-key", 2, "device.phalanx.dev/clique"), metav1.CreateOptions{})
		require.Error(t, err)
		assert.Contains(t, err.Error(), "spec.schedulingConstraints.topology[0].key")
		assert.Contains(t, err.Error(), "device.phalanx.dev/<domain>/<attribute>")
	})

	t.Run("a gang that requires one NVLink clique, named by a device attribute, lands in one clique across racks", func(t *testing.T) {
		xpuReady()
		createPodGroup(t, c, ns, cliqueGang("clq", 5))
		for i := range 5 {
			_, err := c.Client.CoreV1().Pods(ns).Create(ctx, xpuMember(fmt.Sprintf("clq-%d", i), "clq"), metav1.CreateOptions{})
			require.NoError(t, err)
		}
		eventually(t, 60*time.Second, "5 members of clq bound", func() (bool, error) { return countPrefix(boundPods(t, c, ns), "clq-") == 5, nil })
		cliques := map[string]int{}
		for pod, node := range boundPods(t, c, ns) {
			if strings.HasPrefix(pod, "clq-") {
				cliques[cliqueOf(node)]++
			}
		}
		assert.Len(t, cliques, 1, "one clique: %v", cliques)
		assert.GreaterOrEqual(t, len(domainsOf(t, c, ns, "clq-", sandbox.RackLabel)), 2, "a rack holds 4 devices of the driver, so the clique's 5 members span racks")
		assert.Len(t, domainsOf(t, c, ns, "clq-", sandbox.HostnameLabel), 5, "one device per node")
	})

	t.Run("fit reads the claim template from the file and names the class, the count and the clique short; explain counts devices per clique", func(t *testing.T) {
		xpuReady()
		var b strings.Builder
		fmt.Fprintf(&b, `apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata: {name: xpu-file}
spec:
  spec:
    devices:
      requests: [{name: xpu, exactly: {deviceClassName: %s}}]
---
apiVersion: scheduling.phalanx.dev/v1alpha1
kind: PodGroup
metadata: {name: wide}
spec:
  schedulingPolicy: {gang: {minCount: %%d}}
  schedulingConstraints:
    topology: [{key: %s}]
`, xpu, cliqueKey)
		for i := range 9 {
			fmt.Fprintf(&b, `---
apiVersion: v1
kind: Pod
metadata: {name: wide-%d, labels: {scheduling.phalanx.dev/pod-group: wide}}
spec:
  schedulerName: phalanx-scheduler
  resourceClaims: [{name: xpu, resourceClaimTemplateName: xpu-file}]
  containers: [{name: main, image: registry.k8s.io/pause:3.10, resources: {claims: [{name: xpu}]}}]
`, i)
		}
		ask := func(minCount int, pods int) debugapi.FitAnswer {
			t.Helper()
			m := fmt.Sprintf(b.String(), minCount)
			// Keep the first pods only.
			parts := strings.Split(m, "---\n")
			file := filepath.Join(t.TempDir(), "wide.yaml")
			require.NoError(t, os.WriteFile(file, []byte(strings.Join(parts[:2+pods], "---\n")), 0o644))
			out, errOut, err := kubectlPhalanx(t, c, "", "fit", "-f", file, "-n", ns, "-o", "json")
			require.NoError(t, err, "fit: %s", errOut)
			var answer debugapi.FitAnswer
			require.NoError(t, json.Unmarshal([]byte(out), &answer), "%s", out)
			return answer
		}
		// nvl-a holds 3 free devices once clq took 5, nvl-b all 8.
		a := ask(8, 8)
		require.Equal(t, debugapi.VerdictFits, a.Verdict, a.Message)
		for _, node := range a.Assessment.Placement.Pods {
			assert.Equal(t, "nvl-b", cliqueOf(node), "the one clique with room for 8")
		}
		a = ask(9, 9)
		require.Equal(t, debugapi.VerdictDoesNotFit, a.Verdict, a.Message)
		assert.Contains(t, a.Message, "no "+cliqueKey+" domain fits 9 pods: best nvl-b fits 8 (short 1 device of class "+xpu+")")
		_, err := c.Client.ResourceV1().ResourceClaimTemplates(ns).Get(ctx, "xpu-file", metav1.GetOptions{})
		require.True(t, apierrors.IsNotFound(err), "fit creates nothing: %v", err)

		// The same gang created: explain shows the devices per clique.
		createPodGroup(t, c, ns, cliqueGang("wide", 9))
		for i := range 9 {
			_, err := c.Client.CoreV1().Pods(ns).Create(ctx, xpuMember(fmt.Sprintf("wide-%d", i), "wide"), metav1.CreateOptions{})
			require.NoError(t, err)
		}
		waitGroupCondition(t, c, ns, "wide", "Schedulable", "short 1 device of class "+xpu)
		e := explainJSON(t, c, "podgroup", "wide", "-n", ns).Items[0]
		require.NotNil(t, e.Assessment)
		assert.Equal(t, []debugapi.DomainDevices{
			{Key: cliqueKey, Domain: "nvl-a", Class: xpu, Free: 3, Total: 8},
			{Key: cliqueKey, Domain: "nvl-b", Class: xpu, Free: 8, Total: 8},
		}, e.Assessment.Devices)
		text, errOut, err := kubectlPhalanx(t, c, "", "explain", "podgroup", "wide", "-n", ns)
		require.NoError(t, err, errOut)
		assert.Contains(t, text, "DRA devices the plan counts, per domain:")
		assert.Regexp(t, `nvl-b\s+`+regexp.QuoteMeta(xpu)+`\s+8/8`, text)
		assert.Contains(t, text, "1 device of class "+xpu, "the SHORT column names the class")
		assert.Empty(t, countPrefix(boundPods(t, c, ns), "wide-"))
	})

	// Last: it restarts the scheduler.
	t.Run("a claim left allocated for a group deleted while no scheduler ran is freed by the next scheduler", func(t *testing.T) {
		const driver = "orphan.phalanx.dev"
		node := nodeList[0]
		require.NoError(t, sandbox.PublishDevices(ctx, c.Client, []*corev1.Node{node}, sandbox.Devices{Driver: driver, PerNode: 1}))
		claims := c.Client.ResourceV1().ResourceClaims(ns)
		// What a scheduler leaves behind when it allocated a shared claim
		// for a group and stopped before freeing it, the group deleted
		// meanwhile.
		claim, err := claims.Create(ctx, &resourceapi.ResourceClaim{
			ObjectMeta: metav1.ObjectMeta{Name: "orphan", Finalizers: []string{resourceapi.Finalizer},
				Annotations: map[string]string{v1alpha1.AllocatedForAnnotation: "PodGroup " + ns + "/deleted-while-down"}},
			Spec: resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{Requests: []resourceapi.DeviceRequest{{
				Name: "dev", Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: driver},
			}}}},
		}, metav1.CreateOptions{})
		require.NoError(t, err)
		claim.Status.Allocation = &resourceapi.AllocationResult{
			Devices: resourceapi.DeviceAllocationResult{Results: []resourceapi.DeviceRequestAllocationResult{{
				Request: "dev", Driver: driver, Pool: node.Name, Device: "dev-0",
			}}},
			NodeSelector: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchFields: []corev1.NodeSelectorRequirement{{
				Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{node.Name},
			}}}}},
			AllocationTimestamp: ptr.To(metav1.Now()),
		}
		_, err = claims.UpdateStatus(ctx, claim, metav1.UpdateOptions{})
		require.NoError(t, err)

		require.NoError(t, c.RestartScheduler(nil))
		// The sweep runs on the scheduler's first cycle.
		createPods(t, c, ns, member{name: "after-restart", cpu: "100m"})
		waitBound(t, c, ns, "after-restart", 1)
		eventually(t, 30*time.Second, "the orphaned claim freed", func() (bool, error) {
			got, err := claims.Get(ctx, "orphan", metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			return got.Status.Allocation == nil && got.Annotations[v1alpha1.AllocatedForAnnotation] == "" &&
				!slices.Contains(got.Finalizers, resourceapi.Finalizer), nil
		})
	})
}

func countPrefix(pods map[string]string, prefix string) int {
	n := 0
	for name := range pods {
		if strings.HasPrefix(name, prefix) {
			n++
		}
	}
	return n
}
