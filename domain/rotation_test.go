package domain_test

import (
	"crypto/ed25519"
	"encoding/base64"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/partnergiving/giving/domain"
)

// headers collects what a signer hands out, every line of every header.
func headers(s domain.WebhookSigner, id string, t time.Time, body []byte) map[string][]string {
	h := map[string][]string{}
	s.Headers(id, 1, t, body, func(k, v string) { h[k] = append(h[k], v) })
	return h
}

func TestSignerDuringAndAfterAnOverlap(t *testing.T) {
	oldSecret, newSecret := domain.GenerateWebhookSecret(), domain.GenerateWebhookSecret()
	at := time.Now()
	until := at.Add(time.Minute)
	sign := domain.NewWebhookSigner(newSecret).WithPrevious(domain.NewWebhookSigner(oldSecret), until)
	body := []byte(`{"event_id":"evt_1"}`)

	during := headers(sign, "evt_1", at, body)
	lines := during[domain.WebhookSignatureHeader]
	if len(lines) != 2 {
		t.Fatalf("Service-Signature during the overlap: %q, want a line per secret", lines)
	}
	// Rule 1 holds for each line: one v1 each, the previous secret's first.
	if err := domain.VerifySignature(lines[0], []byte(oldSecret), body, at); err != nil {
		t.Fatalf("first line with the previous secret: %v", err)
	}
	if err := domain.VerifySignature(lines[1], []byte(newSecret), body, at); err != nil {
		t.Fatalf("second line with the new secret: %v", err)
	}
	for _, secret := range []string{oldSecret, newSecret} {
		if err := domain.VerifyAnySignature(lines, [][]byte{[]byte(secret)}, body, at); err != nil {
			t.Fatalf("a receiver holding one secret: %v", err)
		}
	}
	std := strings.Split(during[domain.StandardSignatureHeader][0], " ")
	ts := strconv.FormatInt(at.Unix(), 10)
	if len(std) != 2 || std[0] != domain.SignStandard(newSecret, "evt_1", at, body) || std[1] != domain.SignStandard(oldSecret, "evt_1", at, body) {
		t.Fatalf("webhook-signature %q, want v1,<new> v1,<old> (timestamp %s)", std, ts)
	}

	after := headers(sign, "evt_1", until, body)
	if lines := after[domain.WebhookSignatureHeader]; len(lines) != 1 || domain.VerifySignature(lines[0], []byte(newSecret), body, until) != nil {
		t.Fatalf("Service-Signature at the expiry: %q, want the new secret's only", lines)
	}
	if err := domain.VerifyAnySignature(after[domain.WebhookSignatureHeader], [][]byte{[]byte(oldSecret)}, body, until); !errors.Is(err, domain.ErrBadSignature) {
		t.Fatalf("the previous secret after its expiry: %v, want ErrBadSignature", err)
	}
	if std := after[domain.StandardSignatureHeader]; len(std) != 1 || strings.Contains(std[0], " ") {
		t.Fatalf("webhook-signature at the expiry: %q, want one signature", std)
	}
	// A line of another form makes the delivery fail rule 1, whatever the
	// other lines say.
	if err := domain.VerifyAnySignature(append(lines, "v1=00"), [][]byte{[]byte(oldSecret), []byte(newSecret)}, body, at); !errors.Is(err, domain.ErrBadSignature) {
		t.Fatalf("a malformed line: %v", err)
	}
}

