package domain_test

import (
	"errors"
	"strings"
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

// enrollmentIn is an existing enrollment in status st (a pending_consent
// one waits for consent session ds_c, from active).
func enrollmentIn(st domain.EnrollmentStatus) domain.Enrollment {
	e := domain.Enrollment{ID: "en_1", PartnerID: "pt_a", ChurchID: "ch_1", SessionID: "ds_1", Status: st,
		Giving: domain.Giving{Mode: domain.ModePercent, Value: 300}}
	if st == domain.EnrollmentPendingConsent {
		e.Pending = &domain.PendingUpdate{Value: 500, ConsentSessionID: "ds_c", ExpiresAt: time.Now().Add(time.Minute), Resume: domain.EnrollmentActive}
	}
	return e
}

// Every move from every status: the event it appends, nothing ("") for a
// move to the status the enrollment has, or a conflict ("409") naming the
// current status.
func TestEnrollmentStateMachine(t *testing.T) {
	now := time.Now()
	moves := map[string]func(*domain.Enrollment) (*domain.Event, error){
		"activate": func(e *domain.Enrollment) (*domain.Event, error) { return domain.ActivateEnrollment(e, now) },
		"pause":    func(e *domain.Enrollment) (*domain.Event, error) { return domain.PauseEnrollment(e, now) },
		"resume":   func(e *domain.Enrollment) (*domain.Event, error) { return domain.ResumeEnrollment(e, now) },
		"cancel":   func(e *domain.Enrollment) (*domain.Event, error) { return domain.CancelEnrollment(e, now) },
		"end": func(e *domain.Enrollment) (*domain.Event, error) {
			return domain.EndEnrollment(e, domain.EndLeftEmployer, now)
		},
		"lower": func(e *domain.Enrollment) (*domain.Event, error) {
			return domain.UpdateEnrollment(e, 100, domain.ConsentRequest{SessionID: "ds_n", ExpiresAt: now.Add(time.Hour)}, now)
		},
		"same": func(e *domain.Enrollment) (*domain.Event, error) {
			return domain.UpdateEnrollment(e, 300, domain.ConsentRequest{SessionID: "ds_n", ExpiresAt: now.Add(time.Hour)}, now)
		},
		"raise": func(e *domain.Enrollment) (*domain.Event, error) {
			return domain.UpdateEnrollment(e, 900, domain.ConsentRequest{SessionID: "ds_n", ExpiresAt: now.Add(time.Hour)}, now)
		},
	}
	want := map[domain.EnrollmentStatus]map[string]string{
		domain.EnrollmentPending: {"activate": "enrollment.activated", "pause": "409", "resume": "409", "cancel": "enrollment.canceled",
			"end": "enrollment.ended", "lower": "enrollment.updated", "same": "", "raise": "enrollment.update_requested"},
		domain.EnrollmentActive: {"activate": "", "pause": "enrollment.paused", "resume": "", "cancel": "enrollment.canceled",
			"end": "enrollment.ended", "lower": "enrollment.updated", "same": "", "raise": "enrollment.update_requested"},
		domain.EnrollmentPaused: {"activate": "", "pause": "", "resume": "enrollment.resumed", "cancel": "enrollment.canceled",
			"end": "enrollment.ended", "lower": "enrollment.updated", "same": "", "raise": "enrollment.update_requested"},
		domain.EnrollmentPendingConsent: {"activate": "", "pause": "409", "resume": "409", "cancel": "enrollment.canceled",
			"end": "409", "lower": "409", "same": "409", "raise": "409"},
		domain.EnrollmentCanceled: {"activate": "", "pause": "409", "resume": "409", "cancel": "",
			"end": "409", "lower": "409", "same": "409", "raise": "409"},
		domain.EnrollmentEnded: {"activate": "", "pause": "409", "resume": "409", "cancel": "409",
			"end": "", "lower": "409", "same": "409", "raise": "409"},
	}
	if len(want) != len(domain.EnrollmentStatuses) {
		t.Fatalf("the table covers %d statuses of %d", len(want), len(domain.EnrollmentStatuses))
	}
	for st, row := range want {
		for name, expect := range row {
			t.Run(string(st)+"/"+name, func(t *testing.T) {
				e := enrollmentIn(st)
				if st != domain.EnrollmentPending {
					at := now
					e.ActivatedAt = &at // every status but pending went through active
				}
				ev, err := moves[name](&e)
				switch expect {
				case "409":
					var de *domain.Error
					if !errors.As(err, &de) || de.Code != domain.ProblemInvalidTransition.Code || !strings.Contains(de.Detail, " is "+string(st)+" ") {
						t.Fatalf("got %v, %v; want invalid-transition naming %s", ev, err, st)
					}
				case "":
					if err != nil || ev != nil {
						t.Fatalf("got %v, %v; want nothing", ev, err)
					}
				default:
					if err != nil || ev == nil || ev.Type != expect || ev.AggregateID != "en_1" || ev.ChurchID != "ch_1" {
						t.Fatalf("got %+v, %v; want %s", ev, err, expect)
					}
				}
			})
		}
	}
}

// A raise waits for consent and comes back to the status it had, with the
// new value when the donor consented and the old one when the session
// expired or was never opened.
func TestEnrollmentConsentSettles(t *testing.T) {
	now := time.Now()
	for _, from := range []domain.EnrollmentStatus{domain.EnrollmentPending, domain.EnrollmentActive, domain.EnrollmentPaused} {
		for _, outcome := range []string{"consented", "expired", "never opened", "still open", "other session"} {
			t.Run(string(from)+"/"+outcome, func(t *testing.T) {
				e := enrollmentIn(from)
				req, err := domain.UpdateEnrollment(&e, 750, domain.ConsentRequest{SessionID: "ds_c", ExpiresAt: now.Add(time.Minute)}, now)
				if err != nil {
					t.Fatal(err)
				}
				e.Apply(*req)
				if e.Status != domain.EnrollmentPendingConsent || e.Pending.Value != 750 || e.Giving.Value != 300 {
					t.Fatalf("waiting: %+v", e)
				}
				sess := domain.Session{ID: "ds_c", Status: domain.SessionOpen}
				at := now
				switch outcome {
				case "consented":
					sess.Status = domain.SessionCompleted
				case "expired":
					sess.Status = domain.SessionExpired
				case "never opened":
					sess, at = domain.Session{}, now.Add(time.Minute)
				case "other session":
					sess.ID, sess.Status = "ds_other", domain.SessionCompleted
				}
				ev := domain.SettleUpdate(&e, &sess, at)
				switch outcome {
				case "still open", "other session":
					if ev != nil {
						t.Fatalf("settled by %s: %+v", outcome, ev)
					}
					return
				case "consented":
					if ev == nil || ev.Payload.(*domain.EnrollmentUpdate).Value != 750 {
						t.Fatalf("consent: %+v", ev)
					}
				default:
					if ev == nil || ev.Type != "enrollment.update_expired" {
						t.Fatalf("%s: %+v", outcome, ev)
					}
				}
				e.Apply(*ev)
				wantValue := domain.Hundredths(300)
				if outcome == "consented" {
					wantValue = 750
				}
				if e.Status != from || e.Pending != nil || e.Giving.Value != wantValue {
					t.Fatalf("after %s: %+v", outcome, e)
				}
				if again := domain.SettleUpdate(&e, &sess, at); again != nil {
					t.Fatalf("settled twice: %+v", again)
				}
			})
		}
	}
	// The request is not due before its time when no session exists.
	e := enrollmentIn(domain.EnrollmentPendingConsent)
	if ev := domain.SettleUpdate(&e, &domain.Session{}, now); ev != nil {
		t.Fatalf("expired early: %+v", ev)
	}
}

func TestEnrollmentCancelAndEndRecords(t *testing.T) {
	now := time.Now()
	e := enrollmentIn(domain.EnrollmentPendingConsent)
	ev, err := domain.CancelEnrollment(&e, now)
	if err != nil {
		t.Fatal(err)
	}
	if p := ev.Payload.(*domain.EnrollmentCancel); p.EnrollmentID != "en_1" || p.ReasonCode != domain.CancelPartnerRequest {
		t.Fatalf("canceled payload %+v", p)
	}
	if note := domain.NoteCancelReason(&e, []byte("sealed"), now); note != nil {
		t.Fatal("a reason noted before the cancel")
	}
	e.Apply(*ev)
	if e.Status != domain.EnrollmentCanceled || e.Pending != nil || e.CanceledAt == nil {
		t.Fatalf("after cancel: %+v", e)
	}
	note := domain.NoteCancelReason(&e, []byte("sealed"), now)
	if note == nil || note.Type != "enrollment.cancel_noted" {
		t.Fatalf("note: %+v", note)
	}
	if spec, _ := domain.EventTypeSpec(note.Type); spec.Public {
		t.Fatal("the reason note is public")
	}
	e.Apply(*note)
	if again := domain.NoteCancelReason(&e, []byte("other"), now); again != nil || string(e.CancelNote) != "sealed" {
		t.Fatalf("noted twice: %+v %q", again, e.CancelNote)
	}
	if fe := domain.ValidCancelReason(strings.Repeat("é", domain.MaxCancelReason)); fe != nil {
		t.Fatalf("500 characters refused: %v", fe)
	}
	if fe := domain.ValidCancelReason(strings.Repeat("a", domain.MaxCancelReason+1)); fe == nil || fe.Field != "reason" {
		t.Fatalf("501 characters: %v", fe)
	}

	active := enrollmentIn(domain.EnrollmentActive)
	if _, err := domain.EndEnrollment(&active, "bored", now); domain.ErrorKind(err) != domain.KindInvalid {
		t.Fatalf("unknown end reason: %v", err)
	}
	end, err := domain.EndEnrollment(&active, domain.EndSwitchReverted, now)
	if err != nil {
		t.Fatal(err)
	}
	active.Apply(*end)
	if active.Status != domain.EnrollmentEnded || active.EndReason != domain.EndSwitchReverted || active.EndedAt == nil {
		t.Fatalf("after end: %+v", active)
	}
}
