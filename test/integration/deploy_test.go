package integration

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	restclient "k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"k8s.io/klog/v2"
	"k8s.io/kubernetes/cmd/kube-scheduler/app/options"
	"k8s.io/kubernetes/pkg/controller/job"
	schedconfig "k8s.io/kubernetes/pkg/scheduler/apis/config"
	schedvalidation "k8s.io/kubernetes/pkg/scheduler/apis/config/validation"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"

	v1alpha1 "github.com/phalanx-sched/phalanx/apis/scheduling/v1alpha1"
	"github.com/phalanx-sched/phalanx/config"
	"github.com/phalanx-sched/phalanx/pkg/controller"
	"github.com/phalanx-sched/phalanx/pkg/generated/clientset/versioned"
	"github.com/phalanx-sched/phalanx/pkg/plugins/gang"
	"github.com/phalanx-sched/phalanx/pkg/plugins/podaffinity"
	"github.com/phalanx-sched/phalanx/pkg/plugins/preemption"
	"github.com/phalanx-sched/phalanx/pkg/plugins/topology"
	"github.com/phalanx-sched/phalanx/pkg/provisioning"
	"github.com/phalanx-sched/phalanx/pkg/provisioning/autoscalingv1"
	"github.com/phalanx-sched/phalanx/tools/sandbox"
)

// The deployment tests check what a cluster operator installs: the
// kustomizations under manifests/, the profiles under config/, the RBAC
// they grant, and the binaries run as separate processes with that RBAC.

const (
	repoRoot        = "../.."
	systemNamespace = "phalanx-system"
	schedulerSA     = "phalanx-scheduler"
	controllerSA    = "phalanx-controller"
	schedulerLease  = "phalanx-scheduler"
	controllerLease = "phalanx-controller"
	// kube-scheduler names its leader elector so, whatever the Lease.
	leaderMetric = `leader_election_master_status`
)

// kustomizations are every kustomize root an operator may apply, with the
// config/ file whose bytes the overlay's ConfigMap must carry.
var kustomizations = []struct {
	dir, configFile string
}{
	{dir: "manifests/base"},
	{dir: "manifests/overlays/second-scheduler", configFile: "config/second-scheduler.yaml"},
	{dir: "manifests/overlays/replace-default", configFile: "config/replace-default.yaml"},
}

// renderKustomization builds dir as `kubectl apply -k` would.
func renderKustomization(t *testing.T, dir string) []*unstructured.Unstructured {
	t.Helper()
	resources, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), filepath.Join(repoRoot, dir))
	require.NoError(t, err, "kustomize build %s", dir)
	data, err := resources.AsYaml()
	require.NoError(t, err)
	var objs []*unstructured.Unstructured
	decoder := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	for {
		obj := &unstructured.Unstructured{}
		err := decoder.Decode(&obj.Object)
		if errors.Is(err, io.EOF) {
			break
		}
		require.NoError(t, err, "decode the output of kustomize build %s", dir)
		if len(obj.Object) > 0 {
			objs = append(objs, obj)
		}
	}
	require.NotEmpty(t, objs, "kustomize build %s renders objects", dir)
	return objs
}

func findObject(objs []*unstructured.Unstructured, kind, namespace, name string) *unstructured.Unstructured {
	for _, o := range objs {
		if o.GetKind() == kind && o.GetNamespace() == namespace && o.GetName() == name {
			return o
		}
	}
	return nil
}

// objectApplier creates rendered objects through the dynamic client.
type objectApplier struct {
	dyn    dynamic.Interface
	mapper meta.RESTMapper
}

func newObjectApplier(t *testing.T, cfg *restclient.Config) *objectApplier {
	t.Helper()
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	require.NoError(t, err)
	dyn, err := dynamic.NewForConfig(cfg)
	require.NoError(t, err)
	return &objectApplier{dyn: dyn, mapper: restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(dc))}
}

func (a *objectApplier) resource(obj *unstructured.Unstructured) (dynamic.ResourceInterface, error) {
	gvk := obj.GroupVersionKind()
	mapping, err := a.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return nil, fmt.Errorf("map %s: %w", gvk, err)
	}
	if mapping.Scope.Name() != meta.RESTScopeNameNamespace {
		if obj.GetNamespace() != "" {
			return nil, fmt.Errorf("%s %s is cluster-scoped but names namespace %q", gvk.Kind, obj.GetName(), obj.GetNamespace())
		}
		return a.dyn.Resource(mapping.Resource), nil
	}
	if obj.GetNamespace() == "" {
		return nil, fmt.Errorf("%s %s is namespaced but names no namespace", gvk.Kind, obj.GetName())
	}
	return a.dyn.Resource(mapping.Resource).Namespace(obj.GetNamespace()), nil
}

// dryRun asks the API server to create obj without persisting it, with
// strict field validation; an object that already exists (the sandbox's
// CRDs) is server-side applied in dry-run mode instead, as
// `kubectl apply --server-side --dry-run=server` would.
func (a *objectApplier) dryRun(ctx context.Context, obj *unstructured.Unstructured) error {
	ri, err := a.resource(obj)
	if err != nil {
		return err
	}
	_, err = ri.Create(ctx, obj, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}, FieldValidation: metav1.FieldValidationStrict})
	if apierrors.IsAlreadyExists(err) {
		_, err = ri.Apply(ctx, obj.GetName(), obj, metav1.ApplyOptions{DryRun: []string{metav1.DryRunAll}, FieldManager: "phalanx-deploy-test", Force: true})
	}
	if err != nil {
		return fmt.Errorf("%s %s/%s: %w", obj.GetKind(), obj.GetNamespace(), obj.GetName(), err)
	}
	return nil
}

// apply server-side applies obj for real.
func (a *objectApplier) apply(ctx context.Context, obj *unstructured.Unstructured) error {
	ri, err := a.resource(obj)
	if err != nil {
		return err
	}
	if _, err := ri.Apply(ctx, obj.GetName(), obj, metav1.ApplyOptions{FieldManager: "phalanx-deploy-test", Force: true}); err != nil {
		return fmt.Errorf("apply %s %s/%s: %w", obj.GetKind(), obj.GetNamespace(), obj.GetName(), err)
	}
	return nil
}

// crdNames reads the names of the CRDs in manifests/crds.
func crdNames(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(repoRoot, "manifests/crds/*.yaml"))
	require.NoError(t, err)
	require.NotEmpty(t, files)
	var names []string
	for _, f := range files {
		data, err := os.ReadFile(f)
		require.NoError(t, err)
		var crd struct {
			Metadata struct{ Name string } `json:"metadata"`
		}
		require.NoError(t, yaml.Unmarshal(data, &crd), f)
		names = append(names, crd.Metadata.Name)
	}
	return names
}

