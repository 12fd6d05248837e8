package inspect

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/phalanx-sched/phalanx/pkg/debugapi"
)

// standIn answers every question at once, or, with block set, waits for
// it to close (or the request to end) first. It counts what reached it.
type standIn struct {
	calls   atomic.Int32
	entered chan struct{} // gets a value when a call starts, if set
	block   chan struct{}
}

func (s *standIn) wait(ctx context.Context) error {
	s.calls.Add(1)
	if s.entered != nil {
		s.entered <- struct{}{}
	}
	if s.block == nil {
		return nil
	}
	select {
	case <-s.block:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (s *standIn) Groups(ctx context.Context) *debugapi.GroupList {
	_ = s.wait(ctx)
	return &debugapi.GroupList{}
}

func (s *standIn) Group(ctx context.Context, _, _ string) (*debugapi.GroupList, error) {
	return &debugapi.GroupList{}, s.wait(ctx)
}

func (s *standIn) Explain(ctx context.Context, _, _, _ string) (*debugapi.ExplanationList, error) {
	return &debugapi.ExplanationList{}, s.wait(ctx)
}

func (s *standIn) Fit(ctx context.Context, _ *debugapi.FitRequest) (*debugapi.FitAnswer, error) {
	return &debugapi.FitAnswer{}, s.wait(ctx)
}

func (s *standIn) Top(ctx context.Context, _ []string) (*debugapi.Top, error) {
	return &debugapi.Top{}, s.wait(ctx)
}

// fitBody is a fit request of n pods, padded with pad bytes of labels.
func fitBody(t *testing.T, n, pad int) []byte {
	t.Helper()
	req := debugapi.FitRequest{Namespace: "ns"}
	for i := range n {
		req.Objects = append(req.Objects, json.RawMessage(fmt.Sprintf(`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"w-%d"}}`, i)))
	}
	if pad > 0 {
		req.Objects = append(req.Objects, json.RawMessage(fmt.Sprintf(`{"apiVersion":"scheduling.phalanx.dev/v1alpha1","kind":"PodGroup","metadata":{"name":"g","labels":{"pad":%q}}}`, strings.Repeat("x", pad))))
	}
	data, err := json.Marshal(req)
	require.NoError(t, err)
	return data
}

func topWithKeys(n int) string {
	keys := make([]string, n)
	for i := range keys {
		keys[i] = fmt.Sprintf("example.com/level-%d", i)
	}
	return debugapi.TopPath + "?keys=" + strings.Join(keys, ",")
}

// answer is one response: its code, message and Retry-After.
type answer struct {
	code       int
	message    string
	retryAfter string
}

func do(t *testing.T, h http.Handler, method, path string, body []byte) answer {
	t.Helper()
	got, err := ask(h, method, path, body)
	require.NoError(t, err)
	return got
}

// ask sends one request to h. The client's timeout only ends a test that
// would otherwise hang; no outcome depends on it.
func ask(h http.Handler, method, path string, body []byte) (answer, error) {
	srv := httptest.NewServer(h)
	defer srv.Close()
	req, err := http.NewRequest(method, srv.URL+path, bytes.NewReader(body))
	if err != nil {
		return answer{}, err
	}
	client := srv.Client()
	client.Timeout = time.Minute
	resp, err := client.Do(req)
	if err != nil {
		return answer{}, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return answer{}, err
	}
	var e debugapi.Error
	_ = json.Unmarshal(data, &e)
	return answer{code: resp.StatusCode, message: e.Message, retryAfter: resp.Header.Get("Retry-After")}, nil
}

// TestDiagnosticsRefuseRequestsBeyondTheirLimits: a request larger than
// the limits is refused before it reaches the planner, with a message
// that gives the request's size, the limit, and the flag that sets it;
// one at the limit is answered.
func TestDiagnosticsRefuseRequestsBeyondTheirLimits(t *testing.T) {
	limits := Limits{MaxRequestBytes: 64 << 10, MaxFitPods: 100, MaxTopKeys: 20}
	tests := []struct {
		name   string
		method string
		path   string
		body   []byte
		code   int
		says   []string
	}{
		{name: "top with 20 label keys is answered", method: "GET", path: topWithKeys(20), code: http.StatusOK},
		{name: "top with 21 label keys is refused", method: "GET", path: topWithKeys(21), code: http.StatusBadRequest,
			says: []string{"21 label keys", "at most 20", "--phalanx-max-top-keys"}},
		{name: "a fit of 100 pods is answered", method: "POST", path: debugapi.FitPath, body: fitBody(t, 100, 0), code: http.StatusOK},
		{name: "a fit of 101 pods is refused", method: "POST", path: debugapi.FitPath, body: fitBody(t, 101, 0), code: http.StatusRequestEntityTooLarge,
			says: []string{"101 pods", "at most 100", "--phalanx-max-fit-pods"}},
		{name: "a fit request body over the byte limit is refused", method: "POST", path: debugapi.FitPath, body: fitBody(t, 1, 64<<10), code: http.StatusRequestEntityTooLarge,
			says: []string{"65536 bytes", "--phalanx-max-request-bytes"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := &standIn{}
			got := do(t, newHandler(s, Options{Limits: limits}), tt.method, tt.path, tt.body)
			require.Equal(t, tt.code, got.code, got.message)
			for _, w := range tt.says {
				assert.Contains(t, got.message, w)
			}
			if tt.code == http.StatusOK {
				assert.EqualValues(t, 1, s.calls.Load(), "the request was answered")
			} else {
				assert.Zero(t, s.calls.Load(), "a refused request reached the inspector")
			}
		})
	}
}

// The defaults hold without any configuration: the API server's 3 MiB for a
// body, 20 label keys for top, 1,000 pods for fit.
func TestDiagnosticsLimitsHaveDefaults(t *testing.T) {
	tests := []struct {
		name string
		path string
		body []byte
		code int
	}{
		{name: "top with 21 label keys is refused", path: topWithKeys(21), code: http.StatusBadRequest},
		{name: "a fit of 1,001 pods is refused", path: debugapi.FitPath, body: fitBody(t, 1001, 0), code: http.StatusRequestEntityTooLarge},
		{name: "a fit request body over 3 MiB is refused", path: debugapi.FitPath, body: fitBody(t, 1, 3<<20), code: http.StatusRequestEntityTooLarge},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			method := "GET"
			if tt.body != nil {
				method = "POST"
			}
			s := &standIn{}
			got := do(t, newHandler(s, Options{}), method, tt.path, tt.body)
			assert.Equal(t, tt.code, got.code, got.message)
			assert.Zero(t, s.calls.Load(), "a refused request reached the inspector")
		})
	}
}

