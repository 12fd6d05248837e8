package integration

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"helm.sh/helm/v4/pkg/chart/common"
	chartutil "helm.sh/helm/v4/pkg/chart/common/util"
	"helm.sh/helm/v4/pkg/chart/v2/lint"
	"helm.sh/helm/v4/pkg/chart/v2/lint/support"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	"helm.sh/helm/v4/pkg/engine"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	"github.com/phalanx-sched/phalanx/tools/sandbox"
)

// The Helm chart (charts/phalanx) is rendered with Helm's own engine, as
// `helm template` / `helm install` render it, and checked against the
// kustomize overlays it stands for.

const chartDir = repoRoot + "/charts/phalanx"

// chartKubeVersion is the cluster version the chart is rendered for: the
// Kubernetes libraries Phalanx is built with. Helm's default under `go
// test` is 1.20, older than the chart's kubeVersion allows.
var chartKubeVersion = func() *common.KubeVersion {
	kv, err := common.ParseKubeVersion("v1.37.2")
	if err != nil {
		panic(err)
	}
	return kv
}()

// renderChart renders the chart into namespace phalanx-system with values
// over its values.yaml, CRDs (crds/) first as Helm installs them.
func renderChart(t *testing.T, values map[string]any) ([]*unstructured.Unstructured, error) {
	t.Helper()
	ch, err := loader.Load(chartDir)
	require.NoError(t, err, "load the chart")
	caps := common.DefaultCapabilities.Copy()
	caps.KubeVersion = *chartKubeVersion
	vals, err := chartutil.ToRenderValues(ch, values, common.ReleaseOptions{Name: "phalanx", Namespace: systemNamespace, Revision: 1, IsInstall: true}, caps)
	if err != nil {
		return nil, err
	}
	rendered, err := engine.Render(ch, vals)
	if err != nil {
		return nil, err
	}
	var docs []string
	for _, crd := range ch.CRDObjects() {
		docs = append(docs, string(crd.File.Data))
	}
	var names []string
	for name := range rendered {
		if strings.HasSuffix(name, ".yaml") {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	for _, name := range names {
		docs = append(docs, rendered[name])
	}
	var objs []*unstructured.Unstructured
	for _, doc := range docs {
		decoder := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader([]byte(doc)), 4096)
		for {
			obj := &unstructured.Unstructured{}
			err := decoder.Decode(&obj.Object)
			if errors.Is(err, io.EOF) {
				break
			}
			require.NoError(t, err, "decode the chart's output:\n%s", doc)
			if len(obj.Object) > 0 {
				objs = append(objs, obj)
			}
		}
	}
	return objs, nil
}

func objectKey(o *unstructured.Unstructured) string {
	return o.GetKind() + " " + o.GetNamespace() + "/" + o.GetName()
}

// schedulerConfigOf reads the KubeSchedulerConfiguration out of the
// rendered ConfigMap, parsed, so that comments and layout do not count.
func schedulerConfigOf(t *testing.T, objs []*unstructured.Unstructured) map[string]any {
	t.Helper()
	var cfg map[string]any
	require.NoError(t, yaml.Unmarshal(renderedSchedulerConfig(t, objs), &cfg))
	return cfg
}

// TestHelmChart lints the chart with Helm's linter (`helm lint --strict`),
// renders it with its defaults in both modes and compares every object
// with the kustomize overlay of the mode, has the API server accept all
// of them, and checks what values change.
func TestHelmChart(t *testing.T) {
	t.Run("helm lint finds nothing", func(t *testing.T) {
		for _, values := range []map[string]any{nil, {"mode": "replace-default"}} {
			linter := lint.RunAll(chartDir, values, systemNamespace, lint.WithKubeVersion(chartKubeVersion))
			for _, m := range linter.Messages {
				assert.Less(t, m.Severity, support.WarningSev, "helm lint with %v: %s", values, m)
			}
		}
	})

	c := startCluster(t, sandbox.Options{})
	ctx := context.Background()
	applier := newObjectApplier(t, c.Config)
	ns := findObject(renderKustomization(t, "manifests/base"), "Namespace", "", systemNamespace)
	require.NotNil(t, ns)
	require.NoError(t, applier.apply(ctx, ns), "helm install --create-namespace creates the namespace")
	acceptAll := func(t *testing.T, objs []*unstructured.Unstructured) {
		for _, o := range objs {
			assert.NoError(t, applier.dryRun(ctx, o))
		}
	}

	for _, mode := range []string{"second-scheduler", "replace-default"} {
		t.Run(mode+" renders what the kustomize overlay installs", func(t *testing.T) {
			objs, err := renderChart(t, map[string]any{"mode": mode})
			require.NoError(t, err)
			want := map[string]*unstructured.Unstructured{}
			for _, o := range renderKustomization(t, "manifests/overlays/"+mode) {
				// A chart installs into its release namespace, which
				// Helm creates (--create-namespace); it does not own it.
				if o.GetKind() != "Namespace" {
					want[objectKey(o)] = o
				}
			}
			got := map[string]*unstructured.Unstructured{}
			for _, o := range objs {
				require.NotContains(t, got, objectKey(o), "the chart renders %s twice", objectKey(o))
				got[objectKey(o)] = o
			}
			var wantKeys, gotKeys []string
			for k := range want {
				wantKeys = append(wantKeys, k)
			}
			for k := range got {
				gotKeys = append(gotKeys, k)
			}
			require.ElementsMatch(t, wantKeys, gotKeys, "the chart and the overlay install the same objects")
			for k, w := range want {
				if k == "ConfigMap "+systemNamespace+"/phalanx-scheduler-config" {
					assert.Equal(t, schedulerConfigOf(t, []*unstructured.Unstructured{w}), schedulerConfigOf(t, objs),
						"the chart's scheduler configuration is the overlay's config/%s.yaml", mode)
					continue
				}
				assert.Equal(t, w.Object, got[k].Object, "%s differs between the chart and the overlay", k)
			}
			acceptAll(t, objs)
		})
	}

	t.Run("values set the image, replicas, flags, reservation and optional roles", func(t *testing.T) {
		objs, err := renderChart(t, map[string]any{
			"mode":  "replace-default",
			"image": map[string]any{"repository": "registry.example.com/phalanx", "tag": "v0.1.0"},
			"scheduler": map[string]any{
				"replicas":     3,
				"reservation":  map[string]any{"afterSeconds": 120, "maxSharePercent": 30},
				"featureGates": map[string]any{"DRAPartitionableDevices": true, "DRADeviceTaints": false},
				"extraArgs":    []any{"--bind-drain-timeout=60s"},
			},
			"controller": map[string]any{
				"provisioningSchedulers": []any{"phalanx-scheduler", "gpu-scheduler"},
				"extraArgs":              []any{"--provisioning-after=30s"},
			},
			"tenantRBAC": false,
		})
		require.NoError(t, err)
		for _, name := range []string{"phalanx-scheduler", "phalanx-controller"} {
			d := findObject(objs, "Deployment", systemNamespace, name)
			require.NotNil(t, d)
			containers, _, _ := unstructured.NestedSlice(d.Object, "spec", "template", "spec", "containers")
			image, _, _ := unstructured.NestedString(containers[0].(map[string]any), "image")
			assert.Equal(t, "registry.example.com/phalanx:v0.1.0", image, name)
		}
		d := findObject(objs, "Deployment", systemNamespace, "phalanx-scheduler")
		replicas, _, _ := unstructured.NestedFieldNoCopy(d.Object, "spec", "replicas")
		assert.EqualValues(t, 3, replicas)
		containers, _, _ := unstructured.NestedSlice(d.Object, "spec", "template", "spec", "containers")
		args, _, _ := unstructured.NestedStringSlice(containers[0].(map[string]any), "args")
		assert.Equal(t, []string{"--config=/etc/phalanx/config.yaml", "--feature-gates=DRADeviceTaints=false,DRAPartitionableDevices=true", "--bind-drain-timeout=60s"}, args)
		ctrl := findObject(objs, "Deployment", systemNamespace, "phalanx-controller")
		containers, _, _ = unstructured.NestedSlice(ctrl.Object, "spec", "template", "spec", "containers")
		args, _, _ = unstructured.NestedStringSlice(containers[0].(map[string]any), "args")
		assert.Equal(t, []string{"--provisioning-schedulers=phalanx-scheduler,gpu-scheduler", "--provisioning-after=30s"}, args[len(args)-2:])
		assert.Nil(t, findObject(objs, "ClusterRole", "", "phalanx-edit"), "tenantRBAC: false leaves the tenant roles out")
		assert.NotNil(t, findObject(objs, "ClusterRole", "", "phalanx-diagnostics"))

		// The configuration is one phalanx-scheduler accepts, with the
		// reservation of the values and the Lease of replace-default.
		path := filepath.Join(t.TempDir(), "config.yaml")
		require.NoError(t, os.WriteFile(path, renderedSchedulerConfig(t, objs), 0o644))
		_, err = sandbox.LoadSchedulerConfig(path)
		require.NoError(t, err)
		cfg := schedulerConfigOf(t, objs)
		assert.Equal(t, "kube-scheduler", cfg["leaderElection"].(map[string]any)["resourceName"])
		profile := cfg["profiles"].([]any)[0].(map[string]any)
		assert.Equal(t, "default-scheduler", profile["schedulerName"])
		topologyArgs := profile["pluginConfig"].([]any)[1].(map[string]any)["args"].(map[string]any)
		assert.Equal(t, map[string]any{"afterSeconds": float64(120), "maxSharePercent": float64(30)}, topologyArgs["reservation"])
		assert.NotNil(t, findObject(objs, "Role", "kube-system", "phalanx-scheduler-leader-election"), "replace-default grants upstream's Lease")
		acceptAll(t, objs)
	})

	t.Run("a whole configuration from values replaces the generated one", func(t *testing.T) {
		objs, err := renderChart(t, map[string]any{"scheduler": map[string]any{"config": string(reservationConfig(t, 25))}})
		require.NoError(t, err)
		assert.Equal(t, string(reservationConfig(t, 25)), strings.TrimSuffix(string(renderedSchedulerConfig(t, objs)), "\n")+"\n")
	})

	t.Run("an unknown mode is refused", func(t *testing.T) {
		_, err := renderChart(t, map[string]any{"mode": "beside"})
		require.Error(t, err)
		assert.Contains(t, err.Error(), `mode must be second-scheduler or replace-default, not "beside"`)
	})
}
