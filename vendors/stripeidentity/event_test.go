package stripeidentity_test

import (
	"encoding/json"
	"errors"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/partnergiving/giving/domain"
	"github.com/partnergiving/giving/vendors/stripeidentity"
)

// The fixtures in testdata are written from the Event object
// (docs.stripe.com/api/events/object) wrapping the VerificationSession
// object of docs.stripe.com/api/identity/verification_sessions/object, with
// the statuses and last_error codes that page and
// docs.stripe.com/identity/how-sessions-work document.
func TestParseEventFixtures(t *testing.T) {
	tests := []struct {
		file    string
		eventID string
		typ     string
		status  stripeidentity.Status
		outcome stripeidentity.Outcome
		reason  string
	}{
		{"event_verified.json", "evt_1QfixtureVerified000000", stripeidentity.EventVerified, stripeidentity.StatusVerified, stripeidentity.Passed, ""},
		{"event_processing.json", "evt_1QfixtureProcessing0000", stripeidentity.EventProcessing, stripeidentity.StatusProcessing, stripeidentity.Pending, "processing"},
		{"event_requires_input_unverified.json", "evt_1QfixtureUnverified0000", stripeidentity.EventRequiresInput, stripeidentity.StatusRequiresInput, stripeidentity.Review, "document_unverified_other"},
		{"event_requires_input_consent_declined.json", "evt_1QfixtureDeclined000000", stripeidentity.EventRequiresInput, stripeidentity.StatusRequiresInput, stripeidentity.Failed, "consent_declined"},
		{"event_requires_input_abandoned.json", "evt_1QfixtureAbandoned00000", stripeidentity.EventRequiresInput, stripeidentity.StatusRequiresInput, stripeidentity.Pending, "abandoned"},
		{"event_canceled.json", "evt_1QfixtureCanceled000000", stripeidentity.EventCanceled, stripeidentity.StatusCanceled, stripeidentity.Failed, "canceled"},
	}
	for _, tc := range tests {
		t.Run(tc.file, func(t *testing.T) {
			r, err := stripeidentity.ParseEvent(readFixture(t, tc.file))
			if err != nil {
				t.Fatal(err)
			}
			want := stripeidentity.Result{
				EventID: tc.eventID, EventType: tc.typ, Created: time.Unix(1764367260, 0).UTC(),
				SessionID: "vs_1QfixtureSession0000000", Reference: "ds_2hQ8fixtureDonorSession",
				Metadata: map[string]string{"reference": "ds_2hQ8fixtureDonorSession"},
				Status:   tc.status, Outcome: tc.outcome, Reason: tc.reason,
			}
			if !equalResults(r, want) {
				t.Fatalf("ParseEvent =\n%+v\nwant\n%+v", r, want)
			}
		})
	}
}

func equalResults(a, b stripeidentity.Result) bool {
	return a.EventID == b.EventID && a.EventType == b.EventType && a.Created.Equal(b.Created) &&
		a.Livemode == b.Livemode && a.SessionID == b.SessionID && a.Reference == b.Reference &&
		maps.Equal(a.Metadata, b.Metadata) && a.Status == b.Status && a.Outcome == b.Outcome && a.Reason == b.Reason
}

func TestParseEventIgnoresWhatTheServiceDoesNotUse(t *testing.T) {
	for _, tc := range []struct{ file, id, typ string }{
		{"event_created.json", "evt_1QfixtureCreated0000000", stripeidentity.EventCreated},
		{"event_other_object.json", "evt_1QfixtureCustomer0000000", "customer.created"},
	} {
		r, err := stripeidentity.ParseEvent(readFixture(t, tc.file))
		if !errors.Is(err, stripeidentity.ErrIgnored) {
			t.Fatalf("%s: err = %v, want ErrIgnored", tc.file, err)
		}
		if r.EventID != tc.id || r.EventType != tc.typ {
			t.Fatalf("%s: reported %s %s, want %s %s", tc.file, r.EventID, r.EventType, tc.id, tc.typ)
		}
	}
}