// TestEd25519SignatureAsTheStandardDescribes verifies v1a with crypto/ed25519
// alone: the whpk_ key is base64 of the public key, the signature base64
// after "v1a,", over "<webhook-id>.<webhook-timestamp>.<body>".
func TestEd25519SignatureAsTheStandardDescribes(t *testing.T) {
	private, public := domain.GenerateSigningKey()
	oldPrivate, oldPublic := domain.GenerateSigningKey()
	if !strings.HasPrefix(private, "whsk_") || !strings.HasPrefix(public, "whpk_") {
		t.Fatalf("keys %q, %q: want whsk_ and whpk_", private[:8], public)
	}
	key, err := domain.ParseSigningKey(private)
	if err != nil {
		t.Fatal(err)
	}
	oldKey, _ := domain.ParseSigningKey(oldPrivate)
	secret := domain.GenerateWebhookSecret()
	at := time.Now()
	sign := domain.NewWebhookSigner(secret).WithSigningKey(key).
		WithPrevious(domain.NewWebhookSigner(domain.GenerateWebhookSecret()).WithSigningKey(oldKey), at.Add(time.Minute))
	body := []byte(`{"event_id":"evt_2"}`)
	h := headers(sign, "evt_2", at, body)
	msg := []byte("evt_2." + h[domain.StandardTimestampHeader][0] + "." + string(body))
	sigs := strings.Split(h[domain.StandardSignatureHeader][0], " ")
	if len(sigs) != 2 {
		t.Fatalf("webhook-signature %q, want two v1a signatures", sigs)
	}
	for i, pk := range []string{public, oldPublic} {
		raw, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(pk, "whpk_"))
		if err != nil || len(raw) != ed25519.PublicKeySize {
			t.Fatalf("public key %q: %v", pk, err)
		}
		version, sig, _ := strings.Cut(sigs[i], ",")
		b, err := base64.StdEncoding.DecodeString(sig)
		if version != "v1a" || err != nil || !ed25519.Verify(raw, msg, b) {
			t.Fatalf("signature %d %q does not verify with %s", i, sigs[i], pk)
		}
	}
	// Service-Signature stays HMAC with the whsec_ secret, as the spec says.
	if err := domain.VerifyAnySignature(h[domain.WebhookSignatureHeader], [][]byte{[]byte(secret)}, body, at); err != nil {
		t.Fatalf("Service-Signature of an ed25519 endpoint: %v", err)
	}
}

