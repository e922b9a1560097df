package app_test

import (
	"context"
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/partnergiving/giving/domain"
)

// An enrollment's events are its own public events, oldest first, however
// many other events the partner has; the newest events come newest first;
// another partner sees none of them.
func TestDashboardReads(t *testing.T) {
	t.Parallel()
	in := startInstance(t)
	ctx := context.Background()
	partner, other := in.partner(t), in.partner(t)
	church := in.church(t, partner)
	first := in.enrollment(t, partner, church.ID, domain.EnrollmentActive)
	second := in.enrollment(t, partner, church.ID, domain.EnrollmentPending)
	if _, err := in.App.PauseEnrollment(ctx, partner, first); err != nil {
		t.Fatal(err)
	}
	in.catchUp(t)

	types := func(envelopes [][]byte) []string {
		var out []string
		for _, raw := range envelopes {
			var e struct {
				EventType string `json:"event_type"`
				Payload   struct {
					EnrollmentID string `json:"enrollment_id"`
				} `json:"payload"`
			}
			if err := json.Unmarshal(raw, &e); err != nil {
				t.Fatal(err)
			}
			out = append(out, e.EventType+" "+e.Payload.EnrollmentID)
		}
		return out
	}
	events, err := in.App.EnrollmentEvents(ctx, partner, first)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"enrollment.created " + first, "enrollment.activated " + first, "enrollment.paused " + first}
	if got := types(events); !slices.Equal(got, want) {
		t.Fatalf("the enrollment's events %v, want %v", got, want)
	}
	latest, err := in.App.LatestEvents(partner, 2)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := types(latest), []string{"enrollment.paused " + first, "enrollment.created " + second}; !slices.Equal(got, want) {
		t.Fatalf("the newest events %v, want %v", got, want)
	}
	if _, err := in.App.EnrollmentEvents(ctx, other, first); domain.ErrorKind(err) != domain.KindNotFound {
		t.Fatalf("another partner read the enrollment's events: %v", err)
	}
	if none, err := in.App.LatestEvents(other, 10); err != nil || len(none) != 0 {
		t.Fatalf("another partner's newest events: %d %v", len(none), err)
	}
	// Nothing was delivered: no endpoint.
	if counts, err := in.App.DeliveriesByHour(ctx, partner, time.Now()); err != nil || len(counts) != 0 {
		t.Fatalf("delivery counts without a delivery: %v %v", counts, err)
	}
}
