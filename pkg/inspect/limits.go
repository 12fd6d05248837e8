package inspect

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/phalanx-sched/phalanx/pkg/debugapi"
)

// The diagnostics run inside the scheduler's process, on its CPU and
// memory, and the inspector answers one request at a time (the requests
// share its snapshot). Without limits one caller could stall scheduling
// (a fit of 20,000 pods runs the planner and the victim search over all of
// them) or pile up goroutines waiting for their turn. Limits bounds each
// request's size and time, and how many are taken at once; what is beyond
// them is refused before it reaches the inspector, with a message naming
// the limit and the flag that sets it.

// Flags of phalanx-scheduler that set the Limits; the refusals name them.
const (
	FlagMaxRequestBytes     = "phalanx-max-request-bytes"
	FlagMaxFitPods          = "phalanx-max-fit-pods"
	FlagMaxTopKeys          = "phalanx-max-top-keys"
	FlagRequestTimeout      = "phalanx-request-timeout"
	FlagMaxRequestsInflight = "phalanx-max-requests-inflight"
)

// Limits bound what callers of the diagnostics can make the scheduler do.
// A zero field takes its default (DefaultLimits).
type Limits struct {
	// MaxRequestBytes bounds a request's body; only fit has one.
	MaxRequestBytes int64
	// MaxFitPods bounds the pods of one fit request, every one of which
	// the planner and the victim search take.
	MaxFitPods int
	// MaxTopKeys bounds the node label keys of one top request: each is a
	// pass over every node.
	MaxTopKeys int
	// RequestTimeout bounds a request, including its wait for the requests
	// answered before it.
	RequestTimeout time.Duration
	// MaxInFlight bounds the requests answered or waiting at once; the
	// ones beyond are refused with 429 rather than queued.
	MaxInFlight int
}

// DefaultLimits: the API server's default body limit (3 MiB, which holds
// about a thousand pods as kubectl phalanx fit sends them, a few KiB each
// after admission); a thousand pods per fit; more label keys for top than
// any topology has levels; a timeout well above what a fit of a thousand
// pods takes; and a few callers at once, since they take turns anyway.
func DefaultLimits() Limits {
	return Limits{
		MaxRequestBytes: 3 << 20,
		MaxFitPods:      1000,
		MaxTopKeys:      20,
		RequestTimeout:  30 * time.Second,
		MaxInFlight:     4,
	}
}

// orDefault fills the zero fields of l from DefaultLimits.
func (l Limits) orDefault() Limits {
	d := DefaultLimits()
	if l.MaxRequestBytes == 0 {
		l.MaxRequestBytes = d.MaxRequestBytes
	}
	if l.MaxFitPods == 0 {
		l.MaxFitPods = d.MaxFitPods
	}
	if l.MaxTopKeys == 0 {
		l.MaxTopKeys = d.MaxTopKeys
	}
	if l.RequestTimeout == 0 {
		l.RequestTimeout = d.RequestTimeout
	}
	if l.MaxInFlight == 0 {
		l.MaxInFlight = d.MaxInFlight
	}
	return l
}

// Validate says which limit is not positive, naming its flag.
func (l Limits) Validate() error {
	var errs []error
	for _, f := range []struct {
		flag string
		ok   bool
		v    any
	}{
		{FlagMaxRequestBytes, l.MaxRequestBytes > 0, l.MaxRequestBytes},
		{FlagMaxFitPods, l.MaxFitPods > 0, l.MaxFitPods},
		{FlagMaxTopKeys, l.MaxTopKeys > 0, l.MaxTopKeys},
		{FlagRequestTimeout, l.RequestTimeout > 0, l.RequestTimeout},
		{FlagMaxRequestsInflight, l.MaxInFlight > 0, l.MaxInFlight},
	} {
		if !f.ok {
			errs = append(errs, fmt.Errorf("--%s=%v: must be positive", f.flag, f.v))
		}
	}
	return errors.Join(errs...)
}

// limitInFlight refuses a request while max others are being answered.
// It sits inside withTimeout, so a request abandoned by its timeout keeps
// its slot until the inspector is really done with it: the slots bound
// the work, not just the waiting callers.
func limitInFlight(h http.Handler, max int) http.Handler {
	slots := make(chan struct{}, max)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case slots <- struct{}{}:
		default:
			w.Header().Set("Retry-After", "1")
			reply(w, nil, &requestError{code: http.StatusTooManyRequests, msg: fmt.Sprintf(
				"%d diagnostics requests are being answered, the most this scheduler takes at once (--%s); retry shortly", max, FlagMaxRequestsInflight)})
			return
		}
		defer func() { <-slots }()
		h.ServeHTTP(w, r)
	})
}

// withTimeout answers 503 when h has not answered within d, and ends the
// request's context then, so that work which checks it stops.
func withTimeout(h http.Handler, d time.Duration) http.Handler {
	msg, _ := json.Marshal(debugapi.Error{Message: fmt.Sprintf(
		"the scheduler did not answer within %s (--%s): it answers diagnostics one at a time, so it may be busy with others; retry, or ask an operator to raise the flag", d, FlagRequestTimeout)})
	return http.TimeoutHandler(h, d, string(msg))
}

// readBody reads r's body, refusing one of more than max bytes.
func readBody(w http.ResponseWriter, r *http.Request, max int64) ([]byte, error) {
	if r.ContentLength > max {
		return nil, &requestError{code: http.StatusRequestEntityTooLarge, msg: fmt.Sprintf(
			"the request body has %d bytes; this scheduler takes at most %d bytes (--%s)", r.ContentLength, max, FlagMaxRequestBytes)}
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, max))
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		return nil, &requestError{code: http.StatusRequestEntityTooLarge, msg: fmt.Sprintf(
			"the request body has more than %d bytes, the most this scheduler takes (--%s)", max, FlagMaxRequestBytes)}
	}
	return body, err
}

// fitPods counts the pods of a fit request, refusing it when there are
// more than max. Only each object's kind is read here; the inspector
// decodes them in full.
func fitPods(req *debugapi.FitRequest, max int) error {
	n := 0
	for _, raw := range req.Objects {
		var tm struct {
			APIVersion string `json:"apiVersion"`
			Kind       string `json:"kind"`
		}
		if json.Unmarshal(raw, &tm) == nil && tm.APIVersion == "v1" && tm.Kind == "Pod" {
			n++
		}
	}
	if n > max {
		return &requestError{code: http.StatusRequestEntityTooLarge, msg: fmt.Sprintf(
			"the fit request has %d pods; this scheduler plans at most %d per request (--%s): fit part of the gang, or ask an operator to raise the flag", n, max, FlagMaxFitPods)}
	}
	return nil
}

// labelKeys reads top's label keys, refusing more than max.
func labelKeys(r *http.Request, max int) ([]string, error) {
	k := r.URL.Query().Get("keys")
	if k == "" {
		return nil, nil
	}
	keys := strings.Split(k, ",")
	if len(keys) > max {
		return nil, badRequest("top was asked for %d label keys; this scheduler takes at most %d (--%s)", len(keys), max, FlagMaxTopKeys)
	}
	return keys, nil
}
