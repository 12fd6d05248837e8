package topology

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/phalanx-sched/phalanx/pkg/reservation"
)

// TestReserveAfterAnnotationOnlyLengthensTheWait: the group's own
// annotation may make its gang wait longer than the configured
// afterSeconds before a hold, never shorter.
func TestReserveAfterAnnotationOnlyLengthensTheWait(t *testing.T) {
	cases := []struct {
		name       string
		annotation string // "" for none
		waited     time.Duration
		held       bool
	}{
		{name: "without the annotation a gang that waited less than afterSeconds holds nothing", waited: 599 * time.Second},
		{name: "without the annotation a gang that waited afterSeconds holds a rack", waited: 600 * time.Second, held: true},
		{name: "an annotation of 0 does not let a gang hold before afterSeconds", annotation: "0", waited: time.Minute},
		{name: "an annotation of 0 leaves the configured wait", annotation: "0", waited: 600 * time.Second, held: true},
		{name: "an annotation shorter than afterSeconds does not shorten it", annotation: "300", waited: 300 * time.Second},
		{name: "an annotation longer than afterSeconds makes the gang wait longer", annotation: "1200", waited: 600 * time.Second},
		{name: "a gang that waited what its longer annotation asks holds a rack", annotation: "1200", waited: 1200 * time.Second, held: true},
		{name: "an annotation of -1 never lets the gang hold", annotation: "-1", waited: 24 * time.Hour},
		{name: "an annotation that is not a number leaves the configured wait", annotation: "soon", waited: 600 * time.Second, held: true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			w := newResvWorld(t, 4, reservation.Args{AfterSeconds: 600})
			var ann map[string]string
			if c.annotation != "" {
				ann = map[string]string{reservation.ReserveAfterAnnotation: c.annotation}
			}
			w.planFails(w.gang("big", testRackKey, w.now.Add(-c.waited), ann))
			if c.held {
				assert.Len(t, w.refused(), 2, "a rack held")
			} else {
				assert.Empty(t, w.refused(), "a rack held")
			}
		})
	}
}

// TestCooldownSurvivesRecreatingTheGroup: a gang whose hold expired may
// not hold again for maxHoldSeconds, and deleting its PodGroup and
// creating it again under the same name does not end that wait. Other
// groups are not affected, and the cooldown is forgotten once it passed.
func TestCooldownSurvivesRecreatingTheGroup(t *testing.T) {
	const hold = 900 * time.Second
	cases := []struct {
		name     string
		recreate string // the name of the group created after the expiry
		cooled   bool
	}{
		{name: "a group re-created under the same name waits out the cooldown", recreate: "big", cooled: true},
		{name: "a group of another name holds as soon as it waited afterSeconds", recreate: "other"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			w := newResvWorld(t, 4, reservation.Args{AfterSeconds: 60, MaxHoldSeconds: int64(hold / time.Second)})
			w.planFails(w.gang("big", testRackKey, w.now.Add(-time.Hour), nil))
			require.Len(t, w.refused(), 2, "held")
			w.after(hold)
			require.Empty(t, w.refused(), "held past maxHoldSeconds")

			w.deleteGang("big")
			again := w.gang(c.recreate, testRackKey, w.now, nil)
			w.after(time.Minute)
			w.planFails(again)
			if !c.cooled {
				assert.Len(t, w.refused(), 2, "a rack held once the group waited afterSeconds")
				return
			}
			assert.Empty(t, w.refused(), "held again within maxHoldSeconds of the expiry")
			w.after(hold - time.Minute - time.Second)
			w.planFails(again)
			assert.Empty(t, w.refused(), "held again a second before the cooldown ends")
			w.after(2 * time.Second)
			w.planFails(again)
			assert.Len(t, w.refused(), 2, "a rack held after the cooldown")
		})
	}
}
