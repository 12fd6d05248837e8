package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/yaml"

	"github.com/phalanx-sched/phalanx/pkg/debugapi"
)

func object(t *testing.T, manifest string) *unstructured.Unstructured {
	t.Helper()
	u := &unstructured.Unstructured{}
	require.NoError(t, yaml.Unmarshal([]byte(manifest), &u.Object))
	if u.GetNamespace() == "" {
		u.SetNamespace("team")
	}
	return u
}

func names(objs []*unstructured.Unstructured) []string {
	var out []string
	for _, o := range objs {
		out = append(out, o.GetKind()+"/"+o.GetName())
	}
	return out
}

func TestExpandGangJobAsTheControllerWould(t *testing.T) {
	job := object(t, `
apiVersion: batch/v1
kind: Job
metadata:
  name: train
  annotations: {scheduling.phalanx.dev/gang: "true", scheduling.phalanx.dev/topology-key: topology.phalanx.dev/rack}
spec:
  parallelism: 4
  completions: 3
  template:
    spec:
      schedulerName: phalanx-scheduler
      schedulingGates: [{name: scheduling.phalanx.dev/gang}, {name: example.com/other}]
      restartPolicy: Never
      containers: [{name: main, image: pause, resources: {requests: {cpu: "2"}}}]
`)
	objs, err := expand(context.Background(), job)
	require.NoError(t, err)
	assert.Equal(t, []string{"PodGroup/train-workers", "Pod/train-0", "Pod/train-1", "Pod/train-2"}, names(objs), "min(parallelism, completions) pods and the Job's PodGroup")
	min, _, _ := unstructured.NestedInt64(objs[0].Object, "spec", "schedulingPolicy", "gang", "minCount")
	assert.Equal(t, int64(3), min)
	key, _, _ := unstructured.NestedSlice(objs[0].Object, "spec", "schedulingConstraints", "topology")
	assert.Equal(t, []interface{}{map[string]interface{}{"key": "topology.phalanx.dev/rack"}}, key)
	pod := objs[1]
	assert.Equal(t, "train-workers", pod.GetLabels()["scheduling.phalanx.dev/pod-group"], "labelled into the Job's group")
	gates, _, _ := unstructured.NestedSlice(pod.Object, "spec", "schedulingGates")
	assert.Equal(t, []interface{}{map[string]interface{}{"name": "example.com/other"}}, gates, "only the gang gate is lifted")
	assert.Equal(t, "team", pod.GetNamespace())

	job.SetAnnotations(nil)
	objs, err = expand(context.Background(), job)
	require.NoError(t, err)
	assert.Equal(t, []string{"Pod/train-0", "Pod/train-1", "Pod/train-2"}, names(objs), "a plain Job is its pods")

	job.SetAnnotations(map[string]string{"scheduling.phalanx.dev/gang": "true", "scheduling.phalanx.dev/min-count": "9"})
	_, err = expand(context.Background(), job)
	assert.ErrorContains(t, err, "must not exceed the 3 pods the Job runs at once", "the controller's refusal")
}

func TestExpandTemplatesAndWorkloads(t *testing.T) {
	objs, err := expand(context.Background(), object(t, `
apiVersion: apps/v1
kind: StatefulSet
metadata: {name: db}
spec:
  replicas: 2
  template:
    metadata: {labels: {scheduling.phalanx.dev/pod-group: db}}
    spec: {containers: [{name: main, image: pause}]}
`))
	require.NoError(t, err)
	assert.Equal(t, []string{"Pod/db-0", "Pod/db-1"}, names(objs))
	assert.Equal(t, "db", objs[1].GetLabels()["scheduling.phalanx.dev/pod-group"])

	objs, err = expand(context.Background(), object(t, `
apiVersion: scheduling.phalanx.dev/v1alpha1
kind: Workload
metadata: {name: exp}
spec:
  compositePodGroupTemplates:
  - name: root
    schedulingPolicy: {gang: {minGroupCount: 2}}
    podGroupTemplates:
    - {name: a, schedulingPolicy: {gang: {minCount: 4}}}
    - {name: b, schedulingPolicy: {gang: {minCount: 2}}}
`))
	require.NoError(t, err)
	assert.Equal(t, []string{"CompositePodGroup/exp-root", "PodGroup/exp-a", "PodGroup/exp-b"}, names(objs), "the groups phalanx-controller makes, parents first")
	parent, _, _ := unstructured.NestedString(objs[1].Object, "spec", "parentCompositePodGroupName")
	assert.Equal(t, "exp-root", parent)

	for _, kind := range []string{"PodGroup", "CompositePodGroup"} {
		objs, err = expand(context.Background(), object(t, "apiVersion: scheduling.k8s.io/v1beta1\nkind: "+kind+"\nmetadata: {name: x}\n"))
		require.NoError(t, err)
		assert.Len(t, objs, 1, "upstream's %s is read as is", kind)
	}
	_, err = expand(context.Background(), object(t, "apiVersion: v1\nkind: Service\nmetadata: {name: s}\n"))
	assert.ErrorContains(t, err, "not Service")
}

