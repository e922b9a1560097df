package app_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/partnergiving/giving/app"
	"github.com/partnergiving/giving/domain"
)

// hookReceiver is a real receiver on loopback that answers 200 and counts
// what it got.
type hookReceiver struct {
	URL string
	got atomic.Int64
}

func newHookReceiver(t testing.TB) *hookReceiver {
	t.Helper()
	rc := &hookReceiver{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		rc.got.Add(1)
	}))
	t.Cleanup(srv.Close)
	rc.URL = srv.URL + "/hooks"
	return rc
}

func TestCreateEndpoint(t *testing.T) {
	t.Parallel()
	in := startInstance(t)
	hooks := newHookReceiver(t)
	for name, tc := range map[string]struct {
		settings app.EndpointSettings
		fields   []string // the fields at fault, or none for a created endpoint
	}{
		"every event":        {settings: app.EndpointSettings{URL: hooks.URL, EventTypes: []string{"*"}}},
		"some events, twice": {settings: app.EndpointSettings{URL: hooks.URL, EventTypes: []string{"enrollment.created", "enrollment.created"}}},
		"ed25519":            {settings: app.EndpointSettings{URL: hooks.URL, EventTypes: []string{"*"}, Scheme: domain.SchemeEd25519}},
		"notes":              {settings: app.EndpointSettings{URL: hooks.URL, EventTypes: []string{"*"}, Description: " Books ", Metadata: map[string]string{"team": "books"}}},
		"no url":             {settings: app.EndpointSettings{EventTypes: []string{"*"}}, fields: []string{"url"}},
		"a relative url":     {settings: app.EndpointSettings{URL: "/hooks", EventTypes: []string{"*"}}, fields: []string{"url"}},
		"credentials":        {settings: app.EndpointSettings{URL: "https://u:p@example.org/hooks", EventTypes: []string{"*"}}, fields: []string{"url"}},
		"no event types":     {settings: app.EndpointSettings{URL: hooks.URL}, fields: []string{"event_types"}},
		"an unknown type":    {settings: app.EndpointSettings{URL: hooks.URL, EventTypes: []string{"church.imported"}}, fields: []string{"event_types"}},
		"a private address":  {settings: app.EndpointSettings{URL: "http://10.0.0.1/hooks", EventTypes: []string{"*"}}, fields: []string{"url"}},
		"an unknown scheme":  {settings: app.EndpointSettings{URL: hooks.URL, EventTypes: []string{"*"}, Scheme: "rsa"}, fields: []string{"signature_scheme"}},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			p := in.partner(t)
			got, err := in.App.CreateEndpoint(context.Background(), p, tc.settings)
			if tc.fields != nil {
				wantProblem(t, err, domain.ProblemValidation.Code)
				fields := err.(*domain.Error).Fields
				if len(fields) != len(tc.fields) || fields[0].Field != tc.fields[0] {
					t.Errorf("fields at fault %+v, want %v", fields, tc.fields)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			ep := got.Endpoint
			if !strings.HasPrefix(got.Secret, domain.WebhookSecretPrefix) || ep.URL != hooks.URL || ep.PartnerID != p {
				t.Errorf("created %+v with secret %q", ep, got.Secret)
			}
			if strings.Contains(string(mustJSON(t, ep)), got.Secret) {
				t.Error("the endpoint holds its secret in clear")
			}
			if (tc.settings.Scheme == domain.SchemeEd25519) != (ep.SigningKey != nil) {
				t.Errorf("scheme %q, signing key %v", tc.settings.Scheme, ep.SigningKey)
			}
			if len(ep.EventTypes) != 1 {
				t.Errorf("event types %v, want each once", ep.EventTypes)
			}
			read, err := in.App.Endpoint(p, ep.ID)
			if err != nil || read.URL != ep.URL || read.Description != strings.TrimSpace(tc.settings.Description) {
				t.Errorf("reads back %+v %v", read.WebhookEndpoint, err)
			}
		})
	}

	t.Run("a partner has at most so many endpoints", func(t *testing.T) {
		t.Parallel()
		ctx := context.Background()
		p := in.partner(t)
		var first string
		for i := range domain.MaxWebhookEndpoints {
			ep, err := in.App.CreateEndpoint(ctx, p, app.EndpointSettings{URL: hooks.URL, EventTypes: []string{"*"}})
			if err != nil {
				t.Fatalf("endpoint %d: %v", i, err)
			}
			if first == "" {
				first = ep.Endpoint.ID
			}
		}
		_, err := in.App.CreateEndpoint(ctx, p, app.EndpointSettings{URL: hooks.URL, EventTypes: []string{"*"}})
		wantProblem(t, err, domain.ProblemConflict.Code)
		// Another partner is not counted against it.
		if _, err := in.App.CreateEndpoint(ctx, in.partner(t), app.EndpointSettings{URL: hooks.URL, EventTypes: []string{"*"}}); err != nil {
			t.Errorf("another partner: %v", err)
		}
		// A deleted endpoint makes room.
		if err := in.App.DeleteEndpoint(ctx, p, first); err != nil {
			t.Fatal(err)
		}
		if _, err := in.App.CreateEndpoint(ctx, p, app.EndpointSettings{URL: hooks.URL, EventTypes: []string{"*"}}); err != nil {
			t.Errorf("after a delete: %v", err)
		}
	})
}

