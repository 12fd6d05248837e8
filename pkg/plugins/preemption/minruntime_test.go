package preemption

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
)

var t0 = time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)

func at(sec int) time.Time { return t0.Add(time.Duration(sec) * time.Second) }

func TestProtectedUntil(t *testing.T) {
	const rt = 10 * time.Minute
	tests := []struct {
		name string
		recs []runRecord
		want []time.Time
	}{
		{
			name: "a pod alone is protected from its own bind",
			recs: []runRecord{{bound: at(5), runtime: rt}},
			want: []time.Time{at(5).Add(rt)},
		},
		{
			name: "a gang's members are protected from the bind that made it whole",
			recs: []runRecord{
				{group: "g", minCount: 3, bound: at(1), runtime: rt},
				{group: "g", minCount: 3, bound: at(30), runtime: rt},
				{group: "g", minCount: 3, bound: at(2), runtime: rt},
			},
			want: []time.Time{at(30).Add(rt), at(30).Add(rt), at(30).Add(rt)},
		},
		{
			name: "a member beyond the minimum, bound later, is protected from its own bind",
			recs: []runRecord{
				{group: "g", minCount: 2, bound: at(1), runtime: rt},
				{group: "g", minCount: 2, bound: at(2), runtime: rt},
				{group: "g", minCount: 2, bound: at(100), runtime: rt},
			},
			want: []time.Time{at(2).Add(rt), at(2).Add(rt), at(100).Add(rt)},
		},
		{
			name: "a replaced member makes the gang whole again at its bind",
			recs: []runRecord{
				{group: "g", minCount: 2, bound: at(1), runtime: rt},
				{group: "g", minCount: 2, bound: at(500), runtime: rt},
			},
			want: []time.Time{at(500).Add(rt), at(500).Add(rt)},
		},
		{
			name: "a gang below its minimum starts from its latest bind",
			recs: []runRecord{
				{group: "g", minCount: 4, bound: at(1), runtime: rt},
				{group: "g", minCount: 4, bound: at(7), runtime: rt},
			},
			want: []time.Time{at(7).Add(rt), at(7).Add(rt)},
		},
		{
			name: "a pod only assumed, or with no minimum runtime, is not protected",
			recs: []runRecord{
				{group: "g", minCount: 1, runtime: rt},
				{group: "h", minCount: 1, bound: at(1)},
			},
			want: []time.Time{{}, {}},
		},
		{
			name: "groups are apart",
			recs: []runRecord{
				{group: "g", minCount: 1, bound: at(1), runtime: rt},
				{group: "h", minCount: 1, bound: at(9), runtime: time.Minute},
			},
			want: []time.Time{at(1).Add(rt), at(9).Add(time.Minute)},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, protectedUntil(tt.recs))
		})
	}
}

func TestSurplusMembers(t *testing.T) {
	all := func(n int) []bool {
		out := make([]bool, n)
		for i := range out {
			out[i] = true
		}
		return out
	}
	tests := []struct {
		name     string
		recs     []runRecord
		eligible []bool
		want     []bool
	}{
		{
			name: "the members bound last beyond the minimum are surplus",
			recs: []runRecord{
				{group: "g", minCount: 2, bound: at(1)}, {group: "g", minCount: 2, bound: at(40)},
				{group: "g", minCount: 2, bound: at(2)}, {group: "g", minCount: 2, bound: at(30)},
			},
			eligible: all(4),
			want:     []bool{false, true, false, true},
		},
		{
			name:     "a gang at its minimum, a group that is no gang and a pod alone have none",
			recs:     []runRecord{{group: "g", minCount: 2, bound: at(1)}, {group: "g", minCount: 2, bound: at(2)}, {group: "b", bound: at(1)}, {bound: at(1)}},
			eligible: all(4),
			want:     []bool{false, false, false, false},
		},
		{
			name: "members that may not be evicted still count toward the gang, and the surplus falls on the others",
			recs: []runRecord{
				{group: "g", minCount: 1, bound: at(1)}, {group: "g", minCount: 1, bound: at(50)}, {group: "g", minCount: 1, bound: at(2)},
			},
			eligible: []bool{true, false, true},
			want:     []bool{true, false, true},
		},
		{
			name:     "a lowered minimum makes more surplus at once",
			recs:     []runRecord{{group: "g", minCount: 1, bound: at(1)}, {group: "g", minCount: 1, bound: at(2)}, {group: "g", minCount: 1}},
			eligible: all(3),
			want:     []bool{false, true, true},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, surplusMembers(tt.recs, tt.eligible))
		})
	}
}

func TestMinRuntimeResolution(t *testing.T) {
	d := func(s int) *time.Duration { v := time.Duration(s) * time.Second; return &v }
	rp := runtimePolicy{byDefault: 60 * time.Second, cap: time.Hour}
	assert.Equal(t, 60*time.Second, rp.resolve(nil, nil), "the profile's default")
	assert.Equal(t, 120*time.Second, rp.resolve(nil, d(120)), "the PriorityClass's over the profile's")
	assert.Equal(t, 5*time.Second, rp.resolve(d(5), d(120)), "the group's over the PriorityClass's")
	assert.Equal(t, time.Duration(0), rp.resolve(d(0), d(120)), "a group may declare none")
	assert.Equal(t, time.Hour, rp.resolve(d(86400), nil), "a tenant's value is capped")
	assert.Equal(t, time.Hour, rp.resolve(nil, d(86400)), "so is a PriorityClass's")
}

func TestDecodeArgs(t *testing.T) {
	args, err := decodeArgs(nil)
	require.NoError(t, err)
	assert.Equal(t, runtimePolicy{cap: time.Hour}, args.runtimePolicy())

	decode := func(raw string) (pluginArgs, error) { return decodeArgs(&runtime.Unknown{Raw: []byte(raw)}) }
	args, err = decode(`{"minRuntimeSeconds": 7200}`)
	require.NoError(t, err)
	assert.Equal(t, ptr.To[int64](7200), args.MaxMinRuntimeSeconds, "a default above the default cap raises the cap")
	_, err = decode(`{"minRuntimeSeconds": 60, "maxMinRuntimeSeconds": 0}`)
	require.Error(t, err, "a default above the cap")
	_, err = decode(`{"maxMinRuntimeSeconds": 0}`)
	require.NoError(t, err, "a cap of 0 turns minimum runtimes off")
	_, err = decode(`{"maxMinRuntimeSeconds": 99999999}`)
	require.Error(t, err)
}
