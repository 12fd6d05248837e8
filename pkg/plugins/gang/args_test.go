package gang

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/runtime"
)

func rawArgs(contentType, raw string) runtime.Object {
	return &runtime.Unknown{Raw: []byte(raw), ContentType: contentType}
}

func TestDecodeArgs(t *testing.T) {
	tests := []struct {
		name    string
		obj     runtime.Object
		want    int64
		errHas  []string
		timeout time.Duration
	}{
		{
			name: "no args at all default to 60 seconds",
			obj:  nil,
			want: 60, timeout: time.Minute,
		},
		{
			name: "args without a body default to 60 seconds",
			obj:  &runtime.Unknown{},
			want: 60, timeout: time.Minute,
		},
		{
			name: "an empty object defaults to 60 seconds",
			obj:  rawArgs(runtime.ContentTypeJSON, `{}`),
			want: 60,
		},
		{
			name: "zero means the default",
			obj:  rawArgs(runtime.ContentTypeJSON, `{"permitWaitingTimeSeconds":0}`),
			want: 60,
		},
		{
			name: "a value in range is kept",
			obj:  rawArgs(runtime.ContentTypeJSON, `{"permitWaitingTimeSeconds":5}`),
			want: 5, timeout: 5 * time.Second,
		},
		{
			name: "the lower bound 1 is accepted",
			obj:  rawArgs(runtime.ContentTypeJSON, `{"permitWaitingTimeSeconds":1}`),
			want: 1,
		},
		{
			// The framework never lets a Permit wait exceed 15 minutes.
			name: "the upper bound 3600 is accepted and waits as long as the framework allows",
			obj:  rawArgs(runtime.ContentTypeJSON, `{"permitWaitingTimeSeconds":3600}`),
			want: 3600, timeout: 15 * time.Minute,
		},
		{
			name: "YAML args are decoded",
			obj:  rawArgs(runtime.ContentTypeYAML, "permitWaitingTimeSeconds: 120\n"),
			want: 120,
		},
		{
			name: "JSON is assumed when no content type is given",
			obj:  rawArgs("", `{"permitWaitingTimeSeconds":7}`),
			want: 7,
		},
		{
			name:   "a negative value is an error naming the field and the range",
			obj:    rawArgs(runtime.ContentTypeJSON, `{"permitWaitingTimeSeconds":-1}`),
			errHas: []string{"permitWaitingTimeSeconds=-1", "1 to 3600", Name},
		},
		{
			name:   "a value above 3600 is an error naming the field and the range",
			obj:    rawArgs(runtime.ContentTypeJSON, `{"permitWaitingTimeSeconds":3601}`),
			errHas: []string{"permitWaitingTimeSeconds=3601", "1 to 3600", Name},
		},
		{
			name:   "a value of the wrong type is a decode error",
			obj:    rawArgs(runtime.ContentTypeJSON, `{"permitWaitingTimeSeconds":"5"}`),
			errHas: []string{"decode", Name},
		},
		{
			name:   "malformed JSON is a decode error",
			obj:    rawArgs(runtime.ContentTypeJSON, `{`),
			errHas: []string{"decode", Name},
		},
		{
			name:   "an unsupported content type is a decode error",
			obj:    rawArgs("application/vnd.kubernetes.protobuf", `{}`),
			errHas: []string{"decode", Name},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := decodeArgs(tt.obj)
			if tt.errHas != nil {
				require.Error(t, err)
				for _, s := range tt.errHas {
					assert.Contains(t, err.Error(), s)
				}
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, got.PermitWaitingTimeSeconds)
			if tt.timeout != 0 {
				assert.Equal(t, tt.timeout, got.permitTimeout())
			}
		})
	}
}

func TestDecodeMaxPermitWaitingTime(t *testing.T) {
	tests := []struct {
		name        string
		raw         string
		idle, limit time.Duration
		errHas      []string
	}{
		{name: "unset: ten minutes in all, a minute idle", raw: `{}`, idle: time.Minute, limit: 10 * time.Minute},
		{name: "unset with a long idle timeout: the idle timeout", raw: `{"permitWaitingTimeSeconds":700}`, idle: 700 * time.Second, limit: 700 * time.Second},
		{name: "unset with an idle timeout above the framework's limit: the limit", raw: `{"permitWaitingTimeSeconds":3600}`, idle: 15 * time.Minute, limit: 15 * time.Minute},
		{name: "set", raw: `{"permitWaitingTimeSeconds":2,"maxPermitWaitingTimeSeconds":30}`, idle: 2 * time.Second, limit: 30 * time.Second},
		{name: "above the framework's limit", raw: `{"maxPermitWaitingTimeSeconds":901}`, errHas: []string{"maxPermitWaitingTimeSeconds=901", "1 to 900"}},
		{name: "below the idle timeout", raw: `{"permitWaitingTimeSeconds":60,"maxPermitWaitingTimeSeconds":30}`, errHas: []string{"maxPermitWaitingTimeSeconds=30", "below permitWaitingTimeSeconds=60"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := decodeArgs(rawArgs(runtime.ContentTypeJSON, tt.raw))
			if tt.errHas != nil {
				require.Error(t, err)
				for _, s := range tt.errHas {
					assert.Contains(t, err.Error(), s)
				}
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.idle, got.permitTimeout())
			assert.Equal(t, tt.limit, got.permitLimit())
		})
	}
}

func TestDecodeBindConcurrency(t *testing.T) {
	got, err := decodeArgs(nil)
	require.NoError(t, err)
	assert.Equal(t, int32(defaultBindConcurrency), got.BindConcurrency, "unset means the default")

	got, err = decodeArgs(rawArgs(runtime.ContentTypeYAML, "bindConcurrency: 8\n"))
	require.NoError(t, err)
	assert.Equal(t, int32(8), got.BindConcurrency)

	for _, v := range []string{"-1", "10001"} {
		_, err := decodeArgs(rawArgs(runtime.ContentTypeJSON, `{"bindConcurrency":`+v+`}`))
		require.Error(t, err, v)
		assert.Contains(t, err.Error(), "bindConcurrency="+v)
		assert.Contains(t, err.Error(), "1 to 10000")
	}
}