// TestDeployManifestsRenderAndApply renders every kustomization with the
// kustomize library and has the API server accept every object in
// dry-run mode. The overlays carry their config/ profile byte for byte,
// and every reference between the objects resolves.
func TestDeployManifestsRenderAndApply(t *testing.T) {
	c := startCluster(t, sandbox.Options{})
	ctx := context.Background()
	applier := newObjectApplier(t, c.Config)
	wantCRDs := crdNames(t)

	for _, k := range kustomizations {
		t.Run(k.dir+" renders and every object is accepted by the API server", func(t *testing.T) {
			objs := renderKustomization(t, k.dir)

			var gotCRDs []string
			for _, o := range objs {
				if o.GetKind() == "CustomResourceDefinition" {
					gotCRDs = append(gotCRDs, o.GetName())
				}
			}
			assert.ElementsMatch(t, wantCRDs, gotCRDs, "the kustomization installs every CRD of manifests/crds (see manifests/crds/Kustomization)")

			// The namespace must exist before anything is created in it.
			ns := findObject(objs, "Namespace", "", systemNamespace)
			require.NotNil(t, ns, "the kustomization creates namespace %s", systemNamespace)
			require.NoError(t, applier.apply(ctx, ns))
			for _, o := range objs {
				assert.NoError(t, applier.dryRun(ctx, o))
			}

			for _, o := range objs {
				if o.GetKind() != "ClusterRoleBinding" && o.GetKind() != "RoleBinding" {
					continue
				}
				kind, _, _ := unstructured.NestedString(o.Object, "roleRef", "kind")
				name, _, _ := unstructured.NestedString(o.Object, "roleRef", "name")
				var err error
				switch {
				case kind == "ClusterRole" && findObject(objs, kind, "", name) == nil:
					_, err = c.Client.RbacV1().ClusterRoles().Get(ctx, name, metav1.GetOptions{})
				case kind == "Role" && findObject(objs, kind, o.GetNamespace(), name) == nil:
					_, err = c.Client.RbacV1().Roles(o.GetNamespace()).Get(ctx, name, metav1.GetOptions{})
				}
				assert.NoError(t, err, "%s %s refers to %s %s", o.GetKind(), o.GetName(), kind, name)
			}

			if k.configFile == "" {
				return
			}
			want, err := os.ReadFile(filepath.Join(repoRoot, k.configFile))
			require.NoError(t, err)
			cm := findObject(objs, "ConfigMap", systemNamespace, "phalanx-scheduler-config")
			require.NotNil(t, cm, "the overlay provides the scheduler configuration")
			got, _, _ := unstructured.NestedString(cm.Object, "data", "config.yaml")
			assert.Equal(t, string(want), got, "the ConfigMap of %s must be %s byte for byte: replace its block with the output of: sed 's/^/    /' %s", k.dir, k.configFile, k.configFile)

			for _, name := range []string{"phalanx-scheduler", "phalanx-controller"} {
				d := findObject(objs, "Deployment", systemNamespace, name)
				require.NotNil(t, d, "Deployment %s", name)
				sa, _, _ := unstructured.NestedString(d.Object, "spec", "template", "spec", "serviceAccountName")
				assert.NotNil(t, findObject(objs, "ServiceAccount", systemNamespace, sa), "Deployment %s runs as ServiceAccount %q, which the kustomization creates", name, sa)
				volumes, _, _ := unstructured.NestedSlice(d.Object, "spec", "template", "spec", "volumes")
				for _, v := range volumes {
					ref, found, _ := unstructured.NestedString(v.(map[string]interface{}), "configMap", "name")
					if found {
						assert.NotNil(t, findObject(objs, "ConfigMap", systemNamespace, ref), "Deployment %s mounts ConfigMap %q, which the kustomization creates", name, ref)
					}
				}
			}
			containers, _, _ := unstructured.NestedSlice(findObject(objs, "Deployment", systemNamespace, "phalanx-scheduler").Object, "spec", "template", "spec", "containers")
			require.Len(t, containers, 1)
			args, _, _ := unstructured.NestedStringSlice(containers[0].(map[string]interface{}), "args")
			assert.Contains(t, args, "--config=/etc/phalanx/config.yaml", "the scheduler reads the ConfigMap's config.yaml")
		})
	}
}

// enabledPlugins lists the plugins a profile enables at any extension point.
func enabledPlugins(p *schedconfig.Plugins) map[string]bool {
	out := map[string]bool{}
	v := reflect.ValueOf(p).Elem()
	for i := 0; i < v.NumField(); i++ {
		set, ok := v.Field(i).Interface().(schedconfig.PluginSet)
		if !ok {
			continue
		}
		for _, pl := range set.Enabled {
			out[pl.Name] = true
		}
	}
	return out
}

// schedulerConfigFile writes a KubeSchedulerConfiguration made from base
// with the given top-level fields replaced, and returns its path.
func schedulerConfigFile(t *testing.T, base []byte, mutate func(cfg map[string]interface{})) string {
	t.Helper()
	var cfg map[string]interface{}
	require.NoError(t, yaml.Unmarshal(base, &cfg))
	mutate(cfg)
	out, err := yaml.Marshal(cfg)
	require.NoError(t, err)
	f, err := os.CreateTemp(t.TempDir(), "scheduler-*.yaml")
	require.NoError(t, err)
	_, err = f.Write(out)
	require.NoError(t, err)
	require.NoError(t, f.Close())
	return f.Name()
}

// setPluginArg sets one argument of a plugin in every profile of cfg.
func setPluginArg(t *testing.T, cfg map[string]interface{}, plugin, arg string, value interface{}) {
	t.Helper()
	set := false
	profiles, _ := cfg["profiles"].([]interface{})
	for _, p := range profiles {
		pcs, _ := p.(map[string]interface{})["pluginConfig"].([]interface{})
		for _, pc := range pcs {
			pc := pc.(map[string]interface{})
			if pc["name"] == plugin {
				pc["args"].(map[string]interface{})[arg] = value
				set = true
			}
		}
	}
	require.True(t, set, "the configuration has args for %s", plugin)
}

// startInProcessScheduler runs the scheduler of configPath in this process
// until the test ends. An informer the scheduler's identity may not list
// would keep it from syncing: that fails the test after a deadline.
func startInProcessScheduler(t *testing.T, configPath string) *sandbox.Scheduler {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	type started struct {
		s   *sandbox.Scheduler
		err error
	}
	ch := make(chan started, 1)
	go func() {
		s, err := sandbox.StartScheduler(ctx, configPath)
		ch <- started{s, err}
	}()
	select {
	case st := <-ch:
		require.NoError(t, st.err)
		t.Cleanup(func() {
			st.s.Stop()
			cancel()
		})
		return st.s
	case <-time.After(2 * time.Minute):
		cancel()
		t.Fatalf("the scheduler of %s did not sync its informers within 2m: is a list/watch permission missing?", configPath)
		return nil
	}
}

