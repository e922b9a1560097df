package domain_test

import (
	"bytes"
	"encoding/base64"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/partnergiving/giving/domain"
)

func TestValidateWebhookEndpoint(t *testing.T) {
	ok := []string{"*"}
	cases := []struct {
		name, url string
		types     []string
		field     string // "" when valid
	}{
		{"https", "https://partner.example/hooks", ok, ""},
		{"http with port", "http://127.0.0.1:8080/hooks?x=1", ok, ""},
		{"trimmed", "  https://partner.example/hooks  ", ok, ""},
		{"empty url", "", ok, "url"},
		{"relative", "/hooks", ok, "url"},
		{"no host", "https:///hooks", ok, "url"},
		{"opaque", "https:partner.example", ok, "url"},
		{"ftp", "ftp://partner.example/x", ok, "url"},
		{"credentials", "https://u:p@partner.example/x", ok, "url"},
		{"fragment", "https://partner.example/x#y", ok, "url"},
		{"space", "https://partner.example/a b", ok, "url"},
		{"port zero", "https://partner.example:0/x", ok, "url"},
		{"port too big", "https://partner.example:65536/x", ok, "url"},
		{"empty port", "https://partner.example:/x", ok, "url"},
		{"too long", "https://partner.example/" + strings.Repeat("a", 2048), ok, "url"},
		{"no types", "https://partner.example/x", nil, "event_types"},
		{"unknown type", "https://partner.example/x", []string{"enrollment.deleted"}, "event_types"},
		{"internal type", "https://partner.example/x", []string{"webhook_endpoint.created"}, "event_types"},
		{"test type", "https://partner.example/x", []string{domain.WebhookTestEventType}, "event_types"},
		{"too many", "https://partner.example/x", slices.Repeat([]string{"*"}, 33), "event_types"},
		{"known types", "https://partner.example/x", []string{"enrollment.created", "enrollment.activated", "deposit.received"}, ""},
	}
	for _, tc := range cases {
		_, _, err := domain.ValidateWebhookEndpoint(tc.url, tc.types)
		var de *domain.Error
		switch {
		case tc.field == "" && err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case tc.field != "" && (!errors.As(err, &de) || de.Kind != domain.KindInvalid || de.Fields[0].Field != tc.field):
			t.Errorf("%s: want invalid %s, got %v", tc.name, tc.field, err)
		}
	}
	u, types, err := domain.ValidateWebhookEndpoint(" https://p.example/x ", []string{"enrollment.created", "*", "enrollment.created"})
	if err != nil || u != "https://p.example/x" || !slices.Equal(types, []string{"enrollment.created", "*"}) {
		t.Fatalf("normalised to %q %v (%v)", u, types, err)
	}
}

func TestSubscribableEventTypes(t *testing.T) {
	got := domain.PublicEventTypes()
	spec, _ := domain.EventTypeSpec(domain.WebhookTestEventType)
	if slices.Contains(got, domain.WebhookTestEventType) || !spec.Public || !spec.TestOnly {
		t.Fatalf("the test delivery's type must be enveloped as public but neither subscribable nor on the feed: %v %+v", got, spec)
	}
	ep := domain.WebhookEndpoint{EventTypes: []string{"enrollment.activated"}}
	if !ep.Subscribes("enrollment.activated") || ep.Subscribes("enrollment.created") {
		t.Error("Subscribes ignores the list")
	}
	ep.EventTypes = []string{"*"}
	if !ep.Subscribes("deposit.received") {
		t.Error(`"*" does not subscribe to everything`)
	}
}

func TestWebhookEndpointLifecycle(t *testing.T) {
	var ep domain.WebhookEndpoint
	n := domain.NewWebhookEndpoint{ID: domain.NewID(domain.PrefixEndpoint), PartnerID: "pt_a", URL: "https://p.example/x", EventTypes: []string{"*"}, SealedSecret: []byte("sealed")}
	now := time.Now()
	ev, err := domain.CreateWebhookEndpoint(&ep, n, now)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ev.Envelope(); err != nil {
		t.Fatal(err)
	}
	if _, err := domain.DeleteWebhookEndpoint(&ep, n.ID, now); domain.ErrorKind(err) != domain.KindNotFound {
		t.Fatalf("deleting an endpoint never created: %v", err)
	}
	ep.Apply(ev)
	if !ep.Exists() || ep.ID != n.ID || ep.URL != n.URL || string(ep.SealedSecret) != "sealed" {
		t.Fatalf("applied: %+v", ep)
	}
	if _, err := domain.CreateWebhookEndpoint(&ep, n, now); domain.ErrorKind(err) != domain.KindConflict {
		t.Fatalf("second create: %v", err)
	}
	del, err := domain.DeleteWebhookEndpoint(&ep, n.ID, now)
	if err != nil {
		t.Fatal(err)
	}
	ep.Apply(del)
	if ep.Exists() {
		t.Fatal("deleted endpoint still exists")
	}
	if _, err := domain.DeleteWebhookEndpoint(&ep, n.ID, now); domain.ErrorKind(err) != domain.KindNotFound {
		t.Fatalf("second delete: %v", err)
	}
	n.SealedSecret = nil
	if _, err := domain.CreateWebhookEndpoint(&domain.WebhookEndpoint{}, n, now); err == nil {
		t.Fatal("created without a sealed secret")
	}
}

func TestGenerateWebhookSecret(t *testing.T) {
	a, b := domain.GenerateWebhookSecret(), domain.GenerateWebhookSecret()
	// Standard base64, as the Standard Webhooks libraries decode it, and the
	// key they derive is the one the signer uses.
	raw, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(a, "whsec_"))
	if !strings.HasPrefix(a, "whsec_") || err != nil || len(raw) != 32 || a == b || !bytes.Equal(domain.StandardKey(a), raw) {
		t.Fatalf("secrets %q %q (%v)", a, b, err)
	}
	// A secret issued before, in unpadded base64url, keeps a key of its
	// 32 bytes.
	old := "whsec_" + base64.RawURLEncoding.EncodeToString(raw)
	if !bytes.Equal(domain.StandardKey(old), raw) {
		t.Fatalf("old secret %q: key %x", old, domain.StandardKey(old))
	}
}

func TestWebhookTestEnvelope(t *testing.T) {
	ev := domain.NewEvent("pt_a", "we_x", "", time.Now(), &domain.WebhookEndpointTested{WebhookEndpointID: "we_x"})
	data, err := ev.Envelope()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(data), `"event_type":"webhook_endpoint.test"`) || !strings.Contains(string(data), `"church_id":""`) ||
		!strings.HasSuffix(string(data), `"payload":{"webhook_endpoint_id":"we_x"}}`) {
		t.Fatalf("test envelope: %s", data)
	}
}