func TestChangeEndpoint(t *testing.T) {
	t.Parallel()
	in := startInstance(t)
	hooks := newHookReceiver(t)
	ctx := context.Background()
	// endpoint is a new endpoint of the partner for every event.
	endpoint := func(t *testing.T, p string) string {
		t.Helper()
		ep, err := in.App.CreateEndpoint(ctx, p, app.EndpointSettings{URL: hooks.URL, EventTypes: []string{"*"}, Metadata: map[string]string{"a": "1"}})
		if err != nil {
			t.Fatal(err)
		}
		return ep.Endpoint.ID
	}

	t.Run("update", func(t *testing.T) {
		t.Parallel()
		types := []string{"enrollment.created"}
		for name, tc := range map[string]struct {
			change domain.WebhookEndpointChange
			code   domain.Code
			check  func(ep domain.WebhookEndpoint) bool
		}{
			"event types":   {change: domain.WebhookEndpointChange{EventTypes: &types}, check: func(ep domain.WebhookEndpoint) bool { return len(ep.EventTypes) == 1 && ep.EventTypes[0] == types[0] }},
			"description":   {change: domain.WebhookEndpointChange{Description: ptr(" Books ")}, check: func(ep domain.WebhookEndpoint) bool { return ep.Description == "Books" }},
			"metadata":      {change: domain.WebhookEndpointChange{Metadata: map[string]string{"a": "", "b": "2"}}, check: func(ep domain.WebhookEndpoint) bool { return len(ep.Metadata) == 1 && ep.Metadata["b"] == "2" }},
			"to ed25519":    {change: domain.WebhookEndpointChange{Scheme: ptr(domain.SchemeEd25519)}, check: func(ep domain.WebhookEndpoint) bool { return ep.SigningKey != nil }},
			"a bad url":     {change: domain.WebhookEndpointChange{URL: ptr("ftp://example.org")}, code: domain.ProblemValidation.Code},
			"a private url": {change: domain.WebhookEndpointChange{URL: ptr("http://192.168.1.1/hooks")}, code: domain.ProblemValidation.Code},
			"no types":      {change: domain.WebhookEndpointChange{EventTypes: &[]string{}}, code: domain.ProblemValidation.Code},
		} {
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				p := in.partner(t)
				id := endpoint(t, p)
				got, err := in.App.UpdateEndpoint(ctx, p, id, tc.change)
				wantProblem(t, err, tc.code)
				read, _ := in.App.Endpoint(p, id)
				updates := in.events(t, p, id, "webhook_endpoint.updated")
				if tc.code != "" {
					if updates != 0 || read.URL != hooks.URL {
						t.Errorf("a refused change appended %d events, reads %+v", updates, read.WebhookEndpoint)
					}
					return
				}
				if !tc.check(got.WebhookEndpoint) || !tc.check(read.WebhookEndpoint) {
					t.Errorf("answered %+v, reads %+v", got.WebhookEndpoint, read.WebhookEndpoint)
				}
				if updates != 1 {
					t.Errorf("%d webhook_endpoint.updated, want 1", updates)
				}
				// The same change again changes nothing.
				if _, err := in.App.UpdateEndpoint(ctx, p, id, tc.change); err != nil || in.events(t, p, id, "webhook_endpoint.updated") != 1 {
					t.Errorf("the same change again: %v, or it appended", err)
				}
			})
		}
	})

	t.Run("rotate", func(t *testing.T) {
		t.Parallel()
		p := in.partner(t)
		created, err := in.App.CreateEndpoint(ctx, p, app.EndpointSettings{URL: hooks.URL, EventTypes: []string{"*"}})
		if err != nil {
			t.Fatal(err)
		}
		id := created.Endpoint.ID
		before := time.Now()
		r, err := in.App.RotateSecret(ctx, p, id, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		if r.Secret == created.Secret || !strings.HasPrefix(r.Secret, domain.WebhookSecretPrefix) {
			t.Errorf("new secret %q (was %q)", r.Secret, created.Secret)
		}
		if r.PreviousExpiresAt.Before(before.Add(time.Hour-time.Second)) || r.PreviousExpiresAt.After(time.Now().Add(time.Hour)) {
			t.Errorf("the previous secret expires at %s, want an hour from now", r.PreviousExpiresAt)
		}
		if r.Endpoint.Previous == nil {
			t.Error("the endpoint keeps no previous secret in its overlap")
		}
		if n := in.events(t, p, id, "webhook_endpoint.secret_rotated"); n != 1 {
			t.Errorf("%d webhook_endpoint.secret_rotated, want 1", n)
		}
		_, err = in.App.RotateSecret(ctx, p, "we_nope", time.Hour)
		wantProblem(t, err, domain.ProblemNotFound.Code)
	})

	t.Run("disable and enable", func(t *testing.T) {
		t.Parallel()
		p := in.partner(t)
		id := endpoint(t, p)
		for i, step := range []struct {
			do      func(ctx context.Context, partner, id string) (interface{ Enabled() bool }, error)
			enabled bool
		}{
			{func(ctx context.Context, p, id string) (interface{ Enabled() bool }, error) {
				ep, err := in.App.DisableEndpoint(ctx, p, id)
				return &ep.WebhookEndpoint, err
			}, false},
			{func(ctx context.Context, p, id string) (interface{ Enabled() bool }, error) {
				ep, err := in.App.DisableEndpoint(ctx, p, id)
				return &ep.WebhookEndpoint, err
			}, false},
			{func(ctx context.Context, p, id string) (interface{ Enabled() bool }, error) {
				ep, err := in.App.EnableEndpoint(ctx, p, id)
				return &ep.WebhookEndpoint, err
			}, true},
			{func(ctx context.Context, p, id string) (interface{ Enabled() bool }, error) {
				ep, err := in.App.EnableEndpoint(ctx, p, id)
				return &ep.WebhookEndpoint, err
			}, true},
		} {
			got, err := step.do(ctx, p, id)
			if err != nil || got.Enabled() != step.enabled {
				t.Fatalf("step %d: enabled %v %v, want %v", i, got.Enabled(), err, step.enabled)
			}
		}
		// A repeat changes nothing: one event each way.
		if n := in.events(t, p, id, "webhook_endpoint.paused") + in.events(t, p, id, "webhook_endpoint.enabled"); n != 2 {
			t.Errorf("%d disable and enable events, want 2", n)
		}
	})

	t.Run("a disabled endpoint cannot recover", func(t *testing.T) {
		t.Parallel()
		p := in.partner(t)
		id := endpoint(t, p)
		if _, err := in.App.DisableEndpoint(ctx, p, id); err != nil {
			t.Fatal(err)
		}
		since := time.Now().Add(-time.Hour)
		_, err := in.App.RecoverEndpoint(ctx, p, id, domain.RecoveryRange{Since: &since})
		wantProblem(t, err, domain.ProblemEndpointDisabled.Code)
	})

	t.Run("delete", func(t *testing.T) {
		t.Parallel()
		p := in.partner(t)
		id := endpoint(t, p)
		if err := in.App.DeleteEndpoint(ctx, p, id); err != nil {
			t.Fatal(err)
		}
		_, err := in.App.Endpoint(p, id)
		wantProblem(t, err, domain.ProblemNotFound.Code)
		wantProblem(t, in.App.DeleteEndpoint(ctx, p, id), domain.ProblemNotFound.Code)
		_, err = in.App.UpdateEndpoint(ctx, p, id, domain.WebhookEndpointChange{Description: ptr("x")})
		wantProblem(t, err, domain.ProblemNotFound.Code)
		_, err = in.App.EnableEndpoint(ctx, p, id)
		wantProblem(t, err, domain.ProblemNotFound.Code)
	})

	t.Run("another partner's endpoint is not found", func(t *testing.T) {
		t.Parallel()
		owner, other := in.partner(t), in.partner(t)
		id := endpoint(t, owner)
		_, err := in.App.UpdateEndpoint(ctx, other, id, domain.WebhookEndpointChange{Description: ptr("x")})
		wantProblem(t, err, domain.ProblemNotFound.Code)
		_, err = in.App.DisableEndpoint(ctx, other, id)
		wantProblem(t, err, domain.ProblemNotFound.Code)
		_, err = in.App.RotateSecret(ctx, other, id, 0)
		wantProblem(t, err, domain.ProblemNotFound.Code)
		wantProblem(t, in.App.DeleteEndpoint(ctx, other, id), domain.ProblemNotFound.Code)
		if read, err := in.App.Endpoint(owner, id); err != nil || !read.Enabled() || read.Description != "" {
			t.Errorf("the owner's endpoint changed: %+v %v", read.WebhookEndpoint, err)
		}
	})
}