// scheduleGang creates a PodGroup of n one-cpu members for schedulerName
// and waits until all of them are bound.
func scheduleGang(t *testing.T, c *sandbox.Cluster, ns, name, schedulerName string, n int) {
	t.Helper()
	createPodGroup(t, c, ns, gangPG(name, int32(n)))
	for i := 0; i < n; i++ {
		p := member{name: fmt.Sprintf("%s-%d", name, i), labels: inGroup(name), cpu: "1"}.pod()
		p.Spec.SchedulerName = schedulerName
		_, err := c.Client.CoreV1().Pods(ns).Create(context.Background(), p, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	eventually(t, 60*time.Second, fmt.Sprintf("all %d members of gang %s bound by %s", n, name, schedulerName), func() (bool, error) {
		return boundWithPrefix(t, c, ns, name+"-") == n, nil
	})
}

// TestConfigProfilesLoadValidateAndSchedule loads every profile of config/
// with kube-scheduler's own loader and validation, decodes the Phalanx
// plugin args with the plugins' decoders, checks what each profile is for,
// and then runs each one in a scheduler that binds a gang.
func TestConfigProfilesLoadValidateAndSchedule(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(repoRoot, "config/*.yaml"))
	require.NoError(t, err)
	embedded := map[string][]byte{
		"second-scheduler.yaml": config.SecondScheduler,
		"replace-default.yaml":  config.ReplaceDefault,
		"gang-only.yaml":        config.GangOnly,
	}
	var names []string
	for _, f := range files {
		names = append(names, filepath.Base(f))
	}
	require.ElementsMatch(t, []string{"second-scheduler.yaml", "replace-default.yaml", "gang-only.yaml"}, names,
		"every profile in config/ is embedded by config/embed.go and covered here")

	loaded := map[string]*schedconfig.KubeSchedulerConfiguration{}
	for _, f := range files {
		name := filepath.Base(f)
		t.Run(name+" loads, validates and decodes its plugin args", func(t *testing.T) {
			data, err := os.ReadFile(f)
			require.NoError(t, err)
			assert.Equal(t, string(data), string(embedded[name]), "config.%s embeds the file", name)

			cfg, err := options.LoadConfigFromFile(klog.Background(), f)
			require.NoError(t, err)
			require.NoError(t, schedvalidation.ValidateKubeSchedulerConfiguration(cfg))
			require.NotEmpty(t, cfg.Profiles)
			for _, prof := range cfg.Profiles {
				for _, pc := range prof.PluginConfig {
					// pkg/plugins' TestShippedProfilesArgsValidate checks
					// these files' args through plugins.ValidateArgs,
					// which knows these plugins' args.
					if strings.HasPrefix(pc.Name, "Phalanx") {
						assert.Contains(t, []string{gang.Name, topology.Name, preemption.Name, podaffinity.Name}, pc.Name, "args for %s are checked by no test: teach plugins.ValidateArgs its args", pc.Name)
					}
				}
			}
			loaded[name] = cfg
		})
	}
	require.Len(t, loaded, len(files), "every profile loaded")

	t.Run("replace-default serves default-scheduler with exactly the plugins of second-scheduler", func(t *testing.T) {
		second, replace := loaded["second-scheduler.yaml"].Profiles, loaded["replace-default.yaml"].Profiles
		require.Len(t, second, 1)
		require.Len(t, replace, 1)
		assert.Equal(t, "phalanx-scheduler", second[0].SchedulerName)
		assert.Equal(t, corev1.DefaultSchedulerName, replace[0].SchedulerName)
		assert.Equal(t, second[0].Plugins, replace[0].Plugins)
		assert.Equal(t, second[0].PluginConfig, replace[0].PluginConfig)
		le := loaded["replace-default.yaml"].LeaderElection
		assert.Equal(t, "kube-scheduler", le.ResourceName, "replace-default shares upstream kube-scheduler's Lease")
		assert.Equal(t, metav1.NamespaceSystem, le.ResourceNamespace)
	})

	t.Run("gang-only runs the queue sort and the gang plugin without topology", func(t *testing.T) {
		profiles := loaded["gang-only.yaml"].Profiles
		require.Len(t, profiles, 1)
		enabled := enabledPlugins(profiles[0].Plugins)
		assert.True(t, enabled["PhalanxQueueSort"])
		assert.True(t, enabled[gang.Name])
		assert.False(t, enabled[topology.Name])
		// PhalanxInterPodAffinity is InterPodAffinity under another name.
		for name := range enabled {
			if strings.HasPrefix(name, "Phalanx") {
				assert.Contains(t, []string{"PhalanxQueueSort", gang.Name, podaffinity.Name}, name)
			}
		}
		assert.Equal(t, []schedconfig.Plugin{{Name: "PhalanxQueueSort"}}, profiles[0].Plugins.QueueSort.Enabled)
	})

	c := startCluster(t, sandbox.Options{NodeAgent: true})
	addNodes(t, c, "n", 4, "4", 0)
	for _, tc := range []struct {
		file          string
		data          []byte
		schedulerName string
	}{
		{"second-scheduler.yaml", config.SecondScheduler, "phalanx-scheduler"},
		{"replace-default.yaml", config.ReplaceDefault, corev1.DefaultSchedulerName},
		{"gang-only.yaml", config.GangOnly, "phalanx-scheduler"},
	} {
		t.Run(tc.file+" binds a gang of pods naming "+tc.schedulerName, func(t *testing.T) {
			path := schedulerConfigFile(t, tc.data, func(cfg map[string]interface{}) {
				cfg["clientConnection"] = map[string]interface{}{"kubeconfig": c.KubeconfigPath}
				cfg["leaderElection"] = map[string]interface{}{"leaderElect": false}
			})
			s := startInProcessScheduler(t, path)
			ns := namespace(t, c)
			scheduleGang(t, c, ns, "g", tc.schedulerName, 3)
			s.Stop()
		})
	}
}

// rbacKinds are the kinds that make up the access control of a
// kustomization: RBAC and the admission policy that narrows it.
var rbacKinds = map[string]bool{
	"Namespace": true, "ServiceAccount": true,
	"ClusterRole": true, "ClusterRoleBinding": true, "Role": true, "RoleBinding": true,
	"ValidatingAdmissionPolicy": true, "ValidatingAdmissionPolicyBinding": true,
}

// applyRBAC creates, for real, the namespace, ServiceAccounts and RBAC of
// the kustomization dir, and returns all its rendered objects.
func applyRBAC(t *testing.T, c *sandbox.Cluster, dir string) []*unstructured.Unstructured {
	t.Helper()
	objs := renderKustomization(t, dir)
	applier := newObjectApplier(t, c.Config)
	ns := findObject(objs, "Namespace", "", systemNamespace)
	require.NotNil(t, ns)
	require.NoError(t, applier.apply(context.Background(), ns))
	for _, o := range objs {
		if rbacKinds[o.GetKind()] && o.GetKind() != "Namespace" {
			require.NoError(t, applier.apply(context.Background(), o))
		}
	}
	return objs
}

// serviceAccountConfig mints a token for ServiceAccount ns/name and returns
// a client config that authenticates with it, and a kubeconfig file for it.
func serviceAccountConfig(t *testing.T, c *sandbox.Cluster, ns, name string) (*restclient.Config, string) {
	t.Helper()
	tr, err := c.Client.CoreV1().ServiceAccounts(ns).CreateToken(context.Background(), name, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)},
	}, metav1.CreateOptions{})
	require.NoError(t, err, "mint a token for ServiceAccount %s/%s", ns, name)
	cfg := restclient.AnonymousClientConfig(c.Config)
	cfg.BearerToken = tr.Status.Token
	path := filepath.Join(t.TempDir(), name+".kubeconfig")
	require.NoError(t, sandbox.WriteKubeconfig(cfg, path))
	return cfg, path
}

func phalanxClientFor(t *testing.T, cfg *restclient.Config) versioned.Interface {
	t.Helper()
	crdCfg := restclient.CopyConfig(cfg)
	crdCfg.ContentType = "application/json"
	crdCfg.AcceptContentTypes = "application/json"
	client, err := versioned.NewForConfig(crdCfg)
	require.NoError(t, err)
	return client
}

// renderedSchedulerConfig is the config.yaml of the overlay's ConfigMap.
func renderedSchedulerConfig(t *testing.T, objs []*unstructured.Unstructured) []byte {
	t.Helper()
	cm := findObject(objs, "ConfigMap", systemNamespace, "phalanx-scheduler-config")
	require.NotNil(t, cm)
	data, _, _ := unstructured.NestedString(cm.Object, "data", "config.yaml")
	require.NotEmpty(t, data)
	return []byte(data)
}

