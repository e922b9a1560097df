package domain_test

import (
	"errors"
	"testing"
	"time"

	"github.com/partnergiving/giving/domain"
)

func TestValidateRecoveryRange(t *testing.T) {
	now := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	at := func(d time.Duration) *time.Time { t := now.Add(d); return &t }
	cursor := uint64(7)
	for name, c := range map[string]struct {
		rg   domain.RecoveryRange
		from time.Time
		ok   bool
	}{
		"since":              {domain.RecoveryRange{Since: at(-time.Hour)}, now.Add(-time.Hour), true},
		"since 30 days ago":  {domain.RecoveryRange{Since: at(-domain.MaxRecoveryAge)}, now.Add(-domain.MaxRecoveryAge), true},
		"cursor":             {domain.RecoveryRange{SinceCursor: &cursor}, now.Add(-domain.MaxRecoveryAge), true},
		"cursor and until":   {domain.RecoveryRange{SinceCursor: &cursor, Until: at(-time.Hour)}, now.Add(-domain.MaxRecoveryAge), true},
		"neither":            {domain.RecoveryRange{}, time.Time{}, false},
		"both":               {domain.RecoveryRange{Since: at(-time.Hour), SinceCursor: &cursor}, time.Time{}, false},
		"older than 30 days": {domain.RecoveryRange{Since: at(-domain.MaxRecoveryAge - time.Second)}, time.Time{}, false},
		"future":             {domain.RecoveryRange{Since: at(time.Second)}, time.Time{}, false},
		"until before since": {domain.RecoveryRange{Since: at(-time.Hour), Until: at(-2 * time.Hour)}, time.Time{}, false},
		"until equals since": {domain.RecoveryRange{Since: at(-time.Hour), Until: at(-time.Hour)}, time.Time{}, false},
		"until too old":      {domain.RecoveryRange{SinceCursor: &cursor, Until: at(-domain.MaxRecoveryAge - time.Hour)}, time.Time{}, false},
	} {
		from, err := domain.ValidateRecoveryRange(c.rg, now)
		if c.ok && (err != nil || !from.Equal(c.from)) {
			t.Errorf("%s: from %v, %v; want %v", name, from, err, c.from)
		}
		var de *domain.Error
		if !c.ok && (!errors.As(err, &de) || de.Code != domain.ProblemInvalidRange.Code) {
			t.Errorf("%s: %v, want invalid-range", name, err)
		}
	}
}

func TestRecoveryIncludes(t *testing.T) {
	from := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	r := domain.WebhookRecovery{Types: []string{"enrollment.created"}, From: from, Until: from.Add(time.Hour)}
	for _, c := range []struct {
		typ  string
		at   time.Time
		want bool
	}{
		{"enrollment.created", from, true},
		{"enrollment.created", from.Add(time.Hour), true},
		{"enrollment.created", from.Add(-time.Millisecond), false},
		{"enrollment.created", from.Add(time.Hour + time.Millisecond), false},
		{"enrollment.activated", from.Add(time.Minute), false},
	} {
		if got := r.Includes(c.typ, c.at); got != c.want {
			t.Errorf("Includes(%s, %v) = %v", c.typ, c.at, got)
		}
	}
	if all := (domain.WebhookRecovery{From: from}); !all.Includes("deposit.received", from.Add(1000*time.Hour)) {
		t.Error("no types and no until: every later event is included")
	}
}

func TestWebhookEndpointDisableEnableAndFailing(t *testing.T) {
	now := time.Now()
	created := domain.NewEvent("pt_a", "we_a", "", now, &domain.WebhookEndpointCreated{URL: "https://x.example", EventTypes: []string{"*"}, SealedSecret: []byte{1}})
	ep := domain.Fold[domain.WebhookEndpoint]([]domain.Event{created})
	if ep.Status() != domain.WebhookEndpointEnabled {
		t.Fatalf("a new endpoint is %s", ep.Status())
	}
	if ev, err := domain.EnableWebhookEndpoint(&ep, "we_a", now); ev != nil || err != nil {
		t.Fatalf("enabling an enabled endpoint: %v %v", ev, err)
	}
	off, err := domain.DisableWebhookEndpoint(&ep, "we_a", now)
	if err != nil || off == nil || off.Type != "webhook_endpoint.paused" {
		t.Fatalf("disable: %v %v", off, err)
	}
	ep.Apply(*off)
	if ep.Status() != domain.WebhookEndpointDisabled || ep.DisabledReason != domain.DisabledManual {
		t.Fatalf("after disable: %s %s", ep.Status(), ep.DisabledReason)
	}
	// Disabled already: neither a second disable nor failing changes it.
	if ev, err := domain.DisableWebhookEndpoint(&ep, "we_a", now); ev != nil || err != nil {
		t.Fatalf("disabling a disabled endpoint: %v %v", ev, err)
	}
	if ev := domain.FailWebhookEndpoint(&ep, now); ev != nil {
		t.Fatalf("failing a disabled endpoint: %v", ev)
	}
	on, err := domain.EnableWebhookEndpoint(&ep, "we_a", now)
	if err != nil || on == nil {
		t.Fatalf("enable: %v %v", on, err)
	}
	ep.Apply(*on)
	failed := domain.FailWebhookEndpoint(&ep, now)
	if failed == nil || failed.Type != "webhook_endpoint.disabled" {
		t.Fatalf("fail: %v", failed)
	}
	if spec, _ := domain.EventTypeSpec(failed.Type); !spec.Public {
		t.Fatal("webhook_endpoint.disabled must be public")
	}
	if body, err := failed.Envelope(); err != nil || string(body[len(body)-len(`{"webhook_endpoint_id":"we_a","reason":"failing"}}`):]) != `{"webhook_endpoint_id":"we_a","reason":"failing"}}` {
		t.Fatalf("envelope %s (%v)", body, err)
	}
	ep.Apply(*failed)
	if ep.DisabledReason != domain.DisabledFailing {
		t.Fatalf("reason %q", ep.DisabledReason)
	}
	gone := domain.WebhookEndpoint{}
	if _, err := domain.DisableWebhookEndpoint(&gone, "we_x", now); err == nil {
		t.Fatal("disabled an endpoint that does not exist")
	}
}

func TestFailingSince(t *testing.T) {
	start := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	later := start.Add(time.Hour)
	if domain.FailingSince(nil, domain.DeliverySucceeded, later) != nil {
		t.Fatal("a success starts no run")
	}
	if got := domain.FailingSince(nil, domain.DeliveryTimeout, later); got == nil || !got.Equal(later) {
		t.Fatalf("a first failure starts the run now: %v", got)
	}
	prev := &domain.DeliveryAttempt{Outcome: domain.DeliveryFailed, FailingSince: &start}
	if got := domain.FailingSince(prev, domain.DeliveryNetworkError, later); got == nil || !got.Equal(start) {
		t.Fatalf("a failure after a failure keeps the run's start: %v", got)
	}
	ok := &domain.DeliveryAttempt{Outcome: domain.DeliverySucceeded}
	if got := domain.FailingSince(ok, domain.DeliveryFailed, later); got == nil || !got.Equal(later) {
		t.Fatalf("a failure after a success starts a new run: %v", got)
	}
}