func TestParseEventRefusesMalformedEvents(t *testing.T) {
	verified := string(readFixture(t, "event_verified.json"))
	customer := string(readFixture(t, "event_other_object.json"))
	for name, body := range map[string]string{
		"not JSON":                  "t=1,v1=00",
		"not an event":              strings.Replace(verified, `"object": "event"`, `"object": "charge"`, 1),
		"no evt_ id":                strings.Replace(verified, `"evt_1QfixtureVerified000000"`, `"1QfixtureVerified"`, 1),
		"no data":                   `{"id":"evt_1","object":"event","type":"identity.verification_session.verified","created":1}`,
		"identity type, other data": strings.Replace(customer, `"customer.created"`, `"identity.verification_session.verified"`, 1),
		"session without vs_ id":    strings.Replace(verified, `"vs_1QfixtureSession0000000"`, `"1QfixtureSession"`, 1),
		"data.object not an object": strings.Replace(verified, `"data": {`, `"data": {"object": 1, "x": {`, 1),
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := stripeidentity.ParseEvent([]byte(body)); !errors.Is(err, stripeidentity.ErrInvalidEvent) {
				t.Fatalf("err = %v, want ErrInvalidEvent", err)
			}
		})
	}
}

// TestDecideCoversEveryDocumentedCode walks the last_error.code enumeration
// of the VerificationSession object (stripe-go's
// IdentityVerificationSessionLastErrorCode, generated from Stripe's OpenAPI
// document) so that a change to the mapping is a visible decision.
func TestDecideCoversEveryDocumentedCode(t *testing.T) {
	want := map[string]stripeidentity.Outcome{
		"abandoned":                            stripeidentity.Pending,
		"device_not_supported":                 stripeidentity.Pending,
		"consent_declined":                     stripeidentity.Failed,
		"under_supported_age":                  stripeidentity.Failed,
		"email_verification_declined":          stripeidentity.Failed,
		"phone_verification_declined":          stripeidentity.Failed,
		"country_not_supported":                stripeidentity.Review,
		"document_expired":                     stripeidentity.Review,
		"document_type_not_supported":          stripeidentity.Review,
		"document_unverified_other":            stripeidentity.Review,
		"email_unverified_other":               stripeidentity.Review,
		"id_number_insufficient_document_data": stripeidentity.Review,
		"id_number_mismatch":                   stripeidentity.Review,
		"id_number_unverified_other":           stripeidentity.Review,
		"phone_unverified_other":               stripeidentity.Review,
		"selfie_document_missing_photo":        stripeidentity.Review,
		"selfie_face_mismatch":                 stripeidentity.Review,
		"selfie_manipulated":                   stripeidentity.Review,
		"selfie_unverified_other":              stripeidentity.Review,
		"a_code_stripe_adds_later":             stripeidentity.Review,
	}
	for code, outcome := range want {
		got, reason := stripeidentity.Decide(stripeidentity.StatusRequiresInput, &stripeidentity.LastError{Code: code})
		if got != outcome || reason != code {
			t.Errorf("requires_input/%s = %s %q, want %s %q", code, got, reason, outcome, code)
		}
	}
	for _, tc := range []struct {
		status  stripeidentity.Status
		lastErr *stripeidentity.LastError
		want    stripeidentity.Outcome
	}{
		{stripeidentity.StatusRequiresInput, nil, stripeidentity.Pending},
		{stripeidentity.StatusRequiresInput, &stripeidentity.LastError{}, stripeidentity.Pending},
		{stripeidentity.StatusProcessing, nil, stripeidentity.Pending},
		{stripeidentity.StatusVerified, nil, stripeidentity.Passed},
		{stripeidentity.StatusCanceled, nil, stripeidentity.Failed},
	} {
		if got, _ := stripeidentity.Decide(tc.status, tc.lastErr); got != tc.want {
			t.Errorf("%s %v = %s, want %s", tc.status, tc.lastErr, got, tc.want)
		}
	}
}

// The outcomes are handed to the domain as they are; a rename on either
// side must fail here rather than at a donor.
func TestOutcomesSpellTheDomainsValues(t *testing.T) {
	for o, d := range map[stripeidentity.Outcome]string{
		stripeidentity.Passed:  domain.KYCPassed,
		stripeidentity.Review:  domain.KYCReview,
		stripeidentity.Failed:  domain.KYCFailed,
		stripeidentity.Pending: domain.KYCPending,
	} {
		if string(o) != d {
			t.Errorf("outcome %q, domain %q", o, d)
		}
	}
}