// TestRBACSchedulerServiceAccount runs the scheduler with nothing but the
// rendered RBAC of the second-scheduler overlay: it binds a gang and writes
// the group's status. Without the rule on podgroups/status the same
// identity's status update is Forbidden.
func TestRBACSchedulerServiceAccount(t *testing.T) {
	c := startCluster(t, sandbox.Options{NodeAgent: true})
	ctx := context.Background()
	addNodes(t, c, "n", 4, "4", 0)
	objs := applyRBAC(t, c, "manifests/overlays/second-scheduler")
	saCfg, kubeconfig := serviceAccountConfig(t, c, systemNamespace, schedulerSA)

	path := schedulerConfigFile(t, renderedSchedulerConfig(t, objs), func(cfg map[string]interface{}) {
		cfg["clientConnection"] = map[string]interface{}{"kubeconfig": kubeconfig}
		// The in-process scheduler does not run leader election; the
		// process tests cover the Lease.
		cfg["leaderElection"] = map[string]interface{}{"leaderElect": false}
	})
	startInProcessScheduler(t, path)

	ns := namespace(t, c)
	scheduleGang(t, c, ns, "g", "phalanx-scheduler", 3)
	cond := waitGroupCondition(t, c, ns, "g", v1alpha1.PodGroupInitiallyScheduled, "bound")
	assert.Equal(t, metav1.ConditionTrue, cond.Status, "the scheduler wrote the group's status as %s", schedulerSA)

	sa := phalanxClientFor(t, saCfg).SchedulingV1alpha1()
	updateStatus := func() error {
		pg, err := sa.PodGroups(ns).Get(ctx, "g", metav1.GetOptions{})
		if err != nil {
			return err
		}
		meta.SetStatusCondition(&pg.Status.Conditions, metav1.Condition{
			Type: "DeployTest", Status: metav1.ConditionTrue, Reason: "RBACCheck", Message: "written by the scheduler's identity",
		})
		_, err = sa.PodGroups(ns).UpdateStatus(ctx, pg, metav1.UpdateOptions{})
		return err
	}
	require.NoError(t, updateStatus(), "with the rendered role the scheduler's identity updates PodGroup status")
	_, err := sa.PodGroups(ns).Create(ctx, gangPG("not-allowed", 1), metav1.CreateOptions{})
	assert.True(t, apierrors.IsForbidden(err), "the scheduler's identity may not create PodGroups, got %v", err)

	// Its own Lease, yes; the default scheduler's, never: holding
	// kube-system/kube-scheduler would stop the default scheduler.
	saKube, err := kubernetes.NewForConfig(saCfg)
	require.NoError(t, err)
	own, err := saKube.CoordinationV1().Leases(systemNamespace).Create(ctx, &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: schedulerLease},
		Spec:       coordinationv1.LeaseSpec{HolderIdentity: ptr.To("deploy-test")},
	}, metav1.CreateOptions{})
	require.NoError(t, err, "the scheduler's identity creates its own Lease")
	own.Spec.HolderIdentity = ptr.To("deploy-test-2")
	_, err = saKube.CoordinationV1().Leases(systemNamespace).Update(ctx, own, metav1.UpdateOptions{})
	require.NoError(t, err, "the scheduler's identity renews its own Lease")
	theirs, err := c.Client.CoordinationV1().Leases("kube-system").Create(ctx, &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: "kube-scheduler"},
		Spec:       coordinationv1.LeaseSpec{HolderIdentity: ptr.To("default-scheduler-0")},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	theirs.Spec.HolderIdentity = ptr.To("phalanx")
	_, err = saKube.CoordinationV1().Leases("kube-system").Update(ctx, theirs, metav1.UpdateOptions{})
	assert.True(t, apierrors.IsForbidden(err), "the scheduler's identity may not take the default scheduler's Lease, got %v", err)
	_, err = saKube.CoordinationV1().Leases("kube-system").Get(ctx, "kube-scheduler", metav1.GetOptions{})
	assert.True(t, apierrors.IsForbidden(err), "nor read it, got %v", err)

	// Remove podgroups/status from the rendered role.
	role, err := c.Client.RbacV1().ClusterRoles().Get(ctx, "phalanx-scheduler", metav1.GetOptions{})
	require.NoError(t, err)
	var rules []rbacv1.PolicyRule
	removed := false
	for _, r := range role.Rules {
		var resources []string
		for _, res := range r.Resources {
			if res == "podgroups/status" {
				removed = true
				continue
			}
			resources = append(resources, res)
		}
		if len(resources) > 0 {
			r.Resources = resources
			rules = append(rules, r)
		}
	}
	require.True(t, removed, "the rendered role grants podgroups/status")
	role.Rules = rules
	_, err = c.Client.RbacV1().ClusterRoles().Update(ctx, role, metav1.UpdateOptions{})
	require.NoError(t, err)

	eventually(t, 30*time.Second, "the status update to be forbidden without the rule", func() (bool, error) {
		err := updateStatus()
		if err == nil {
			return false, nil
		}
		if apierrors.IsForbidden(err) {
			assert.Contains(t, err.Error(), `cannot update resource "podgroups/status"`)
			return true, nil
		}
		return false, err
	})
	_, err = sa.PodGroups(ns).Get(ctx, "g", metav1.GetOptions{})
	assert.NoError(t, err, "the rest of the role still applies")
}

// binaries are built once per test process, into one directory that each
// run overwrites.
var binaries struct {
	mu    sync.Mutex
	built map[string]string
}

// buildBinary builds ./cmd/<name> from this checkout.
func buildBinary(t *testing.T, name string) string {
	t.Helper()
	binaries.mu.Lock()
	defer binaries.mu.Unlock()
	if path, ok := binaries.built[name]; ok {
		return path
	}
	goTool, err := exec.LookPath("go")
	require.NoError(t, err, "the go command builds the binaries under test")
	dir := filepath.Join(os.TempDir(), "phalanx-integration-bin")
	require.NoError(t, os.MkdirAll(dir, 0o755))
	path := filepath.Join(dir, name)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	start := time.Now()
	cmd := exec.CommandContext(ctx, goTool, "build", "-o", path, "./cmd/"+name)
	cmd.Dir = repoRoot
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "go build ./cmd/%s:\n%s", name, out)
	t.Logf("built %s in %v", name, time.Since(start).Round(time.Second))
	if binaries.built == nil {
		binaries.built = map[string]string{}
	}
	binaries.built[name] = path
	return path
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	port := l.Addr().(*net.TCPAddr).Port
	require.NoError(t, l.Close())
	return port
}

// process is a binary under test running beside the sandbox.
type process struct {
	name string
	cmd  *exec.Cmd
	log  string
	done chan struct{}
}

func startProcess(t *testing.T, name, bin string, args ...string) *process {
	t.Helper()
	p := &process{name: name, log: filepath.Join(t.TempDir(), name+".log"), done: make(chan struct{})}
	f, err := os.Create(p.log)
	require.NoError(t, err)
	p.cmd = exec.Command(bin, args...)
	p.cmd.Stdout, p.cmd.Stderr = f, f
	require.NoError(t, p.cmd.Start(), "start %s", name)
	go func() {
		_ = p.cmd.Wait()
		f.Close()
		close(p.done)
	}()
	t.Cleanup(func() {
		p.kill()
		if t.Failed() {
			if data, err := os.ReadFile(p.log); err == nil {
				lines := strings.Split(strings.TrimSpace(string(data)), "\n")
				if len(lines) > 80 {
					lines = lines[len(lines)-80:]
				}
				t.Logf("last lines of %s's log:\n%s", name, strings.Join(lines, "\n"))
			}
		}
	})
	return p
}

