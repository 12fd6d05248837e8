package main

import (
	"fmt"
	"net/http"
	"time"

	"github.com/spf13/pflag"
	genericfilters "k8s.io/apiserver/pkg/endpoints/filters"
	apirequest "k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/apiserver/pkg/server"
	serverfilters "k8s.io/apiserver/pkg/server/filters"
	"k8s.io/apiserver/pkg/server/options"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/component-base/metrics/legacyregistry"
)

// metricsServing serves /metrics over HTTPS to callers the API server
// authenticates (TokenReview, or a client certificate signed by the
// cluster's client CA) and authorizes (SubjectAccessReview for get on the
// non-resource URL /metrics), as kube-scheduler's secure port does. Metrics
// name the cluster's workloads and queue depths; a plain-HTTP port would
// show them to every pod that can reach the controller.
type metricsServing struct {
	secure *options.SecureServingOptions
	authn  *options.DelegatingAuthenticationOptions
	authz  *options.DelegatingAuthorizationOptions
}

func newMetricsServing() *metricsServing {
	s := &metricsServing{
		secure: options.NewSecureServingOptions(),
		authn:  options.NewDelegatingAuthenticationOptions(),
		authz:  options.NewDelegatingAuthorizationOptions(),
	}
	s.secure.BindPort = 8443
	// An empty directory keeps the self-signed certificate in memory: the
	// container's root filesystem is read-only.
	s.secure.ServerCert.CertDirectory = ""
	s.secure.ServerCert.PairName = "phalanx-controller"
	// Without the client-CA ConfigMap (a cluster that does not publish it)
	// bearer tokens still work.
	s.authn.TolerateInClusterLookupFailure = true
	return s
}

func (s *metricsServing) addFlags(fs *pflag.FlagSet) {
	s.secure.AddFlags(fs)
	s.authn.AddFlags(fs)
	s.authz.AddFlags(fs)
}

// start begins serving; kubeconfig is used for the reviews unless the
// authentication/authorization kubeconfig flags say otherwise.
func (s *metricsServing) start(kubeconfig string, stop <-chan struct{}) error {
	if s.authn.RemoteKubeConfigFile == "" {
		s.authn.RemoteKubeConfigFile = kubeconfig
	}
	if s.authz.RemoteKubeConfigFile == "" {
		s.authz.RemoteKubeConfigFile = kubeconfig
	}
	if err := s.secure.MaybeDefaultWithSelfSignedCerts("localhost", nil, nil); err != nil {
		return fmt.Errorf("self-signed serving certificate: %w", err)
	}
	var serving *server.SecureServingInfo
	if err := s.secure.ApplyTo(&serving); err != nil {
		return fmt.Errorf("secure serving: %w", err)
	}
	var authn server.AuthenticationInfo
	if err := s.authn.ApplyTo(&authn, serving, nil); err != nil {
		return fmt.Errorf("delegated authentication: %w", err)
	}
	var authz server.AuthorizationInfo
	if err := s.authz.ApplyTo(&authz); err != nil {
		return fmt.Errorf("delegated authorization: %w", err)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", legacyregistry.Handler())
	// Outermost first: request info feeds both checks; identity is
	// established before it is authorized.
	var h http.Handler = mux
	h = genericfilters.WithAuthorization(h, authz.Authorizer, scheme.Codecs)
	h = genericfilters.WithAuthentication(h, authn.Authenticator, genericfilters.Unauthorized(scheme.Codecs), nil, nil)
	resolver := &apirequest.RequestInfoFactory{}
	h = genericfilters.WithRequestInfo(h, resolver)
	h = serverfilters.WithPanicRecovery(h, resolver)
	if _, _, err := serving.Serve(h, 5*time.Second, stop); err != nil {
		return fmt.Errorf("serve metrics: %w", err)
	}
	return nil
}