func TestRecoverEndpoint(t *testing.T) {
	t.Parallel()
	in := startInstance(t)
	hooks := newHookReceiver(t)
	ctx := context.Background()
	p := in.partner(t)
	church := in.church(t, p)
	created, err := in.App.CreateEndpoint(ctx, p, app.EndpointSettings{URL: hooks.URL, EventTypes: []string{"enrollment.created"}})
	if err != nil {
		t.Fatal(err)
	}
	ep := created.Endpoint.ID
	start := time.Now().UTC()
	for range 3 {
		in.enrollment(t, p, church.ID, domain.EnrollmentPending)
	}
	// Each enrollment's first delivery has been made when the last one is
	// there: a recovery then re-delivers them.
	waitFor(t, "three deliveries", func() bool { return hooks.got.Load() >= 3 })

	at := func(d time.Duration) *time.Time { v := start.Add(d); return &v }
	last, err := in.Ledger.LastSeq(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for name, tc := range map[string]struct {
		rg    domain.RecoveryRange
		code  domain.Code
		total int
	}{
		"since before the events":   {rg: domain.RecoveryRange{Since: at(-time.Minute)}, total: 3},
		"until before the events":   {rg: domain.RecoveryRange{Since: at(-time.Hour), Until: at(-30 * time.Minute)}, total: 0},
		"since the feed's position": {rg: domain.RecoveryRange{SinceCursor: &last}, total: 0},
		"neither since nor cursor":  {rg: domain.RecoveryRange{}, code: domain.ProblemInvalidRange.Code},
		"since and cursor":          {rg: domain.RecoveryRange{Since: at(-time.Minute), SinceCursor: &last}, code: domain.ProblemInvalidRange.Code},
		"since too long ago":        {rg: domain.RecoveryRange{Since: at(-domain.MaxRecoveryAge - time.Hour)}, code: domain.ProblemInvalidRange.Code},
		"since in the future":       {rg: domain.RecoveryRange{Since: at(time.Hour)}, code: domain.ProblemInvalidRange.Code},
		"until before since":        {rg: domain.RecoveryRange{Since: at(-time.Minute), Until: at(-2 * time.Minute)}, code: domain.ProblemInvalidRange.Code},
	} {
		t.Run(name, func(t *testing.T) {
			r, err := in.App.RecoverEndpoint(ctx, p, ep, tc.rg)
			wantProblem(t, err, tc.code)
			if err != nil {
				return
			}
			if r.Total != tc.total || r.EndpointID != ep || r.PartnerID != p {
				t.Errorf("recovery %+v, want a total of %d", r, tc.total)
			}
			// The recovery is stored, and runs to its end.
			waitFor(t, "the recovery to complete", func() bool {
				got, err := in.App.Recovery(ctx, p, ep, r.ID)
				return err == nil && got.Status == domain.RecoveryCompleted
			})
		})
	}

	t.Run("a cursor past the ledger's end", func(t *testing.T) {
		past := last + 1_000_000
		_, err := in.App.RecoverEndpoint(ctx, p, ep, domain.RecoveryRange{SinceCursor: &past})
		wantProblem(t, err, domain.ProblemInvalidCursor.Code)
	})

	t.Run("another partner's endpoint", func(t *testing.T) {
		_, err := in.App.RecoverEndpoint(ctx, in.partner(t), ep, domain.RecoveryRange{Since: at(-time.Minute)})
		wantProblem(t, err, domain.ProblemNotFound.Code)
	})
}