// kill ends the process as a crash would (SIGKILL: no Lease release) and
// waits for it to exit.
func (p *process) kill() {
	_ = p.cmd.Process.Kill()
	<-p.done
}

// assertNoForbidden fails when the process logged a request the API server
// refused for lack of permission (a reflector's list, an event, a write
// whose failure is only retried).
func (p *process) assertNoForbidden(t *testing.T) {
	t.Helper()
	data, err := os.ReadFile(p.log)
	require.NoError(t, err)
	var refused []string
	for _, line := range strings.Split(string(data), "\n") {
		if strings.Contains(line, "is forbidden") {
			refused = append(refused, line)
		}
	}
	if len(refused) > 5 {
		refused = refused[:5]
	}
	assert.Empty(t, refused, "%s was refused requests by the API server", p.name)
}

func (p *process) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// httpGet fetches url, with a bearer token when token is not empty. The
// scheduler's secure port serves a self-signed certificate.
func httpGet(url, token string) (int, string, error) {
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS12},
	}}
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		return 0, "", err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body), err
}

// metricValue sums the samples of metric name in a Prometheus text
// exposition whose labels include every label of want (`k="v"`).
func metricValue(exposition, name string, want ...string) (float64, bool) {
	sum, found := 0.0, false
	for _, line := range strings.Split(exposition, "\n") {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		cut := strings.LastIndex(line, " ")
		if cut < 0 {
			continue
		}
		series, value := line[:cut], line[cut+1:]
		labels := ""
		if i := strings.IndexByte(series, '{'); i >= 0 {
			series, labels = series[:i], series[i:]
		}
		if series != name {
			continue
		}
		matches := true
		for _, w := range want {
			matches = matches && strings.Contains(labels, w)
		}
		if !matches {
			continue
		}
		v, err := strconv.ParseFloat(value, 64)
		if err != nil {
			continue
		}
		sum, found = sum+v, true
	}
	return sum, found
}

// schedulerProcess is phalanx-scheduler serving its secure port on
// 127.0.0.1:port.
type schedulerProcess struct {
	*process
	port int
}

func (s *schedulerProcess) url(path string) string {
	return fmt.Sprintf("https://127.0.0.1:%d%s", s.port, path)
}

// startSchedulerProcess runs the binary as the Deployment does (--config
// only), plus the flags a pod gets for free: the port, and the kubeconfig
// that delegates authentication and authorization of its endpoints (in a
// pod, the in-cluster configuration).
func startSchedulerProcess(t *testing.T, name, bin, configPath, kubeconfig string, extra ...string) *schedulerProcess {
	t.Helper()
	s := &schedulerProcess{port: freePort(t)}
	// Two processes on one host would collide on the diagnostics port's
	// default: off unless the test asks for one.
	hasPort := false
	for _, a := range extra {
		hasPort = hasPort || strings.HasPrefix(a, "--phalanx-port")
	}
	if !hasPort {
		extra = append(extra, "--phalanx-port=0")
	}
	s.process = startProcess(t, name, bin, append([]string{
		"--config=" + configPath,
		"--bind-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(s.port),
		"--authentication-kubeconfig=" + kubeconfig,
		"--authorization-kubeconfig=" + kubeconfig,
		"-v=2",
	}, extra...)...)
	eventually(t, 2*time.Minute, name+" serving /healthz", func() (bool, error) {
		if s.exited() {
			return false, fmt.Errorf("%s exited; see its log", name)
		}
		code, _, err := httpGet(s.url("/healthz"), "")
		return err == nil && code == http.StatusOK, nil
	})
	return s
}

// leaderStatus is the leader_election_master_status the process reports:
// 1 while it holds the Lease, 0 while it stands by.
func (s *schedulerProcess) leaderStatus(token string) (float64, bool) {
	code, body, err := httpGet(s.url("/metrics"), token)
	if err != nil || code != http.StatusOK {
		return 0, false
	}
	return metricValue(body, leaderMetric, `name="kube-scheduler"`)
}

// processSchedulerConfig is the overlay's configuration with the scheduler
// identity's kubeconfig and Lease timings short enough for a test.
func processSchedulerConfig(t *testing.T, base []byte, kubeconfig string, mutate func(cfg map[string]interface{})) string {
	t.Helper()
	return schedulerConfigFile(t, base, func(cfg map[string]interface{}) {
		cfg["clientConnection"] = map[string]interface{}{"kubeconfig": kubeconfig}
		le := cfg["leaderElection"].(map[string]interface{})
		require.Equal(t, true, le["leaderElect"], "the deployed configuration elects a leader")
		le["leaseDuration"], le["renewDeadline"], le["retryPeriod"] = "4s", "3s", "1s"
		if mutate != nil {
			mutate(cfg)
		}
	})
}

// metricsReaderToken is a token of a ServiceAccount bound to the rendered
// phalanx-metrics-reader ClusterRole, as a Prometheus would have.
func metricsReaderToken(t *testing.T, c *sandbox.Cluster) string {
	t.Helper()
	ctx := context.Background()
	_, err := c.Client.CoreV1().ServiceAccounts(systemNamespace).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "prometheus"}}, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = c.Client.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "prometheus-phalanx-metrics"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "phalanx-metrics-reader"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: "prometheus", Namespace: systemNamespace}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	cfg, _ := serviceAccountConfig(t, c, systemNamespace, "prometheus")
	return cfg.BearerToken
}

