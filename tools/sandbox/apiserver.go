package sandbox

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/spf13/pflag"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilerrors "k8s.io/apimachinery/pkg/util/errors"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apiserver/pkg/storage/storagebackend"
	"k8s.io/apiserver/pkg/util/compatibility"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/client-go/kubernetes"
	restclient "k8s.io/client-go/rest"
	basecompatibility "k8s.io/component-base/compatibility"
	"k8s.io/kubernetes/cmd/kube-apiserver/app"
	"k8s.io/kubernetes/cmd/kube-apiserver/app/options"
)

// UpstreamWorkloadGates are the feature gates under which kube-apiserver
// serves scheduling.k8s.io/v1beta1 and v1alpha3 and kube-scheduler runs its
// in-tree workload scheduling. The sandbox turns them on so the upstream
// scheduler can be measured on the same cluster.
var UpstreamWorkloadGates = map[string]bool{
	"GenericWorkload":                 true,
	"TopologyAwareWorkloadScheduling": true,
	"CompositePodGroup":               true,
}

// jobWorkloadsGate is upstream's gate under which the Job controller
// creates a Workload and PodGroup per Job (Options.JobWorkloads).
const jobWorkloadsGate = "WorkloadWithJob"

// SchedulerWorkloadGatesOff are the feature gates a Phalanx scheduler runs
// with: upstream's workload scheduling off, since phalanx-scheduler refuses
// to start beside GenericWorkload. The sandbox's in-process scheduler and
// the bench's phalanx-proc child both take them from here.
func SchedulerWorkloadGatesOff() map[string]bool {
	off := make(map[string]bool, len(UpstreamWorkloadGates)+len(workloadDependentGates))
	for gate := range UpstreamWorkloadGates {
		off[gate] = false
	}
	for _, gate := range workloadDependentGates {
		off[gate] = false
	}
	return off
}

// workloadDependentGates depend on GenericWorkload, so a Phalanx
// scheduler runs with them off too: DRAWorkloadResourceClaims (claims of a
// PodGroup, made by the resourceclaim controller) may be on for the API
// server and the controller, never for a scheduler without upstream's
// workload scheduling.
var workloadDependentGates = []string{"DRAWorkloadResourceClaims"}

// workloadGatesOff is SchedulerWorkloadGatesOff for the whole sandbox: the
// Job controller creates no Workloads either.
func workloadGatesOff() map[string]bool {
	off := SchedulerWorkloadGatesOff()
	off[jobWorkloadsGate] = false
	return off
}

// admission plugins that need a controller-manager the sandbox does not run.
var disabledAdmission = []string{
	"ServiceAccount",
	"TaintNodesByCondition",
	"StorageObjectInUseProtection",
}

type apiServer struct {
	config *restclient.Config
	stop   func()
}