func TestSchedulerFoundThroughTheKubeconfigExtension(t *testing.T) {
	path := filepath.Join(t.TempDir(), "kubeconfig")
	kc := clientcmdapi.NewConfig()
	raw, err := json.Marshal(debugapi.Endpoint{Server: "https://127.0.0.1:10260", CertificateAuthorityData: []byte("PEM")})
	require.NoError(t, err)
	kc.Clusters["c"] = &clientcmdapi.Cluster{Server: "https://127.0.0.1:6443", Extensions: map[string]runtime.Object{
		debugapi.KubeconfigExtension: &runtime.Unknown{Raw: raw, ContentType: runtime.ContentTypeJSON},
	}}
	kc.Clusters["other"] = &clientcmdapi.Cluster{Server: "https://10.0.0.1:6443"}
	kc.AuthInfos["u"] = &clientcmdapi.AuthInfo{Token: "t"}
	kc.Contexts["with"] = &clientcmdapi.Context{Cluster: "c", AuthInfo: "u"}
	kc.Contexts["without"] = &clientcmdapi.Context{Cluster: "other", AuthInfo: "u"}
	kc.CurrentContext = "with"
	require.NoError(t, clientcmd.WriteToFile(*kc, path))

	o := &Options{Config: genericclioptions.NewConfigFlags(false)}
	o.Config.KubeConfig = &path
	ep, err := o.fromKubeconfig()
	require.NoError(t, err)
	require.NotNil(t, ep)
	assert.Equal(t, "https://127.0.0.1:10260", ep.Server)
	assert.Equal(t, []byte("PEM"), ep.CertificateAuthorityData)

	other := "without"
	o.Config.Context = &other
	ep, err = o.fromKubeconfig()
	require.NoError(t, err)
	assert.Nil(t, ep, "a cluster without the extension says nothing")
}

func TestAnswerErrorsSayWhatToAskFor(t *testing.T) {
	status, _ := json.Marshal(metav1.Status{Message: `forbidden: User "alice" cannot get path "/debug/phalanx/top"`})
	err := answerError(http.StatusForbidden, debugapi.TopPath, status)
	assert.EqualError(t, err, `the scheduler refused /debug/phalanx/top: forbidden: User "alice" cannot get path "/debug/phalanx/top" (ask for the ClusterRole phalanx-diagnostics)`)
	status, _ = json.Marshal(metav1.Status{Message: `forbidden: User "alice" cannot post path "/debug/phalanx/fit"`})
	assert.EqualError(t, answerError(http.StatusForbidden, debugapi.FitPath, status),
		`the scheduler refused /debug/phalanx/fit: forbidden: User "alice" cannot post path "/debug/phalanx/fit" (ask for the ClusterRole phalanx-diagnostics-fit)`)
	body, _ := json.Marshal(debugapi.Error{Message: "pod t/x not found"})
	assert.EqualError(t, answerError(http.StatusNotFound, debugapi.ExplainPath, body), "pod t/x not found")
	assert.ErrorContains(t, answerError(http.StatusUnauthorized, debugapi.TopPath, []byte("Unauthorized")), "did not accept your credentials")
}

func TestPrintExplanationShowsDomainsAndVictims(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	since := metav1.NewTime(now.Add(-90 * time.Second))
	l := &debugapi.ExplanationList{Answer: debugapi.Answer{Scheduler: "s", Time: metav1.NewTime(now), Nodes: 6}, Target: "PodGroup t/g",
		Items: []debugapi.Explanation{{
			Root:  debugapi.GroupRef{Kind: "PodGroup", APIGroup: "scheduling.phalanx.dev", Namespace: "t", Name: "g"},
			Stage: debugapi.StageInfeasible, Message: "no rack fits", Since: &since,
			Groups: []debugapi.GroupState{{GroupRef: debugapi.GroupRef{Kind: "PodGroup", Namespace: "t", Name: "g"}, Policy: "Gang", Min: 4, Present: 4}},
			Assessment: &debugapi.Assessment{
				Infeasible: &debugapi.Infeasible{Group: "PodGroup t/g", TopologyKey: "rack", Domains: []debugapi.DomainFit{{Domain: "r1", Fits: 3, Need: 4, Short: map[string]string{"cpu": "2", "memory": "1Gi"}}}},
				Preemption: &debugapi.Preemption{Possible: true, Priority: 100, Victims: []debugapi.Victim{{Pod: "t/low-0", Node: "n1", Priority: 10, ViolatesPDB: true}},
					Placement: &debugapi.Placement{Pods: map[string]string{"t/g-0": "n1"}, Domains: map[string]string{"PodGroup t/g": "rack=r1"}}},
			},
		}}}
	var b bytes.Buffer
	printExplanations(&b, l, now)
	out := b.String()
	for _, want := range []string{
		`PodGroup t/g: answered by scheduler "s"`,
		"Stage:  Infeasible, for 90s",
		"r1       3/4    2 cpu, 1Gi memory",
		"Preemption: evicting 1 pods of priority below 100 makes it fit (1 pods on 1 nodes in rack=r1)",
		"t/low-0",
	} {
		assert.Contains(t, out, want)
	}
	assert.True(t, strings.Contains(out, "yes"), "a victim that breaks a PDB says so")
}