func TestUpdateWebhookEndpoint(t *testing.T) {
	now := time.Now()
	created := domain.NewEvent("pt_1", "we_1", "", now, &domain.WebhookEndpointCreated{
		URL: "https://a.example/h", EventTypes: []string{"*"}, SealedSecret: []byte("s"), Metadata: map[string]string{"team": "core"},
	})
	ep := domain.Fold[domain.WebhookEndpoint]([]domain.Event{created})
	str := func(s string) *string { return &s }
	long := strings.Repeat("x", 41)
	for name, c := range map[string]struct {
		change domain.WebhookEndpointChange
		field  string // the field refused; empty when accepted
		none   bool   // accepted, nothing changes
	}{
		"new url":           {change: domain.WebhookEndpointChange{URL: str(" https://b.example/h ")}},
		"same url":          {change: domain.WebhookEndpointChange{URL: str("https://a.example/h")}, none: true},
		"nothing":           {none: true},
		"ftp url":           {change: domain.WebhookEndpointChange{URL: str("ftp://a.example/h")}, field: "url"},
		"unknown type":      {change: domain.WebhookEndpointChange{EventTypes: &[]string{"nope.nope"}}, field: "event_types"},
		"no types":          {change: domain.WebhookEndpointChange{EventTypes: &[]string{}}, field: "event_types"},
		"metadata key":      {change: domain.WebhookEndpointChange{Metadata: map[string]string{long: "v"}}, field: "metadata"},
		"metadata value":    {change: domain.WebhookEndpointChange{Metadata: map[string]string{"k": strings.Repeat("v", 501)}}, field: "metadata"},
		"metadata unset":    {change: domain.WebhookEndpointChange{Metadata: map[string]string{"team": ""}}},
		"description":       {change: domain.WebhookEndpointChange{Description: str(strings.Repeat("d", 501))}, field: "description"},
		"scheme":            {change: domain.WebhookEndpointChange{Scheme: str("rsa")}, field: "signature_scheme"},
		"same scheme":       {change: domain.WebhookEndpointChange{Scheme: str(domain.SchemeHMAC)}, none: true},
		"metadata too many": {change: domain.WebhookEndpointChange{Metadata: manyKeys(51)}, field: "metadata"},
	} {
		t.Run(name, func(t *testing.T) {
			ev, err := domain.UpdateWebhookEndpoint(&ep, "we_1", c.change, now)
			if c.field != "" {
				if !isProblem(err, domain.ProblemValidation) || !strings.Contains(err.Error(), c.field) {
					t.Fatalf("err %v, want a validation error naming %s", err, c.field)
				}
				return
			}
			if err != nil || (ev == nil) != c.none {
				t.Fatalf("event %v, err %v (want none: %v)", ev, err, c.none)
			}
		})
	}
	moved, _ := domain.UpdateWebhookEndpoint(&ep, "we_1", domain.WebhookEndpointChange{URL: str("https://b.example/h"), Metadata: map[string]string{"team": "", "env": "live"}}, now)
	after := domain.Fold[domain.WebhookEndpoint]([]domain.Event{created, *moved})
	if after.URL != "https://b.example/h" || len(after.Metadata) != 1 || after.Metadata["env"] != "live" || string(after.SealedSecret) != "s" {
		t.Fatalf("after the update: %+v", after)
	}
	// Every change reads back from the ledger's bytes as it was decided,
	// the removal of the last metadata key included.
	cleared, _ := domain.UpdateWebhookEndpoint(&after, "we_1", domain.WebhookEndpointChange{Metadata: map[string]string{"env": ""}, Description: str("")}, now)
	env, err := cleared.Envelope()
	if err != nil {
		t.Fatal(err)
	}
	stored, err := domain.DecodeStored("pt_1", "we_1", false, env)
	if err != nil {
		t.Fatal(err)
	}
	if got := domain.Fold[domain.WebhookEndpoint]([]domain.Event{created, *moved, stored}); len(got.Metadata) != 0 {
		t.Fatalf("metadata after removing its last key, read back: %v", got.Metadata)
	}

	var missing domain.WebhookEndpoint
	if _, err := domain.UpdateWebhookEndpoint(&missing, "we_2", domain.WebhookEndpointChange{}, now); !isProblem(err, domain.ProblemNotFound) {
		t.Fatalf("update of a missing endpoint: %v", err)
	}
}

func manyKeys(n int) map[string]string {
	m := map[string]string{}
	for i := range n {
		m["k"+strconv.Itoa(i)] = "v"
	}
	return m
}

func TestRotateWebhookSecret(t *testing.T) {
	now := time.Now()
	created := domain.NewEvent("pt_1", "we_1", "", now, &domain.WebhookEndpointCreated{URL: "https://a.example/h", EventTypes: []string{"*"}, SealedSecret: []byte("s1")})
	ep := domain.Fold[domain.WebhookEndpoint]([]domain.Event{created})
	ev, err := domain.RotateWebhookSecret(&ep, "we_1", []byte("s2"), nil, time.Hour, now)
	if err != nil {
		t.Fatal(err)
	}
	pub := ev.Payload.(*domain.WebhookSecretRotated)
	if pub.WebhookEndpointID != "we_1" || pub.PreviousExpiresAt != domain.FormatTime(ev.OccurredAt.Add(time.Hour)) {
		t.Fatalf("public payload %+v", pub)
	}
	if env, _ := ev.Envelope(); strings.Contains(string(env), "sealed") {
		t.Fatalf("the public envelope carries the sealed secret: %s", env)
	}
	rotated := domain.Fold[domain.WebhookEndpoint]([]domain.Event{created, ev})
	if string(rotated.SealedSecret) != "s2" || rotated.Previous == nil || string(rotated.Previous.SealedSecret) != "s1" {
		t.Fatalf("after the rotation: %+v", rotated)
	}
	if rotated.PreviousUntil(now.Add(59*time.Minute)).IsZero() || !rotated.PreviousUntil(now.Add(time.Hour+time.Second)).IsZero() {
		t.Fatal("the previous secret's overlap is not the hour asked for")
	}
	// A second rotation drops the oldest secret at once.
	again, _ := domain.RotateWebhookSecret(&rotated, "we_1", []byte("s3"), nil, 0, now)
	third := domain.Fold[domain.WebhookEndpoint]([]domain.Event{created, ev, again})
	if string(third.Previous.SealedSecret) != "s2" || !third.PreviousUntil(now.Add(time.Second)).IsZero() {
		t.Fatalf("after a second rotation with no overlap: %+v", third.Previous)
	}
	for _, secs := range []int64{-1, 604801} {
		if _, err := domain.ValidateOverlap(secs); !isProblem(err, domain.ProblemValidation) {
			t.Fatalf("expire_current_in %d: %v", secs, err)
		}
	}
}