// Requests beyond MaxInFlight are refused at once with 429 and a
// Retry-After, rather than queued behind the ones being answered (the
// inspector answers one at a time).
func TestDiagnosticsLimitRequestsInFlight(t *testing.T) {
	s := &standIn{entered: make(chan struct{}, 8), block: make(chan struct{})}
	h := newHandler(s, Options{Limits: Limits{MaxInFlight: 2}})

	codes := make(chan int, 2)
	for range 2 {
		go func() {
			got, _ := ask(h, "GET", debugapi.GroupsPath, nil)
			codes <- got.code
		}()
	}
	<-s.entered
	<-s.entered

	third := make(chan answer, 1)
	go func() {
		got, _ := ask(h, "GET", debugapi.TopPath, nil)
		third <- got
	}()
	select {
	case got := <-third:
		assert.Equal(t, http.StatusTooManyRequests, got.code, got.message)
		assert.Equal(t, "1", got.retryAfter)
		assert.Contains(t, got.message, "2 diagnostics requests")
		assert.Contains(t, got.message, "--phalanx-max-requests-inflight")
	case <-s.entered:
		t.Error("a third request was let through while two were in flight")
	}
	close(s.block)
	assert.Equal(t, http.StatusOK, <-codes)
	assert.Equal(t, http.StatusOK, <-codes)

	t.Run("a slot is free again once a request is answered", func(t *testing.T) {
		got := do(t, h, "GET", debugapi.TopPath, nil)
		assert.Equal(t, http.StatusOK, got.code, got.message)
	})
}

// A request that takes longer than RequestTimeout is answered 503 with a
// message, and the work behind it sees its context end.
func TestDiagnosticsTimeOutSlowRequests(t *testing.T) {
	s := &standIn{block: make(chan struct{})}
	defer close(s.block)
	h := newHandler(s, Options{Limits: Limits{RequestTimeout: 20 * time.Millisecond}})

	got := do(t, h, "GET", debugapi.ExplainPath+"/podgroup/ns/g", nil)

	assert.Equal(t, http.StatusServiceUnavailable, got.code)
	assert.Contains(t, got.message, "did not answer within 20ms")
	assert.Contains(t, got.message, "--phalanx-request-timeout")
}