func TestBuildSignVerifyRoundTrip(t *testing.T) {
	now := time.Unix(1764370000, 0)
	for _, outcome := range []stripeidentity.Outcome{stripeidentity.Passed, stripeidentity.Review, stripeidentity.Failed} {
		t.Run(string(outcome), func(t *testing.T) {
			typ, lastErr, err := stripeidentity.OutcomeEvent(outcome)
			if err != nil {
				t.Fatal(err)
			}
			body, err := stripeidentity.BuildEvent(stripeidentity.EventParams{
				Type: typ, LastError: lastErr, Created: now,
				Metadata: map[string]string{stripeidentity.ReferenceKey: "ds_roundtrip"},
			})
			if err != nil {
				t.Fatal(err)
			}
			header := stripeidentity.Sign(fixtureSecret, body, now)
			r, err := stripeidentity.ParseWebhook(body, header, fixtureSecret, now.Add(time.Minute))
			if err != nil {
				t.Fatal(err)
			}
			if r.Outcome != outcome || r.Reference != "ds_roundtrip" || !strings.HasPrefix(r.EventID, "evt_") || !strings.HasPrefix(r.SessionID, "vs_") || r.EventType != typ {
				t.Fatalf("round trip gave %+v", r)
			}
			if _, err := stripeidentity.ParseWebhook(body, header, "whsec_other", now); !errors.Is(err, stripeidentity.ErrNoValidSignature) {
				t.Fatalf("wrong secret: err = %v", err)
			}
		})
	}
	if _, _, err := stripeidentity.OutcomeEvent(stripeidentity.Pending); !errors.Is(err, stripeidentity.ErrInvalidParams) {
		t.Fatalf("OutcomeEvent(pending) err = %v", err)
	}
}

// TestBuildEventHasTheDocumentedShape compares what BuildEvent renders with
// the fixture written from Stripe's documented objects, key by key.
func TestBuildEventHasTheDocumentedShape(t *testing.T) {
	body, err := stripeidentity.BuildEvent(stripeidentity.EventParams{
		EventID: "evt_1QfixtureVerified000000", SessionID: "vs_1QfixtureSession0000000",
		Type: stripeidentity.EventVerified, Created: time.Unix(1764367260, 0), SessionCreated: time.Unix(1764367200, 0),
		Metadata: map[string]string{"reference": "ds_2hQ8fixtureDonorSession"},
	})
	if err != nil {
		t.Fatal(err)
	}
	var got, want map[string]any
	if err := json.Unmarshal(body, &got); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(readFixture(t, "event_verified.json"), &want); err != nil {
		t.Fatal(err)
	}
	if k1, k2 := sortedKeys(got), sortedKeys(want); !slices.Equal(k1, k2) {
		t.Fatalf("event keys %v, documented %v", k1, k2)
	}
	gotObj := got["data"].(map[string]any)["object"].(map[string]any)
	wantObj := want["data"].(map[string]any)["object"].(map[string]any)
	if k1, k2 := sortedKeys(gotObj), sortedKeys(wantObj); !slices.Equal(k1, k2) {
		t.Fatalf("session keys %v, documented %v", k1, k2)
	}
	for _, k := range []string{"id", "object", "created", "type", "livemode"} {
		if got[k] != want[k] {
			t.Errorf("event %s = %v, fixture %v", k, got[k], want[k])
		}
	}
	for _, k := range []string{"id", "object", "created", "status", "type", "last_error", "url", "client_secret"} {
		if gotObj[k] != wantObj[k] {
			t.Errorf("session %s = %v, fixture %v", k, gotObj[k], wantObj[k])
		}
	}
}

func sortedKeys(m map[string]any) []string {
	return slices.Sorted(maps.Keys(m))
}

func TestBuildEventRefusesWhatStripeWouldNotSend(t *testing.T) {
	now := time.Now()
	for name, p := range map[string]stripeidentity.EventParams{
		"unknown type":   {Type: "identity.verification.completed", Created: now},
		"no time":        {Type: stripeidentity.EventVerified},
		"bad event id":   {Type: stripeidentity.EventVerified, Created: now, EventID: "ev_1"},
		"bad session id": {Type: stripeidentity.EventVerified, Created: now, SessionID: "ds_1"},
	} {
		if _, err := stripeidentity.BuildEvent(p); !errors.Is(err, stripeidentity.ErrInvalidParams) {
			t.Errorf("%s: err = %v", name, err)
		}
	}
}

func TestParseWebhookChecksTheSignatureFirst(t *testing.T) {
	now := time.Unix(1764370000, 0)
	body := []byte("not json at all")
	if _, err := stripeidentity.ParseWebhook(body, "t=1764370000,v1="+strings.Repeat("0", 64), fixtureSecret, now); !errors.Is(err, stripeidentity.ErrNoValidSignature) {
		t.Fatalf("unsigned garbage: err = %v, want a signature error", err)
	}
	if _, err := stripeidentity.ParseWebhook(body, stripeidentity.Sign(fixtureSecret, body, now), fixtureSecret, now); !errors.Is(err, stripeidentity.ErrInvalidEvent) {
		t.Fatalf("signed garbage: err = %v, want ErrInvalidEvent", err)
	}
}