func leaseHolder(c *sandbox.Cluster, name string) (string, error) {
	lease, err := c.Client.CoordinationV1().Leases(systemNamespace).Get(context.Background(), name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	return ptr.Deref(lease.Spec.HolderIdentity, ""), nil
}

// TestLeaderElectionTwoSchedulerProcesses runs two phalanx-scheduler
// processes with the second-scheduler overlay's configuration and RBAC:
// exactly one leads and binds a gang; when it is killed the other takes
// the Lease over and binds the next gang.
func TestLeaderElectionTwoSchedulerProcesses(t *testing.T) {
	bin := buildBinary(t, "phalanx-scheduler")
	c := startCluster(t, sandbox.Options{NodeAgent: true})
	addNodes(t, c, "n", 4, "4", 0)
	objs := applyRBAC(t, c, "manifests/overlays/second-scheduler")
	_, kubeconfig := serviceAccountConfig(t, c, systemNamespace, schedulerSA)
	token := metricsReaderToken(t, c)
	path := processSchedulerConfig(t, renderedSchedulerConfig(t, objs), kubeconfig, nil)

	replicas := []*schedulerProcess{
		startSchedulerProcess(t, "scheduler-a", bin, path, kubeconfig),
		startSchedulerProcess(t, "scheduler-b", bin, path, kubeconfig),
	}
	// leaderOf waits until exactly one live replica reports that it leads
	// and every other live replica that it stands by.
	leaderOf := func(live []*schedulerProcess) *schedulerProcess {
		var leader *schedulerProcess
		eventually(t, 60*time.Second, "exactly one replica leading", func() (bool, error) {
			leader = nil
			for _, s := range live {
				v, ok := s.leaderStatus(token)
				if !ok {
					return false, nil
				}
				if v == 1 {
					if leader != nil {
						return false, fmt.Errorf("%s and %s both lead", leader.name, s.name)
					}
					leader = s
				}
			}
			return leader != nil, nil
		})
		return leader
	}

	first := leaderOf(replicas)
	var firstHolder string
	eventually(t, 30*time.Second, "the Lease held", func() (bool, error) {
		var err error
		firstHolder, err = leaseHolder(c, schedulerLease)
		return firstHolder != "", err
	})
	t.Logf("%s leads as %s", first.name, firstHolder)
	ns := namespace(t, c)
	scheduleGang(t, c, ns, "before", "phalanx-scheduler", 3)

	first.kill()
	var standby []*schedulerProcess
	for _, s := range replicas {
		if s != first {
			standby = append(standby, s)
		}
	}
	second := leaderOf(standby)
	eventually(t, 60*time.Second, "the Lease taken over", func() (bool, error) {
		holder, err := leaseHolder(c, schedulerLease)
		return holder != "" && holder != firstHolder, err
	})
	t.Logf("%s took over", second.name)
	scheduleGang(t, c, ns, "after", "phalanx-scheduler", 3)
	for _, s := range replicas {
		s.assertNoForbidden(t)
	}
}

// TestMetricsEndpointServesPhalanxMetrics scrapes the scheduler process's
// secure port with a phalanx-metrics-reader token while a gang times out
// in Permit and then binds. Probes need no credentials; /metrics does.
func TestMetricsEndpointServesPhalanxMetrics(t *testing.T) {
	bin := buildBinary(t, "phalanx-scheduler")
	c := startCluster(t, sandbox.Options{NodeAgent: true})
	addNodes(t, c, "n", 4, "4", 0)
	objs := applyRBAC(t, c, "manifests/overlays/second-scheduler")
	_, kubeconfig := serviceAccountConfig(t, c, systemNamespace, schedulerSA)
	token := metricsReaderToken(t, c)
	path := processSchedulerConfig(t, renderedSchedulerConfig(t, objs), kubeconfig, func(cfg map[string]interface{}) {
		setPluginArg(t, cfg, gang.Name, "permitWaitingTimeSeconds", 5)
	})
	s := startSchedulerProcess(t, "scheduler", bin, path, kubeconfig)

	for _, probe := range []string{"/healthz", "/readyz"} {
		eventually(t, 60*time.Second, probe+" answering 200 without credentials", func() (bool, error) {
			code, _, err := httpGet(s.url(probe), "")
			return err == nil && code == http.StatusOK, nil
		})
	}
	code, _, err := httpGet(s.url("/metrics"), "")
	require.NoError(t, err)
	assert.Equal(t, http.StatusForbidden, code, "/metrics is not served anonymously")

	scrape := func() string {
		code, body, err := httpGet(s.url("/metrics"), token)
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, code, "/metrics with a phalanx-metrics-reader token: %s", body)
		return body
	}
	value := func(body, name string, labels ...string) float64 {
		v, _ := metricValue(body, name, labels...)
		return v
	}
	eventually(t, 60*time.Second, "the replica leading", func() (bool, error) {
		v, ok := s.leaderStatus(token)
		return ok && v == 1, nil
	})

	// 3 of 4 members can be scheduled; the 4th is held by a scheduling gate,
	// so the 3 wait in Permit and time out, again and again.
	ns := namespace(t, c)
	createPodGroup(t, c, ns, gangPG("g", 4))
	for i := 0; i < 3; i++ {
		createPods(t, c, ns, member{name: fmt.Sprintf("g-%d", i), labels: inGroup("g"), cpu: "1"})
	}
	createPods(t, c, ns, member{name: "g-3", labels: inGroup("g"), cpu: "1", gated: true})
	eventually(t, 60*time.Second, "phalanx_groups_waiting at 1 while the members wait", func() (bool, error) {
		return value(scrape(), "phalanx_groups_waiting") == 1, nil
	})
	eventually(t, 60*time.Second, "a timed-out gang attempt", func() (bool, error) {
		return value(scrape(), "phalanx_gang_attempts_total", `result="timeout"`) >= 1, nil
	})
	assert.Zero(t, boundWithPrefix(t, c, ns, "g-"), "no member bound below quorum")

	// Lift the gate: the gang reaches quorum and binds.
	pod, err := c.Client.CoreV1().Pods(ns).Get(context.Background(), "g-3", metav1.GetOptions{})
	require.NoError(t, err)
	pod.Spec.SchedulingGates = nil
	_, err = c.Client.CoreV1().Pods(ns).Update(context.Background(), pod, metav1.UpdateOptions{})
	require.NoError(t, err)
	eventually(t, 60*time.Second, "the gang bound", func() (bool, error) {
		return boundWithPrefix(t, c, ns, "g-") == 4, nil
	})
	var body string
	eventually(t, 30*time.Second, "the allowed attempt counted and nothing left waiting", func() (bool, error) {
		body = scrape()
		return value(body, "phalanx_gang_attempts_total", `result="allowed"`) >= 1 && value(body, "phalanx_groups_waiting") == 0, nil
	})
	assert.GreaterOrEqual(t, value(body, "phalanx_group_scheduling_duration_seconds_count"), 1.0)
	assert.GreaterOrEqual(t, value(body, "phalanx_plan_duration_seconds_count"), 1.0)
	for _, name := range []string{
		"phalanx_gang_attempts_total", "phalanx_groups_waiting",
		"phalanx_group_scheduling_duration_seconds", "phalanx_plan_duration_seconds",
	} {
		assert.Contains(t, body, "# HELP "+name+" ", "metric %s is described", name)
	}
	s.assertNoForbidden(t)
}