func TestRollAndRevokeKeys(t *testing.T) {
	now := time.Now()
	first := domain.GenerateKey(domain.Sandbox)
	evs := []domain.Event{
		domain.NewEvent("pt_1", "pt_1", "", now, &domain.PartnerCreated{Name: "P", Environment: "sandbox"}),
		domain.NewEvent("pt_1", "pt_1", "", now, &domain.KeyIssued{KeyID: first.ID, Prefix: first.Prefix, Hash: first.Hash}),
	}
	p := domain.Fold[domain.Partner](evs)
	second := domain.GenerateKey(domain.Sandbox)
	rolled, err := domain.RollKey(&p, first.ID, second, time.Hour, now)
	if err != nil {
		t.Fatal(err)
	}
	p = domain.Fold[domain.Partner](append(evs, rolled))
	if len(p.Keys) != 2 || !p.Keys[0].Live(now.Add(59*time.Minute)) || p.Keys[0].Live(now.Add(2*time.Hour)) || !p.Keys[1].Live(now.Add(24*time.Hour)) {
		t.Fatalf("keys after the roll: %+v", p.Keys)
	}
	// Rolling the old key again never lengthens its life.
	third := domain.GenerateKey(domain.Sandbox)
	again, _ := domain.RollKey(&p, first.ID, third, 7*24*time.Hour, now)
	if got := again.Payload.(*domain.KeyRolled).PreviousExpiresAt; !got.Equal(*p.Keys[0].ExpiresAt) {
		t.Fatalf("a second roll moved the expiry to %s", got)
	}
	if _, err := domain.RollKey(&p, first.ID, third, 7*24*time.Hour+time.Second, now); !isProblem(err, domain.ProblemValidation) {
		t.Fatalf("an overlap past 7 days: %v", err)
	}
	if _, err := domain.RevokeOtherKey(&p, second.Prefix, second.ID, now); !isProblem(err, domain.ProblemKeyInUse) {
		t.Fatalf("a key revoking itself: %v", err)
	}
	if _, err := domain.RevokeOtherKey(&p, "sk_test_nothere", second.ID, now); !isProblem(err, domain.ProblemNotFound) {
		t.Fatalf("an unknown prefix: %v", err)
	}
	if _, err := domain.RevokeOtherKey(&p, first.Prefix, second.ID, now.Add(2*time.Hour)); !isProblem(err, domain.ProblemNotFound) {
		t.Fatalf("an expired key: %v", err)
	}
	revoked, err := domain.RevokeOtherKey(&p, first.Prefix, second.ID, now)
	if err != nil || revoked.Payload.(*domain.KeyRevoked).KeyID != first.ID {
		t.Fatalf("revoking the old key with the new one: %v %v", revoked, err)
	}
}

// isProblem reports whether err is a domain error of problem p.
func isProblem(err error, p domain.Problem) bool {
	var de *domain.Error
	return errors.As(err, &de) && de.Code == p.Code
}
