package cli

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/phalanx-sched/phalanx/pkg/debugapi"
)

// EndpointOptions say where the scheduler serves /debug/phalanx.
type EndpointOptions struct {
	URL        string
	CAFile     string
	Insecure   bool
	Namespace  string
	Lease      string
	Port       int
	RequestTTL time.Duration
}

// AddFlags registers the flags.
func (e *EndpointOptions) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&e.URL, "scheduler-url", os.Getenv("PHALANX_SCHEDULER_URL"), "Base URL of the scheduler's /debug/phalanx, e.g. https://10.0.0.5:10260 (default $PHALANX_SCHEDULER_URL, else the kubeconfig's phalanx.dev/scheduler extension, else the Lease holder's pod)")
	fs.StringVar(&e.CAFile, "scheduler-ca-file", "", "PEM file of the certificate authority of the scheduler's serving certificate")
	fs.BoolVar(&e.Insecure, "scheduler-insecure-skip-tls-verify", false, "Do not verify the scheduler's certificate (its default one is self-signed); your credentials are sent to whatever answers")
	fs.StringVar(&e.Namespace, "scheduler-namespace", "phalanx-system", "Namespace of the scheduler's Lease and pods, to find the leading replica")
	fs.StringVar(&e.Lease, "scheduler-lease", "phalanx-scheduler", "Name of the scheduler's Lease (kube-scheduler when Phalanx replaces the default scheduler)")
	fs.IntVar(&e.Port, "scheduler-port", 10260, "The scheduler's --phalanx-port, to reach the leading replica's pod")
	fs.DurationVar(&e.RequestTTL, "scheduler-timeout", 2*time.Minute, "How long to wait for an answer")
}

// schedulerClient talks to one scheduler with the user's credentials.
type schedulerClient struct {
	base   string
	client *http.Client
}

// scheduler finds the scheduler and builds a client that authenticates as
// the kubeconfig's user: a bearer token, an exec plugin or a client
// certificate, which the scheduler checks with the API server
// (TokenReview) or its client CA.
func (o *Options) scheduler(ctx context.Context) (*schedulerClient, error) {
	cfg, err := o.Config.ToRESTConfig()
	if err != nil {
		return nil, err
	}
	ep, how, err := o.locate(ctx, cfg)
	if err != nil {
		return nil, err
	}
	c := rest.CopyConfig(cfg)
	c.Host, c.APIPath = ep.Server, ""
	c.TLSClientConfig.ServerName = ""
	c.TLSClientConfig.CAFile, c.TLSClientConfig.CAData = "", nil
	c.TLSClientConfig.Insecure = o.Endpoint.Insecure
	switch {
	case o.Endpoint.Insecure:
	case o.Endpoint.CAFile != "":
		c.TLSClientConfig.CAFile = o.Endpoint.CAFile
	case len(ep.CertificateAuthorityData) > 0:
		c.TLSClientConfig.CAData = ep.CertificateAuthorityData
	}
	c.Timeout = o.Endpoint.RequestTTL
	hc, err := rest.HTTPClientFor(c)
	if err != nil {
		return nil, fmt.Errorf("client for the scheduler at %s (%s): %w", ep.Server, how, err)
	}
	return &schedulerClient{base: strings.TrimSuffix(ep.Server, "/"), client: hc}, nil
}

// locate finds the scheduler's endpoint and says how.
func (o *Options) locate(ctx context.Context, cfg *rest.Config) (*debugapi.Endpoint, string, error) {
	if o.Endpoint.URL != "" {
		return &debugapi.Endpoint{Server: o.Endpoint.URL}, "--scheduler-url", nil
	}
	if ep, err := o.fromKubeconfig(); err != nil || ep != nil {
		return ep, "the kubeconfig", err
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, "", err
	}
	lease, err := cs.CoordinationV1().Leases(o.Endpoint.Namespace).Get(ctx, o.Endpoint.Lease, metav1.GetOptions{})
	if err != nil {
		return nil, "", fmt.Errorf("find the scheduler: no --scheduler-url, no phalanx.dev/scheduler extension in the kubeconfig, and its Lease %s/%s: %w", o.Endpoint.Namespace, o.Endpoint.Lease, err)
	}
	holder := ""
	if lease.Spec.HolderIdentity != nil {
		holder = *lease.Spec.HolderIdentity
	}
	// kube-scheduler's identity is <host name>_<uuid>; in a Deployment the
	// host name is the pod's name.
	podName, _, found := strings.Cut(holder, "_")
	if !found || podName == "" {
		return nil, "", fmt.Errorf("find the scheduler: Lease %s/%s has no holder a pod can be found by (%q): pass --scheduler-url", o.Endpoint.Namespace, o.Endpoint.Lease, holder)
	}
	pod, err := cs.CoreV1().Pods(o.Endpoint.Namespace).Get(ctx, podName, metav1.GetOptions{})
	if err != nil {
		return nil, "", fmt.Errorf("find the scheduler: the Lease holder's pod: %w (pass --scheduler-url)", err)
	}
	if pod.Status.PodIP == "" {
		return nil, "", fmt.Errorf("find the scheduler: pod %s/%s has no IP yet", pod.Namespace, pod.Name)
	}
	url := "https://" + net.JoinHostPort(pod.Status.PodIP, strconv.Itoa(o.Endpoint.Port))
	return &debugapi.Endpoint{Server: url}, "the Lease holder " + pod.Name, nil
}

