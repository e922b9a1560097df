package stripeidentity_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/partnergiving/giving/domain"
	"github.com/partnergiving/giving/vendors/stripeidentity"
	"github.com/partnergiving/giving/vendors/stripeidentity/stripefake"
)

// The Verifier says where a donor's verification stands in the service's
// terms, from what Stripe answers: open while the donor has not submitted
// (with the page to go back to), closed once Stripe is checking or decided
// (the webhook says what), open without a page once canceled (a new
// verification is needed).
func TestVerifierReadsSessionsInTheServicesTerms(t *testing.T) {
	f := startFake(t)
	v := stripeidentity.NewVerifier(newClient(t, f.URL, 0))
	if v.PageOrigin() != f.URL {
		t.Fatalf("page origin %q, want the fake's %q", v.PageOrigin(), f.URL)
	}
	if got := stripeidentity.NewVerifier(newClient(t, "", 0)).PageOrigin(); got != stripeidentity.HostedOrigin {
		t.Fatalf("page origin with Stripe's API %q", got)
	}
	ctx := context.Background()
	start := func(key string) domain.IdentityCheck {
		t.Helper()
		c, err := v.StartIdentity(ctx, domain.IdentityRequest{
			ChurchID: "ch_2hQ8church", DonorID: "dn_2hQ8donor", SessionID: "ds_2hQ8session",
			ReturnURL: "https://giving.example/flow/token", IdempotencyKey: key,
		})
		if err != nil {
			t.Fatal(err)
		}
		if !c.Open || !strings.HasPrefix(c.URL, f.URL+"/start/") || !strings.HasPrefix(c.ID, "vs_") {
			t.Fatalf("a new verification: %+v", c)
		}
		return c
	}
	read := func(id string) domain.IdentityCheck {
		t.Helper()
		c, err := v.CheckIdentity(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}

	c := start("identity-1")
	last := f.Requests()[len(f.Requests())-1]
	want := url.Values{"type": {"document"}, "return_url": {"https://giving.example/flow/token"},
		"metadata[reference]": {"dn_2hQ8donor"}, "metadata[church_id]": {"ch_2hQ8church"}, "metadata[donor_session_id]": {"ds_2hQ8session"}}
	if last.Form.Encode() != want.Encode() || last.Header.Get("Idempotency-Key") != "identity-1" || last.Header.Get("Authorization") != "Bearer "+testKey {
		t.Fatalf("create sent %s %v", last.Form.Encode(), last.Header)
	}
	if _, err := f.Complete(c.ID, stripefake.Leave); err != nil {
		t.Fatal(err)
	}
	if got := read(c.ID); !got.Open || got.URL == "" {
		t.Fatalf("left without submitting: %+v", got)
	}
	if _, err := f.Complete(c.ID, stripefake.Verify); err != nil {
		t.Fatal(err)
	}
	if got := read(c.ID); got.Open || got.URL != "" {
		t.Fatalf("verified: %+v", got)
	}

	c = start("identity-2")
	if _, err := f.Complete(c.ID, stripefake.Unverified); err != nil {
		t.Fatal(err)
	}
	// A check that did not verify (a blurry photo): Stripe keeps the
	// session open for the donor to try again, at a fresh URL.
	if got := read(c.ID); !got.Open || got.URL == "" {
		t.Fatalf("not verified: %+v", got)
	}

	c = start("identity-3")
	if err := v.CancelIdentity(ctx, c.ID); err != nil {
		t.Fatal(err)
	}
	last = f.Requests()[len(f.Requests())-1]
	if last.Path != "/v1/identity/verification_sessions/"+c.ID+"/cancel" || last.Status != http.StatusOK || last.Header.Get("Idempotency-Key") != "cancel-"+c.ID {
		t.Fatalf("cancel sent %s %d %v", last.Path, last.Status, last.Header)
	}
	if got := read(c.ID); !got.Open || got.URL != "" {
		t.Fatalf("canceled: %+v", got)
	}
	// Canceling again (another instance's sweeper, say) replays the first
	// answer under the same key.
	if err := v.CancelIdentity(ctx, c.ID); err != nil {
		t.Fatal(err)
	}
	if last = f.Requests()[len(f.Requests())-1]; last.Refusal != "idempotent replay" {
		t.Fatalf("a second cancel: %d %q, want a replay", last.Status, last.Refusal)
	}
}
