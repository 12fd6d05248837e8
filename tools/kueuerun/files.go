package kueuerun

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"sort"
	"time"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilversion "k8s.io/apimachinery/pkg/util/version"
	"k8s.io/apimachinery/pkg/util/wait"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	apiversion "k8s.io/apimachinery/pkg/version"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

const modulePath = "sigs.k8s.io/kueue"

// ModuleDir finds Kueue's module directory in the module cache: the
// version this binary links, under `go env GOMODCACHE`. Building the
// binary put it there.
func ModuleDir(ctx context.Context) (string, error) {
	version := ""
	if info, ok := debug.ReadBuildInfo(); ok {
		for _, dep := range info.Deps {
			if dep.Path == modulePath {
				version = dep.Version
				if dep.Replace != nil {
					version = dep.Replace.Version
				}
			}
		}
	}
	if version == "" {
		return "", errors.New("this binary does not say which Kueue it links")
	}
	out, err := exec.CommandContext(ctx, "go", "env", "GOMODCACHE").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMODCACHE: %w", err)
	}
	dir := filepath.Join(trimmed(out), modulePath+"@"+version)
	if _, err := os.Stat(filepath.Join(dir, "config")); err != nil {
		return "", fmt.Errorf("kueue %s's manifests: %w (run go mod download %s)", version, err, modulePath)
	}
	return dir, nil
}

// yamlDocs decodes every document of the YAML files in paths into a new T.
func yamlDocs[T any](paths ...string) ([]*T, error) {
	var objs []*T
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil {
			return nil, err
		}
		dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
		for {
			obj := new(T)
			if err := dec.Decode(obj); errors.Is(err, io.EOF) {
				break
			} else if err != nil {
				return nil, fmt.Errorf("%s: %w", p, err)
			}
			objs = append(objs, obj)
		}
	}
	return objs, nil
}

// installCRDs creates (or updates) Kueue's CRDs from dir and waits until
// every one is established.
func installCRDs(ctx context.Context, cfg *rest.Config, dir string) error {
	paths, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil || len(paths) == 0 {
		return fmt.Errorf("no Kueue CRDs in %s: %v", dir, err)
	}
	crds, err := yamlDocs[apiextensionsv1.CustomResourceDefinition](paths...)
	if err != nil {
		return err
	}
	client, err := apiextensionsclient.NewForConfig(cfg)
	if err != nil {
		return err
	}
	api := client.ApiextensionsV1().CustomResourceDefinitions()
	for _, crd := range crds {
		if crd.Name == "" {
			continue
		}
		if _, err := api.Create(ctx, crd, metav1.CreateOptions{}); apierrors.IsAlreadyExists(err) {
			old, err := api.Get(ctx, crd.Name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			crd.ResourceVersion = old.ResourceVersion
			if _, err := api.Update(ctx, crd, metav1.UpdateOptions{}); err != nil {
				return err
			}
		} else if err != nil {
			return fmt.Errorf("CRD %s: %w", crd.Name, err)
		}
	}
	for _, crd := range crds {
		if crd.Name == "" {
			continue
		}
		err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
			got, err := api.Get(ctx, crd.Name, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			for _, c := range got.Status.Conditions {
				if c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue {
					return true, nil
				}
			}
			return false, nil
		})
		if err != nil {
			return fmt.Errorf("CRD %s not established: %w", crd.Name, err)
		}
	}
	// Established is not yet served by discovery, where the manager's
	// REST mapper looks once, at start: wait until discovery lists every
	// kind in the version Kueue stores.
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return err
	}
	for _, crd := range crds {
		if crd.Name == "" {
			continue
		}
		for _, v := range crd.Spec.Versions {
			if !v.Served {
				continue
			}
			gv := crd.Spec.Group + "/" + v.Name
			err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
				list, err := dc.ServerResourcesForGroupVersion(gv)
				if err != nil {
					return false, nil
				}
				for _, r := range list.APIResources {
					if r.Name == crd.Spec.Names.Plural {
						return true, nil
					}
				}
				return false, nil
			})
			if err != nil {
				return fmt.Errorf("%s %s not served: %w", gv, crd.Spec.Names.Plural, err)
			}
		}
	}
	return nil
}

// writeServingCert writes a fresh self-signed certificate for 127.0.0.1
// as tls.crt and tls.key into dir, where controller-runtime's webhook
// server reads them, and returns it as the CA bundle the API server
// trusts.
func writeServingCert(dir string) ([]byte, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(time.Now().UnixNano()),
		Subject:               pkix.Name{CommonName: "phalanx-kueue-webhook"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(365 * 24 * time.Hour),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IsCA:                  true,
		BasicConstraintsValid: true,
		IPAddresses:           []net.IP{net.ParseIP("127.0.0.1")},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, err
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, err
	}
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	keyPEM := pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER})
	if err := os.WriteFile(filepath.Join(dir, "tls.crt"), certPEM, 0o600); err != nil {
		return nil, err
	}
	return certPEM, os.WriteFile(filepath.Join(dir, "tls.key"), keyPEM, 0o600)
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// waitServing waits until the webhook server accepts TLS connections.
func waitServing(ctx context.Context, port int) error {
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	return wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		conn, err := tls.Dial("tcp", addr, &tls.Config{InsecureSkipVerify: true}) //nolint:gosec // a liveness probe of our own loopback server
		if err != nil {
			return false, nil
		}
		conn.Close()
		return true, nil
	})
}

