package domain_test

import (
	"testing"
	"time"

	"github.com/partnergiving/giving/domain"
)

func TestEnrollmentLifecycle(t *testing.T) {
	now := time.Now()
	n := domain.NewEnrollment{ID: domain.NewID(domain.PrefixEnrollment), PartnerID: "pt_a", ChurchID: "ch_1", SessionID: "ds_1",
		Giving: domain.Giving{Mode: domain.ModePercent, Value: 300}}
	var e domain.Enrollment
	if _, err := domain.ActivateEnrollment(&e, now); domain.ErrorKind(err) != domain.KindNotFound {
		t.Fatalf("activate missing: %v", err)
	}
	ev, err := domain.CreateEnrollment(&e, n, now)
	if err != nil {
		t.Fatal(err)
	}
	if ev.ChurchID != "ch_1" || ev.AggregateID != n.ID {
		t.Fatalf("created event %+v", ev)
	}
	e.Apply(ev)
	if e.Status != domain.EnrollmentPending || e.Giving != n.Giving || e.SessionID != "ds_1" {
		t.Fatalf("after create: %+v", e)
	}
	if _, err := domain.CreateEnrollment(&e, n, now); domain.ErrorKind(err) != domain.KindConflict {
		t.Fatalf("second create: %v", err)
	}
	act, err := domain.ActivateEnrollment(&e, now)
	if err != nil || act == nil {
		t.Fatalf("activate: %v, %v", act, err)
	}
	if p := act.Payload.(*domain.EnrollmentActivated); p.EnrollmentID != n.ID {
		t.Fatalf("activated payload %+v", p)
	}
	e.Apply(*act)
	if e.Status != domain.EnrollmentActive || e.ActivatedAt == nil {
		t.Fatalf("after activate: %+v", e)
	}
	again, err := domain.ActivateEnrollment(&e, now)
	if err != nil || again != nil {
		t.Fatalf("repeated activation: %v, %v; want nothing", again, err)
	}
}
