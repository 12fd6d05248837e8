package workloadbuilder_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/phalanx-sched/phalanx/apis/scheduling/v1alpha1"
	wb "github.com/phalanx-sched/phalanx/pkg/workloadbuilder"
)

const (
	rackKey  = "topology.phalanx.dev/rack"
	blockKey = "topology.phalanx.dev/block"
	zoneKey  = "topology.kubernetes.io/zone"
)

// preferringItem is a gang of 4 that requires zone and prefers the given
// levels, at spec.scheduling.
func preferringItem(levels ...string) *wb.WorkloadItem {
	it := jobItem()
	it.Input.SchedulingConstraints = wb.At(jobPath.Child("schedulingConstraints"), &wb.WorkloadPodGroupSchedulingConstraints{
		Topology: topology(zoneKey), PreferredTopology: topology(levels...),
	})
	return it
}

func TestPreferredTopologyCompilesIntoTheTemplateAndItsGroup(t *testing.T) {
	opts := everything
	opts.Name, opts.Namespace = "train", "ns"
	b := wb.NewBuilder(preferringItem(rackKey, blockKey), opts)
	require.Empty(t, b.Validate(context.Background(), wb.ValidationInput{}))
	w, err := b.BuildWorkload()
	require.NoError(t, err)
	want := &v1alpha1.PodGroupSchedulingConstraints{Topology: topology(zoneKey), PreferredTopology: topology(rackKey, blockKey)}
	assert.Equal(t, want, w.Spec.PodGroupTemplates[0].SchedulingConstraints)
	pg, err := b.NewPodGroup("train-workers", "workers")
	require.NoError(t, err)
	assert.Equal(t, want, pg.Spec.SchedulingConstraints)
}

func TestPreferredTopologyValidation(t *testing.T) {
	at := jobPath.Child("schedulingConstraints", "preferredTopology")
	for name, tc := range map[string]struct {
		item func() *wb.WorkloadItem
		want []wantErr
	}{
		"an empty key": {func() *wb.WorkloadItem { return preferringItem(rackKey, "") },
			[]wantErr{{field.ErrorTypeRequired, at.Index(1).Child("key").String(), "a node label key, such as topology.phalanx.dev/rack"}}},
		"a key that is no label key": {func() *wb.WorkloadItem { return preferringItem("rack key") },
			[]wantErr{{field.ErrorTypeInvalid, at.Index(0).Child("key").String(), ""}}},
		"a level twice": {func() *wb.WorkloadItem { return preferringItem(rackKey, rackKey) },
			[]wantErr{{field.ErrorTypeDuplicate, at.Index(1).String(), ""}}},
		"the required key": {func() *wb.WorkloadItem { return preferringItem(rackKey, zoneKey) },
			[]wantErr{{field.ErrorTypeInvalid, at.Index(1).Child("key").String(), wb.MsgPreferredIsRequired}}},
		"five levels": {func() *wb.WorkloadItem { return preferringItem("a", "b", "c", "d", "e") },
			[]wantErr{{field.ErrorTypeTooMany, at.String(), ""}}},
		"the required key from a default": {func() *wb.WorkloadItem {
			it := preferringItem(rackKey)
			it.Input.SchedulingConstraints.Value.Topology = nil
			it.Defaults = &wb.Config{Topology: topology(rackKey)}
			return it
		}, []wantErr{{field.ErrorTypeInvalid, at.Index(0).Child("key").String(), wb.MsgPreferredIsRequired}}},
	} {
		t.Run(name, func(t *testing.T) {
			errs := wb.NewBuilder(tc.item(), everything).Validate(context.Background(), wb.ValidationInput{})
			assert.Equal(t, tc.want, summarize(errs, tc.want))
		})
	}
}

// The levels are constraints: frozen once the groups exist, like the key.
func TestPreferredTopologyIsImmutable(t *testing.T) {
	old := preferringItem(rackKey)
	for name, cur := range map[string]*wb.WorkloadItem{
		"added":   preferringItem(rackKey, blockKey),
		"removed": preferringItem(),
		"changed": preferringItem(blockKey),
	} {
		errs := wb.NewBuilder(cur, everything).Validate(context.Background(), wb.ValidationInput{OldRoot: old})
		require.Len(t, errs, 1, name)
		assert.Equal(t, wb.MsgConstraintsImmutable, errs[0].Detail, name)
		assert.Equal(t, jobPath.Child("schedulingConstraints").String(), errs[0].Field, name)
	}
	assert.Empty(t, wb.NewBuilder(preferringItem(rackKey), everything).Validate(context.Background(), wb.ValidationInput{OldRoot: old}))
}

// A composite template has no preferred levels; a default that gives it
// some is the controller's bug and stops the build.
func TestPreferredTopologyIsNotForComposites(t *testing.T) {
	root := gangOfGangs()
	root.Defaults = &wb.Config{PreferredTopology: topology(rackKey)}
	_, err := wb.NewBuilder(root, everything).BuildWorkload()
	assert.ErrorContains(t, err, "a composite template cannot hold preferred topology levels")
}