// startAPIServer runs kube-apiserver inside this process against etcdURL.
// The Priority admission plugin stays on, unless named in alsoDisabled, so
// pods get spec.priority from their PriorityClass as on a real cluster.
func startAPIServer(ctx context.Context, dir, etcdURL string, gates map[string]bool, authzMode string, alsoDisabled, extraAPIs []string) (*apiServer, error) {
	if len(gates) > 0 {
		if err := utilfeature.DefaultMutableFeatureGate.SetFromMap(gates); err != nil {
			return nil, fmt.Errorf("set feature gates %v: %w", gates, err)
		}
	}

	s := options.NewServerRunOptions()
	// A registry of our own, so that starting a second API server in the same
	// process (sequential tests) does not re-register global components.
	registry := basecompatibility.NewComponentGlobalsRegistry()
	if err := registry.Register(basecompatibility.DefaultKubeComponent,
		compatibility.DefaultBuildEffectiveVersion(),
		utilfeature.DefaultMutableFeatureGate); err != nil {
		return nil, fmt.Errorf("register component globals: %w", err)
	}
	s.GenericServerRunOptions.ComponentGlobalsRegistry = registry

	named := s.Flags()
	fs := pflag.NewFlagSet("sandbox-apiserver", pflag.ContinueOnError)
	for _, set := range named.FlagSets {
		fs.AddFlagSet(set)
	}
	flags := []string{
		"--runtime-config=" + strings.Join(append([]string{"scheduling.k8s.io/v1beta1=true", "scheduling.k8s.io/v1alpha3=true"}, extraAPIs...), ","),
		"--disable-admission-plugins=" + strings.Join(append(slices.Clone(disabledAdmission), alsoDisabled...), ","),
		"--endpoint-reconciler-type=none",
		"--authorization-mode=" + authzMode,
		"--service-cluster-ip-range=10.0.0.0/16",
		// Benchmarks create thousands of objects at once.
		"--max-requests-inflight=4000",
		"--max-mutating-requests-inflight=2000",
		"--enable-priority-and-fairness=false",
		"--profiling=false",
	}
	if err := fs.Parse(flags); err != nil {
		return nil, fmt.Errorf("parse apiserver flags: %w", err)
	}
	if err := registry.Set(); err != nil {
		return nil, fmt.Errorf("apply component globals: %w", err)
	}

	listener, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("listen for apiserver: %w", err)
	}
	s.SecureServing.Listener = listener
	s.SecureServing.BindPort = listener.Addr().(*net.TCPAddr).Port
	s.SecureServing.ServerCert.CertDirectory = filepath.Join(dir, "certs")
	s.SecureServing.ExternalAddress = net.ParseIP("127.0.0.1")

	storage := storagebackend.NewDefaultConfig("/registry", nil)
	storage.Transport.ServerList = []string{etcdURL}
	s.Etcd.StorageConfig = *storage

	keyFile, err := writeServiceAccountKey(dir)
	if err != nil {
		return nil, err
	}
	s.ServiceAccountSigningKeyFile = keyFile
	s.Authentication.ServiceAccounts.Issuers = []string{"https://phalanx-sandbox.local"}
	s.Authentication.ServiceAccounts.KeyFiles = []string{keyFile}

	srvCtx, cancel := context.WithCancel(ctx)
	completed, err := s.Complete(srvCtx)
	if err != nil {
		cancel()
		return nil, fmt.Errorf("complete apiserver options: %w", err)
	}
	if errs := completed.Validate(); len(errs) != 0 {
		cancel()
		return nil, fmt.Errorf("validate apiserver options: %w", utilerrors.NewAggregate(errs))
	}
	config, err := app.NewConfig(completed)
	if err != nil {
		cancel()
		return nil, fmt.Errorf("apiserver config: %w", err)
	}
	cc, err := config.Complete()
	if err != nil {
		cancel()
		return nil, fmt.Errorf("complete apiserver config: %w", err)
	}
	server, err := app.CreateServerChain(cc)
	if err != nil {
		cancel()
		return nil, fmt.Errorf("create apiserver chain: %w", err)
	}

	errCh := make(chan error, 1)
	go func() {
		defer close(errCh)
		prepared, err := server.PrepareRun()
		if err != nil {
			errCh <- err
			return
		}
		if err := prepared.Run(srvCtx); err != nil {
			errCh <- err
		}
	}()

	cfg := restclient.CopyConfig(server.GenericAPIServer.LoopbackClientConfig)
	cfg.QPS = 5000
	cfg.Burst = 10000
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		cancel()
		return nil, err
	}
	err = wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		select {
		case err := <-errCh:
			return false, fmt.Errorf("apiserver exited: %w", err)
		default:
		}
		status := 0
		client.CoreV1().RESTClient().Get().AbsPath("/readyz").Do(ctx).StatusCode(&status)
		if status != 200 {
			return false, nil
		}
		_, err := client.CoreV1().Namespaces().Get(ctx, "default", metav1.GetOptions{})
		return err == nil, nil
	})
	if err != nil {
		cancel()
		<-errCh
		return nil, fmt.Errorf("wait for apiserver readiness: %w", err)
	}

	stop := func() {
		cancel()
		for range errCh {
		}
	}
	return &apiServer{config: cfg, stop: stop}, nil
}

func writeServiceAccountKey(dir string) (string, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return "", fmt.Errorf("generate service-account key: %w", err)
	}
	der, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return "", err
	}
	path := filepath.Join(dir, "sa.key")
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der}), 0o600); err != nil {
		return "", fmt.Errorf("write service-account key: %w", err)
	}
	return path, nil
}