// TestDiagnosticsRolesGrantReadingApartFromFit asks the API server's RBAC
// what the scheduler's diagnostics port asks it (a SubjectAccessReview for
// the non-resource URL, the request's method as the verb) for callers
// bound to the roles of manifests/base: phalanx-diagnostics reads
// (groups, explain, top) but cannot run fit, which makes the scheduler
// plan; phalanx-diagnostics-fit runs fit and reads nothing.
func TestDiagnosticsRolesGrantReadingApartFromFit(t *testing.T) {
	c := startCluster(t, sandbox.Options{})
	ctx := context.Background()
	objs := renderKustomization(t, "manifests/base")
	applier := newObjectApplier(t, c.Config)
	for _, name := range []string{"phalanx-diagnostics", "phalanx-diagnostics-fit"} {
		role := findObject(objs, "ClusterRole", "", name)
		require.NotNil(t, role, "the base installs ClusterRole %s", name)
		require.NoError(t, applier.apply(ctx, role))
	}
	for user, roles := range map[string][]string{
		"reader":   {"phalanx-diagnostics"},
		"fitter":   {"phalanx-diagnostics-fit"},
		"operator": {"phalanx-diagnostics", "phalanx-diagnostics-fit"},
	} {
		for _, role := range roles {
			_, err := c.Client.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
				ObjectMeta: metav1.ObjectMeta{Name: user + "-" + role},
				RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role},
				Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}},
			}, metav1.CreateOptions{})
			require.NoError(t, err)
		}
	}
	allowed := func(user, verb, path string) (bool, error) {
		r, err := c.Client.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{
			Spec: authorizationv1.SubjectAccessReviewSpec{User: user, NonResourceAttributes: &authorizationv1.NonResourceAttributes{Path: path, Verb: verb}},
		}, metav1.CreateOptions{})
		if err != nil {
			return false, err
		}
		return r.Status.Allowed, nil
	}
	type request struct{ verb, path string }
	var (
		groups  = request{"get", "/debug/phalanx/groups"}
		explain = request{"get", "/debug/phalanx/explain/podgroup/team-a/trainer"}
		top     = request{"get", "/debug/phalanx/top"}
		fit     = request{"post", "/debug/phalanx/fit"}
	)
	tests := []struct {
		name   string
		user   string
		allow  []request
		refuse []request
	}{
		{name: "a caller bound to phalanx-diagnostics reads but cannot run fit", user: "reader",
			allow: []request{groups, explain, top}, refuse: []request{fit}},
		{name: "a caller bound to phalanx-diagnostics-fit runs fit but reads nothing", user: "fitter",
			allow: []request{fit}, refuse: []request{groups, explain, top}},
		{name: "a caller bound to both does both", user: "operator",
			allow: []request{groups, explain, top, fit}},
		{name: "a caller bound to neither does nothing", user: "nobody",
			refuse: []request{groups, explain, top, fit}},
	}
	// The authorizer learns of the bindings through its informers: wait
	// until every grant shows, then the refusals mean something.
	eventually(t, 30*time.Second, "every grant of the bindings authorized", func() (bool, error) {
		for _, tt := range tests {
			for _, r := range tt.allow {
				if ok, err := allowed(tt.user, r.verb, r.path); err != nil || !ok {
					return false, err
				}
			}
		}
		return true, nil
	})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, r := range tt.allow {
				ok, err := allowed(tt.user, r.verb, r.path)
				require.NoError(t, err)
				assert.True(t, ok, "%s may %s %s", tt.user, r.verb, r.path)
			}
			for _, r := range tt.refuse {
				ok, err := allowed(tt.user, r.verb, r.path)
				require.NoError(t, err)
				assert.False(t, ok, "%s may not %s %s", tt.user, r.verb, r.path)
			}
		})
	}
}

// TestRBACControllerServiceAccount runs phalanx-controller as a process
// with the Deployment's flags and nothing but the rendered RBAC: it takes
// its Lease, reports healthy and ready, turns a Workload into groups and a
// gang Job into a Workload, a PodGroup and ungated, labelled pods, and
// counts the bound members in the PodGroup's status. With
// --provisioning-schedulers it also asks the sandbox's stand-in autoscaler
// for a gang's nodes: the request, its templates and the members'
// annotations pass RBAC and the pod-update policy.
func TestRBACControllerServiceAccount(t *testing.T) {
	bin := buildBinary(t, "phalanx-controller")
	c := startCluster(t, sandbox.Options{Scheduler: true, NodeAgent: true,
		StandInProvisioner: &sandbox.StandInProvisioner{CPU: "8", MaxNodes: 2}})
	ctx := context.Background()
	addNodes(t, c, "n", 4, "4", 0)
	objs := applyRBAC(t, c, "manifests/overlays/second-scheduler")
	_, kubeconfig := serviceAccountConfig(t, c, systemNamespace, controllerSA)

	d := findObject(objs, "Deployment", systemNamespace, "phalanx-controller")
	require.NotNil(t, d)
	containers, _, _ := unstructured.NestedSlice(d.Object, "spec", "template", "spec", "containers")
	require.Len(t, containers, 1)
	deployed, _, _ := unstructured.NestedStringSlice(containers[0].(map[string]interface{}), "args")
	healthPort, metricsPort := freePort(t), freePort(t)
	args := []string{"--kubeconfig=" + kubeconfig, "--bind-address=127.0.0.1",
		"--provisioning-schedulers=phalanx-scheduler", "--provisioning-after=200ms"}
	for _, a := range deployed {
		switch {
		case strings.HasPrefix(a, "--health-addr="):
			a = fmt.Sprintf("--health-addr=127.0.0.1:%d", healthPort)
		case strings.HasPrefix(a, "--secure-port="):
			a = fmt.Sprintf("--secure-port=%d", metricsPort)
		}
		args = append(args, a)
	}
	p := startProcess(t, "controller", bin, args...)
	for _, probe := range []string{"/healthz", "/readyz"} {
		eventually(t, 60*time.Second, "controller "+probe, func() (bool, error) {
			if p.exited() {
				return false, errors.New("phalanx-controller exited; see its log")
			}
			code, _, err := httpGet(fmt.Sprintf("http://127.0.0.1:%d%s", healthPort, probe), "")
			return err == nil && code == http.StatusOK, nil
		})
	}
	eventually(t, 60*time.Second, "the controller's Lease held", func() (bool, error) {
		holder, err := leaseHolder(c, controllerLease)
		return holder != "", err
	})

	// Upstream's Job controller creates the Job's pods, as
	// kube-controller-manager would.
	jobCtx, stopJobs := context.WithCancel(ctx)
	jobClient, err := kubernetes.NewForConfig(restclient.AddUserAgent(restclient.CopyConfig(c.Config), "job-controller"))
	require.NoError(t, err)
	factory := informers.NewSharedInformerFactory(jobClient, 0)
	jobs, err := job.NewController(jobCtx, jobClient, factory.Core().V1().Pods(), factory.Batch().V1().Jobs(), nil, nil)
	require.NoError(t, err)
	factory.Start(jobCtx.Done())
	jobsDone := make(chan struct{})
	go func() {
		defer close(jobsDone)
		jobs.Run(jobCtx, 2)
	}()
	t.Cleanup(func() {
		stopJobs()
		<-jobsDone
		factory.Shutdown()
	})

	api := c.Phalanx.SchedulingV1alpha1()
	t.Run("a Workload becomes its groups", func(t *testing.T) {
		ns := namespace(t, c)
		data, err := os.ReadFile(filepath.Join(repoRoot, "manifests/samples/workload-multilevel.yaml"))
		require.NoError(t, err)
		require.NoError(t, applyYAML(ctx, c, ns, data))
		eventually(t, 60*time.Second, "the Workload's groups and its GroupsCreated condition", func() (bool, error) {
			if _, err := api.CompositePodGroups(ns).Get(ctx, "multilevel-root", metav1.GetOptions{}); err != nil {
				return false, client404(err)
			}
			for _, pg := range []string{"multilevel-workers", "multilevel-driver"} {
				if _, err := api.PodGroups(ns).Get(ctx, pg, metav1.GetOptions{}); err != nil {
					return false, client404(err)
				}
			}
			w, err := api.Workloads(ns).Get(ctx, "multilevel", metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			return meta.IsStatusConditionTrue(w.Status.Conditions, controller.ConditionGroupsCreated), nil
		})
	})

	t.Run("a gang Job is scheduled as one gang and counted", func(t *testing.T) {
		ns := namespace(t, c)
		_, err := c.Client.BatchV1().Jobs(ns).Create(ctx, gangJobOf("train", 3), metav1.CreateOptions{})
		require.NoError(t, err)
		pgName := controller.JobPodGroupName("train")
		eventually(t, 60*time.Second, "all 3 pods bound", func() (bool, error) {
			return len(boundPods(t, c, ns)) == 3, nil
		})
		pods, err := c.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		require.NoError(t, err)
		for _, p := range pods.Items {
			assert.Equal(t, pgName, p.Labels[v1alpha1.PodGroupLabel], "pod %s labelled with its PodGroup", p.Name)
			assert.Empty(t, p.Spec.SchedulingGates, "pod %s ungated", p.Name)
		}
		eventually(t, 60*time.Second, "the PodGroup counting 3 scheduled members", func() (bool, error) {
			pg, err := api.PodGroups(ns).Get(ctx, pgName, metav1.GetOptions{})
			if err != nil {
				return false, client404(err)
			}
			return pg.Status.Members == 3 && pg.Status.Scheduled == 3, nil
		})
	})

	t.Run("a gang that does not fit gets its nodes from a ProvisioningRequest", func(t *testing.T) {
		ns := namespace(t, c)
		pg := gangPG("wide", 2)
		pg.Annotations = map[string]string{provisioning.GroupAnnotation: provisioning.ModeAtomic}
		_, err := api.PodGroups(ns).Create(ctx, pg, metav1.CreateOptions{})
		require.NoError(t, err)
		for i := range 2 {
			p := plainPod(fmt.Sprintf("wide-%d", i), "6")
			p.Labels = map[string]string{v1alpha1.PodGroupLabel: "wide"}
			_, err := c.Client.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{})
			require.NoError(t, err)
		}
		eventually(t, 60*time.Second, "the gang bound on the stand-in's nodes", func() (bool, error) {
			return len(boundPods(t, c, ns)) == 2, nil
		})
		pod, err := c.Client.CoreV1().Pods(ns).Get(ctx, "wide-0", metav1.GetOptions{})
		require.NoError(t, err)
		assert.Equal(t, provisioning.RequestName("wide", 1), pod.Annotations[autoscalingv1.ConsumeAnnotation])
	})

	metricsURL := fmt.Sprintf("https://127.0.0.1:%d/metrics", metricsPort)
	code, _, err := httpGet(metricsURL, "")
	require.NoError(t, err)
	assert.Equal(t, http.StatusForbidden, code, "an anonymous caller is refused the metrics")
	code, _, err = httpGet(metricsURL, "not-a-token")
	require.NoError(t, err)
	assert.Equal(t, http.StatusUnauthorized, code, "a caller with a bad token is refused the metrics")
	code, body, err := httpGet(metricsURL, metricsReaderToken(t, c))
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, code, "a caller bound to phalanx-metrics-reader gets the metrics")
	v, _ := metricValue(body, "phalanx_controller_reconcile_total", `result="success"`)
	assert.Positive(t, v, "the controller's metrics count its reconciles")
	p.assertNoForbidden(t)
}

