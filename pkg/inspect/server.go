package inspect

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"k8s.io/apiserver/pkg/authentication/authenticator"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	genericapifilters "k8s.io/apiserver/pkg/endpoints/filters"
	apirequest "k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/apiserver/pkg/server"
	genericfilters "k8s.io/apiserver/pkg/server/filters"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/klog/v2"

	"github.com/phalanx-sched/phalanx/pkg/debugapi"
)

// Handler serves the inspector's answers under debugapi.Prefix. It checks
// no credentials: Secure adds the scheduler's authentication and
// authorization in front of it.
func (in *Inspector) Handler() http.Handler { return newHandler(in, in.opts) }

// answerer is what the handler asks: an Inspector, or a stand-in in tests.
type answerer interface {
	Groups(ctx context.Context) *debugapi.GroupList
	Group(ctx context.Context, namespace, name string) (*debugapi.GroupList, error)
	Explain(ctx context.Context, kind, namespace, name string) (*debugapi.ExplanationList, error)
	Fit(ctx context.Context, req *debugapi.FitRequest) (*debugapi.FitAnswer, error)
	Top(ctx context.Context, keys []string) (*debugapi.Top, error)
}

// newHandler serves in's answers within opts.Limits.
func newHandler(in answerer, opts Options) http.Handler {
	lim := opts.Limits.orDefault()
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+debugapi.GroupsPath, func(w http.ResponseWriter, r *http.Request) {
		reply(w, in.Groups(r.Context()), nil)
	})
	mux.HandleFunc("GET "+debugapi.GroupsPath+"/{namespace}/{name}", func(w http.ResponseWriter, r *http.Request) {
		g, err := in.Group(r.Context(), r.PathValue("namespace"), r.PathValue("name"))
		reply(w, g, err)
	})
	mux.HandleFunc("GET "+debugapi.ExplainPath+"/{kind}/{namespace}/{name}", func(w http.ResponseWriter, r *http.Request) {
		e, err := in.Explain(r.Context(), r.PathValue("kind"), r.PathValue("namespace"), r.PathValue("name"))
		reply(w, e, err)
	})
	mux.HandleFunc("POST "+debugapi.FitPath, func(w http.ResponseWriter, r *http.Request) {
		body, err := readBody(w, r, lim.MaxRequestBytes)
		req := &debugapi.FitRequest{}
		if err == nil {
			if jerr := json.Unmarshal(body, req); jerr != nil {
				err = badRequest("read the fit request: %v", jerr)
			}
		}
		if err == nil {
			err = fitPods(req, lim.MaxFitPods)
		}
		if err != nil {
			reply(w, nil, err)
			return
		}
		a, err := in.Fit(r.Context(), req)
		reply(w, a, err)
	})
	mux.HandleFunc("GET "+debugapi.TopPath, func(w http.ResponseWriter, r *http.Request) {
		keys, err := labelKeys(r, lim.MaxTopKeys)
		if err != nil {
			reply(w, nil, err)
			return
		}
		t, err := in.Top(r.Context(), keys)
		reply(w, t, err)
	})
	h := http.Handler(mux)
	if opts.Leading != nil {
		h = leaderOnly(mux, opts)
	}
	return withTimeout(limitInFlight(h, lim.MaxInFlight), lim.RequestTimeout)
}

// leaderOnly answers only on the leading replica. A standby replica's
// caches may be warm, but it plans and reserves nothing: its answers would
// describe a scheduler that is not running.
func leaderOnly(mux http.Handler, opts Options) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		leading, leader, err := opts.Leading(r.Context())
		if err != nil {
			reply(w, nil, &requestError{code: http.StatusServiceUnavailable, msg: fmt.Sprintf("cannot tell whether this replica leads: %v", err)})
			return
		}
		if !leading {
			reply(w, nil, &requestError{code: http.StatusServiceUnavailable, msg: fmt.Sprintf("%s is not the leading replica; %q is: ask it", opts.Identity, leader)})
			return
		}
		mux.ServeHTTP(w, r)
	})
}

func reply(w http.ResponseWriter, v any, err error) {
	w.Header().Set("Content-Type", "application/json")
	if err != nil {
		code := http.StatusInternalServerError
		var re *requestError
		if errors.As(err, &re) {
			code = re.code
		}
		w.WriteHeader(code)
		_ = json.NewEncoder(w).Encode(debugapi.Error{Message: err.Error()})
		return
	}
	_ = json.NewEncoder(w).Encode(v)
}

// Secure puts authentication and authorization in front of h as
// kube-scheduler does for its own secure port: a request is authenticated
// by client certificate or token (TokenReview) and authorized as a
// non-resource URL with its lower-case HTTP method as verb (get, post)
// through SubjectAccessReview, the check /metrics gets.
func Secure(h http.Handler, authn authenticator.Request, authz authorizer.Authorizer) http.Handler {
	info := &apirequest.RequestInfoFactory{}
	h = genericapifilters.WithAuthorization(h, authz, scheme.Codecs)
	h = genericapifilters.WithAuthentication(h, authn, genericapifilters.Unauthorized(scheme.Codecs), nil, nil)
	h = genericapifilters.WithRequestInfo(h, info)
	h = genericapifilters.WithCacheControl(h)
	h = genericfilters.WithPanicRecovery(h, info)
	return h
}

// Serve serves h over HTTPS on listener with base's certificates and TLS
// settings until ctx is done. It returns once serving started.
func Serve(ctx context.Context, base *server.SecureServingInfo, listener net.Listener, h http.Handler) error {
	info := *base
	info.Listener = listener
	_, _, err := info.Serve(h, 5*time.Second, ctx.Done())
	if err != nil {
		return fmt.Errorf("serve %s on %s: %w", debugapi.Prefix, listener.Addr(), err)
	}
	klog.FromContext(ctx).Info("Serving Phalanx diagnostics", "address", listener.Addr().String(), "path", debugapi.Prefix)
	return nil
}
