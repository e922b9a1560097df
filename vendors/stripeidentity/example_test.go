package stripeidentity_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/partnergiving/giving/vendors/stripeidentity"
	"github.com/partnergiving/giving/vendors/stripeidentity/stripefake"
)

// The hosted flow's identity step: create a session for the donor session
// and redirect the donor's browser to its URL.
func ExampleClient_CreateSession() {
	fake := stripefake.Start(stripefake.Config{SecretKey: "sk_test_example"})
	defer fake.Close()
	client, err := stripeidentity.New(stripeidentity.Config{BaseURL: fake.URL, SecretKey: "sk_test_example"})
	if err != nil {
		panic(err)
	}
	s, err := client.CreateSession(context.Background(), stripeidentity.CreateParams{
		Reference:      "ds_2hQ8exampleSession",
		ReturnURL:      "https://giving.example/flow/identity/return?ref=ds_2hQ8exampleSession",
		IdempotencyKey: "identity:ds_2hQ8exampleSession:1",
	})
	switch {
	case errors.Is(err, stripeidentity.ErrUnavailable):
		fmt.Println("ask the donor to try again shortly")
	case err != nil:
		fmt.Println("a bug or a configuration error:", err)
	default:
		outcome, _ := s.Outcome()
		fmt.Println(s.Status, outcome, s.Reference)
		// http.Redirect(w, r, s.URL, http.StatusSeeOther); never log s.URL.
	}
	// Output: requires_input pending ds_2hQ8exampleSession
}

// The vendor edge: verify on the raw body, then act on the outcome once
// per event id.
func ExampleParseWebhook() {
	secret := "whsec_example"
	now := time.Unix(1764370000, 0)
	// What Stripe would POST; here built the sandbox's way.
	typ, lastErr, _ := stripeidentity.OutcomeEvent(stripeidentity.Review)
	body, _ := stripeidentity.BuildEvent(stripeidentity.EventParams{
		Type: typ, LastError: lastErr, Created: now,
		Metadata: map[string]string{stripeidentity.ReferenceKey: "ds_2hQ8exampleSession"},
	})
	header := stripeidentity.Sign(secret, body, now)

	r, err := stripeidentity.ParseWebhook(body, header, secret, now)
	switch {
	case errors.Is(err, stripeidentity.ErrIgnored):
		fmt.Println("200, nothing to do")
	case errors.Is(err, stripeidentity.ErrSignature), errors.Is(err, stripeidentity.ErrInvalidEvent):
		fmt.Println("400:", err)
	case err != nil:
		fmt.Println("500:", err)
	default:
		fmt.Println(r.Reference, r.Outcome, r.Reason)
	}
	// Output: ds_2hQ8exampleSession review document_unverified_other
}