// Names of the webhook configurations Run registers.
const (
	MutatingWebhookName   = "phalanx-kueue-mutating"
	ValidatingWebhookName = "phalanx-kueue-validating"
)

// webhookGroups are the API groups whose webhooks registerWebhooks keeps:
// Kueue's own and those of the enabled integrations. Kueue serves a
// no-op webhook for every other integration it links (pods, Deployments,
// StatefulSets); registering those would only make every pod creation
// fail while this process is down.
var webhookGroups = map[string]bool{"kueue.x-k8s.io": true, "batch": true, "jobset.x-k8s.io": true, "kubeflow.org": true}

// registerWebhooks registers Kueue's webhooks, as its manifests list
// them, pointed at the loopback server by URL. A webhook whose path this
// build does not serve (an integration not linked) is left out: the API
// server would fail every request it matches.
func registerWebhooks(ctx context.Context, client kubernetes.Interface, moduleDir string, port int, caPEM []byte, mux *http.ServeMux) error {
	path := filepath.Join(moduleDir, "config", "components", "webhook", "manifests.yaml")
	type kindOnly struct {
		Kind string `json:"kind"`
	}
	kinds, err := yamlDocs[kindOnly](path)
	if err != nil {
		return err
	}
	mutating, err := yamlDocs[admissionv1.MutatingWebhookConfiguration](path)
	if err != nil {
		return err
	}
	validating, err := yamlDocs[admissionv1.ValidatingWebhookConfiguration](path)
	if err != nil {
		return err
	}
	serves := func(rules []admissionv1.RuleWithOperations, cc *admissionv1.WebhookClientConfig) bool {
		for _, r := range rules {
			for _, g := range r.APIGroups {
				if !webhookGroups[g] {
					return false
				}
			}
		}
		if cc.Service == nil || cc.Service.Path == nil {
			return false
		}
		req, _ := http.NewRequest(http.MethodPost, *cc.Service.Path, nil)
		_, pattern := mux.Handler(req)
		if pattern == "" {
			return false
		}
		url := fmt.Sprintf("https://127.0.0.1:%d%s", port, *cc.Service.Path)
		*cc = admissionv1.WebhookClientConfig{URL: &url, CABundle: caPEM}
		return true
	}
	mw := &admissionv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: MutatingWebhookName}}
	vw := &admissionv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: ValidatingWebhookName}}
	for i, k := range kinds {
		switch k.Kind {
		case "MutatingWebhookConfiguration":
			for _, w := range mutating[i].Webhooks {
				if serves(w.Rules, &w.ClientConfig) {
					mw.Webhooks = append(mw.Webhooks, w)
				}
			}
		case "ValidatingWebhookConfiguration":
			for _, w := range validating[i].Webhooks {
				if serves(w.Rules, &w.ClientConfig) {
					vw.Webhooks = append(vw.Webhooks, w)
				}
			}
		}
	}
	sort.Slice(mw.Webhooks, func(i, j int) bool { return mw.Webhooks[i].Name < mw.Webhooks[j].Name })
	sort.Slice(vw.Webhooks, func(i, j int) bool { return vw.Webhooks[i].Name < vw.Webhooks[j].Name })
	if len(mw.Webhooks) == 0 || len(vw.Webhooks) == 0 {
		return fmt.Errorf("none of the webhooks in %s is served", path)
	}
	mapi := client.AdmissionregistrationV1().MutatingWebhookConfigurations()
	_ = mapi.Delete(ctx, mw.Name, metav1.DeleteOptions{})
	if _, err := mapi.Create(ctx, mw, metav1.CreateOptions{}); err != nil {
		return err
	}
	vapi := client.AdmissionregistrationV1().ValidatingWebhookConfigurations()
	_ = vapi.Delete(ctx, vw.Name, metav1.DeleteOptions{})
	_, err = vapi.Create(ctx, vw, metav1.CreateOptions{})
	return err
}

// devVersionDiscovery answers the server version with the version the
// API server emulates when its git version is a development build's
// ("v0.0.0-master+$Format:%H$", as an API server linked into a test or
// the sandbox reports), which Kueue cannot parse.
type devVersionDiscovery struct {
	discovery.DiscoveryInterface
}

func (d devVersionDiscovery) ServerVersion() (*apiversion.Info, error) {
	info, err := d.DiscoveryInterface.ServerVersion()
	if err != nil || info.EmulationMajor == "" {
		return info, err
	}
	if _, perr := utilversion.ParseSemantic(info.GitVersion); perr != nil {
		fixed := *info
		fixed.GitVersion = fmt.Sprintf("v%s.%s.0", info.EmulationMajor, info.EmulationMinor)
		return &fixed, nil
	}
	return info, nil
}
