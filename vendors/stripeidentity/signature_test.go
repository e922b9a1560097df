package stripeidentity_test

import (
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/partnergiving/giving/vendors/stripeidentity"
)

// The signature fixture was computed outside this package, following
// Stripe's "Verify webhook signatures manually" steps with openssl:
//
//	{ printf '%s.' 1764367290; cat testdata/event_verified.json; } |
//	  openssl dgst -sha256 -hmac 'whsec_fixtureSecretFromTheDashboard'
//
// and the same with the rolling secret for the second signature.
const (
	fixtureSecret    = "whsec_fixtureSecretFromTheDashboard"
	fixtureOldSecret = "whsec_previousSecretStillRolling"
	fixtureT         = 1764367290
	fixtureSig       = "0ef0892c4e35555e0ebbd52129c616aea77c8598bda2637a17cc9c045a0783bb"
	fixtureOldSig    = "e6a5682f797f87d20f3ab8cf02a4853cff98a6b83fb118f825a63154d802f2e9"
)

func readFixture(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile("testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestVerifySignature(t *testing.T) {
	body := readFixture(t, "event_verified.json")
	tampered := []byte(strings.Replace(string(body), `"status": "verified"`, `"status": "verifieD"`, 1))
	signedAt := time.Unix(fixtureT, 0)
	good := "t=1764367290,v1=" + fixtureSig
	tests := []struct {
		name   string
		header string
		body   []byte
		secret string
		now    time.Time
		want   error
	}{
		{"documented fixture", good, body, fixtureSecret, signedAt.Add(10 * time.Second), nil},
		{"at the tolerance", good, body, fixtureSecret, signedAt.Add(300 * time.Second), nil},
		{"just past the tolerance", good, body, fixtureSecret, signedAt.Add(301 * time.Second), stripeidentity.ErrTooOld},
		{"from the future", good, body, fixtureSecret, signedAt.Add(-301 * time.Second), stripeidentity.ErrTooOld},
		{"rolling secret: new signature second", "t=1764367290,v1=" + fixtureOldSig + ",v1=" + fixtureSig, body, fixtureSecret, signedAt, nil},
		{"rolling secret: old secret still verifies", "t=1764367290,v1=" + fixtureOldSig + ",v1=" + fixtureSig, body, fixtureOldSecret, signedAt, nil},
		{"v0 test-mode signature ignored", "t=1764367290,v1=" + fixtureSig + ",v0=deadbeef", body, fixtureSecret, signedAt, nil},
		{"spaces after commas", "t=1764367290, v1=" + fixtureSig, body, fixtureSecret, signedAt, nil},
		{"tampered body", good, tampered, fixtureSecret, signedAt, stripeidentity.ErrNoValidSignature},
		{"wrong secret", good, body, "whsec_someoneElse", signedAt, stripeidentity.ErrNoValidSignature},
		{"secret without its whsec_ prefix", good, body, strings.TrimPrefix(fixtureSecret, "whsec_"), signedAt, stripeidentity.ErrNoValidSignature},
		{"timestamp changed", "t=1764367291,v1=" + fixtureSig, body, fixtureSecret, signedAt, stripeidentity.ErrNoValidSignature},
		{"only v0", "t=1764367290,v0=" + fixtureSig, body, fixtureSecret, signedAt, stripeidentity.ErrNoValidSignature},
		{"v1 not hex", "t=1764367290,v1=zz" + fixtureSig[2:], body, fixtureSecret, signedAt, stripeidentity.ErrNoValidSignature},
		{"v1 truncated", "t=1764367290,v1=" + fixtureSig[:62], body, fixtureSecret, signedAt, stripeidentity.ErrNoValidSignature},
		{"no header", "", body, fixtureSecret, signedAt, stripeidentity.ErrNotSigned},
		{"no timestamp", "v1=" + fixtureSig, body, fixtureSecret, signedAt, stripeidentity.ErrInvalidHeader},
		{"timestamp not a number", "t=17643672x0,v1=" + fixtureSig, body, fixtureSecret, signedAt, stripeidentity.ErrInvalidHeader},
		{"two timestamps", "t=1764367290,t=1764367290,v1=" + fixtureSig, body, fixtureSecret, signedAt, stripeidentity.ErrInvalidHeader},
		{"element without =", "t=1764367290,v1", body, fixtureSecret, signedAt, stripeidentity.ErrInvalidHeader},
		{"empty body", good, nil, fixtureSecret, signedAt, stripeidentity.ErrNoValidSignature},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := stripeidentity.VerifySignature(tc.header, tc.body, tc.secret, tc.now)
			if !errors.Is(err, tc.want) || (tc.want == nil && err != nil) {
				t.Fatalf("VerifySignature = %v, want %v", err, tc.want)
			}
			if tc.want != nil && !errors.Is(err, stripeidentity.ErrSignature) {
				t.Fatalf("%v does not wrap ErrSignature", err)
			}
		})
	}
}

func TestSignReproducesTheFixture(t *testing.T) {
	body := readFixture(t, "event_verified.json")
	got := stripeidentity.Sign(fixtureSecret, body, time.Unix(fixtureT, 0))
	if want := "t=1764367290,v1=" + fixtureSig; got != want {
		t.Fatalf("Sign = %s, want %s", got, want)
	}
}
