package topology

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	"github.com/phalanx-sched/phalanx/pkg/placement"
)

func TestDecodeArgs(t *testing.T) {
	cases := []struct {
		name    string
		raw     string
		want    pluginArgs
		policy  placement.DomainPolicy
		wantErr string
	}{
		{name: "no args default to BestFit and 30 seconds", raw: "", want: pluginArgs{DomainPolicy: "BestFit", PlanTTLSeconds: 30, RankLevels: defaultRankLevels}, policy: placement.BestFit},
		{name: "WorstFit is accepted", raw: `{"domainPolicy":"WorstFit","planTTLSeconds":5}`, want: pluginArgs{DomainPolicy: "WorstFit", PlanTTLSeconds: 5, RankLevels: defaultRankLevels}, policy: placement.WorstFit},
		{name: "FirstFit is accepted", raw: `{"domainPolicy":"FirstFit"}`, want: pluginArgs{DomainPolicy: "FirstFit", PlanTTLSeconds: 30, RankLevels: defaultRankLevels}, policy: placement.FirstFit},
		{name: "rank levels are taken as given", raw: `{"rankLevels":["example.com/nvlink-domain","topology.phalanx.dev/rack"]}`, want: pluginArgs{DomainPolicy: "BestFit", PlanTTLSeconds: 30, RankLevels: []string{"example.com/nvlink-domain", "topology.phalanx.dev/rack"}}, policy: placement.BestFit},
		{name: "a rank level must be a label key", raw: `{"rankLevels":["not a key"]}`, wantErr: `rankLevels: "not a key"`},
		{name: "an unknown policy names the field", raw: `{"domainPolicy":"Random"}`, wantErr: `domainPolicy "Random" is not supported`},
		{name: "a TTL above 600 is rejected", raw: `{"planTTLSeconds":601}`, wantErr: "planTTLSeconds=601 is out of range"},
		{name: "a negative TTL is rejected", raw: `{"planTTLSeconds":-1}`, wantErr: "planTTLSeconds=-1 is out of range"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var obj runtime.Object
			if tc.raw != "" {
				obj = &runtime.Unknown{Raw: []byte(tc.raw), ContentType: runtime.ContentTypeJSON}
			}
			args, opts, err := decodeArgs(obj)
			if tc.wantErr != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tc.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, args)
			assert.Equal(t, tc.policy, opts.DomainPolicy)
			assert.Equal(t, tc.want.RankLevels, opts.RankLevels)
		})
	}
}

func testPod(name string, cpu string, node string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: types.UID("uid-" + name)},
		Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{
			Name: "c", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu)}},
		}}},
	}
}