// client404 turns NotFound into "not yet" for polling.
func client404(err error) error {
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// TestControllerPodUpdatePolicy applies the rendered RBAC and admission
// policy and acts as phalanx-controller's ServiceAccount: RBAC lets it
// patch any pod, the policy lets it change only the pod-group label, the
// gang gate and the ProvisioningRequest annotations.
func TestControllerPodUpdatePolicy(t *testing.T) {
	c := startCluster(t, sandbox.Options{})
	ctx := context.Background()
	applyRBAC(t, c, "manifests/overlays/second-scheduler")
	ns := namespace(t, c)
	pod := plainPod("victim", "100m")
	pod.Labels = map[string]string{"app": "victim"}
	pod.Spec.SchedulingGates = []corev1.PodSchedulingGate{{Name: controller.GangSchedulingGate}, {Name: "example.com/other"}}
	_, err := c.Client.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{})
	require.NoError(t, err)

	cfg := restclient.CopyConfig(c.Config)
	cfg.Impersonate = restclient.ImpersonationConfig{
		UserName: "system:serviceaccount:" + systemNamespace + ":" + controllerSA,
		Groups:   []string{"system:serviceaccounts", "system:serviceaccounts:" + systemNamespace, "system:authenticated"},
	}
	as, err := kubernetes.NewForConfig(cfg)
	require.NoError(t, err)
	patch := func(p string) error {
		_, err := as.CoreV1().Pods(ns).Patch(ctx, "victim", types.StrategicMergePatchType, []byte(p), metav1.PatchOptions{})
		return err
	}
	const policyMsg = "phalanx-controller may change only the scheduling.phalanx.dev/pod-group label, the scheduling.phalanx.dev/gang scheduling gate and the ProvisioningRequest annotations of a pod, not its images or any other field"

	// The policy takes effect once the API server has loaded it.
	eventually(t, 30*time.Second, "the controller's image patch to be denied", func() (bool, error) {
		err := patch(`{"spec":{"containers":[{"name":"main","image":"registry.example.com/evil:1"}]}}`)
		if err == nil {
			// Not enforced yet: put the image back for the next try.
			_, err := c.Client.CoreV1().Pods(ns).Patch(ctx, "victim", types.StrategicMergePatchType,
				[]byte(`{"spec":{"containers":[{"name":"main","image":"`+pod.Spec.Containers[0].Image+`"}]}}`), metav1.PatchOptions{})
			return false, err
		}
		if apierrors.IsInvalid(err) || apierrors.IsForbidden(err) {
			assert.Contains(t, err.Error(), policyMsg)
			return true, nil
		}
		return false, err
	})

	tests := []struct {
		name, patch, denied string
	}{
		{name: "labelling the pod with its PodGroup and lifting the gang gate in one write", patch: `{"metadata":{"labels":{"scheduling.phalanx.dev/pod-group":"train-workers"}},"spec":{"schedulingGates":[{"$patch":"delete","name":"scheduling.phalanx.dev/gang"}]}}`},
		{name: "another label", patch: `{"metadata":{"labels":{"app":"other"}}}`, denied: "may change only the scheduling.phalanx.dev/pod-group label"},
		{name: "another scheduling gate", patch: `{"spec":{"schedulingGates":[{"$patch":"delete","name":"example.com/other"}]}}`, denied: "may only remove the scheduling.phalanx.dev/gang scheduling gate"},
		{name: "marking the pod a consumer of its gang's ProvisioningRequest", patch: `{"metadata":{"annotations":{"autoscaling.x-k8s.io/consume-provisioning-request":"train-workers-provreq-1","autoscaling.x-k8s.io/provisioning-class-name":"best-effort-atomic-scale-up.autoscaling.x-k8s.io","cluster-autoscaler.kubernetes.io/consume-provisioning-request":"train-workers-provreq-1","cluster-autoscaler.kubernetes.io/provisioning-class-name":"best-effort-atomic-scale-up.autoscaling.x-k8s.io"}}}`},
		{name: "an annotation", patch: `{"metadata":{"annotations":{"example.com/x":"y"}}}`, denied: "may change only the autoscaler's consume-provisioning-request and provisioning-class-name annotations"},
		{name: "a toleration", patch: `{"spec":{"tolerations":[{"key":"gpu","operator":"Exists"}]}}`, denied: policyMsg},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := patch(tc.patch)
			if tc.denied == "" {
				require.NoError(t, err)
				return
			}
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.denied)
		})
	}
	got, err := c.Client.CoreV1().Pods(ns).Get(ctx, "victim", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, pod.Spec.Containers[0].Image, got.Spec.Containers[0].Image, "the image is unchanged")
	assert.Equal(t, "train-workers", got.Labels[v1alpha1.PodGroupLabel])
	assert.Equal(t, []corev1.PodSchedulingGate{{Name: "example.com/other"}}, got.Spec.SchedulingGates)

	// The policy binds the controller only: an administrator still may.
	_, err = c.Client.CoreV1().Pods(ns).Patch(ctx, "victim", types.StrategicMergePatchType, []byte(`{"metadata":{"labels":{"app":"other"}}}`), metav1.PatchOptions{})
	assert.NoError(t, err)
}