// fromKubeconfig reads the phalanx.dev/scheduler extension of the current
// context's cluster, nil when there is none.
func (o *Options) fromKubeconfig() (*debugapi.Endpoint, error) {
	raw, err := o.Config.ToRawKubeConfigLoader().RawConfig()
	if err != nil {
		return nil, err
	}
	ctxName := raw.CurrentContext
	if o.Config.Context != nil && *o.Config.Context != "" {
		ctxName = *o.Config.Context
	}
	kctx := raw.Contexts[ctxName]
	if kctx == nil {
		return nil, nil
	}
	clusterName := kctx.Cluster
	if o.Config.ClusterName != nil && *o.Config.ClusterName != "" {
		clusterName = *o.Config.ClusterName
	}
	cluster := raw.Clusters[clusterName]
	if cluster == nil {
		return nil, nil
	}
	ext, ok := cluster.Extensions[debugapi.KubeconfigExtension]
	if !ok {
		return nil, nil
	}
	unknown, ok := ext.(*runtime.Unknown)
	if !ok {
		return nil, fmt.Errorf("kubeconfig cluster %s: extension %s is not JSON", clusterName, debugapi.KubeconfigExtension)
	}
	ep := &debugapi.Endpoint{}
	if err := json.Unmarshal(unknown.Raw, ep); err != nil {
		return nil, fmt.Errorf("kubeconfig cluster %s: extension %s: %w", clusterName, debugapi.KubeconfigExtension, err)
	}
	if ep.Server == "" {
		return nil, fmt.Errorf("kubeconfig cluster %s: extension %s has no server", clusterName, debugapi.KubeconfigExtension)
	}
	return ep, nil
}

// do sends a request and decodes a 200 answer into out, also returning
// the raw body for printers.
func (s *schedulerClient) do(ctx context.Context, method, path string, body any, out any) ([]byte, error) {
	var rd io.Reader
	if body != nil {
		data, err := json.Marshal(body)
		if err != nil {
			return nil, err
		}
		rd = bytes.NewReader(data)
	}
	req, err := http.NewRequestWithContext(ctx, method, s.base+path, rd)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/json")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := s.client.Do(req)
	if err != nil {
		var unknownAuthority x509.UnknownAuthorityError
		if errors.As(err, &unknownAuthority) {
			return nil, fmt.Errorf("%w: the scheduler's certificate is self-signed unless it was given one; pass --scheduler-ca-file, or --scheduler-insecure-skip-tls-verify", err)
		}
		return nil, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, answerError(resp.StatusCode, path, data)
	}
	if err := json.Unmarshal(data, out); err != nil {
		return nil, fmt.Errorf("read the scheduler's answer: %w", err)
	}
	return data, nil
}

func answerError(code int, path string, body []byte) error {
	var e debugapi.Error
	msg := strings.TrimSpace(string(body))
	if json.Unmarshal(body, &e) == nil && e.Message != "" {
		msg = e.Message
	} else {
		// The authorization filter answers with a metav1.Status.
		var st metav1.Status
		if json.Unmarshal(body, &st) == nil && st.Message != "" {
			msg = st.Message
		}
	}
	switch code {
	case http.StatusUnauthorized:
		return fmt.Errorf("the scheduler did not accept your credentials: %s", msg)
	case http.StatusForbidden:
		role := "phalanx-diagnostics"
		if path == debugapi.FitPath {
			// Reading is granted apart from fit, which runs the planner.
			role = "phalanx-diagnostics-fit"
		}
		return fmt.Errorf("the scheduler refused %s: %s (ask for the ClusterRole %s)", path, msg, role)
	}
	return errors.New(msg)
}
