package domain_test

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/partnergiving/giving/domain"
)

func TestNormalizeOrigin(t *testing.T) {
	tests := []struct {
		in, want string // want empty: refused
	}{
		{"https://example.org", "https://example.org"},
		{"https://example.org/", "https://example.org"},
		{"https://EXAMPLE.org", "https://example.org"},
		{"HTTPS://Example.ORG", "https://example.org"},
		{"https://example.org:443", "https://example.org"},
		{"https://example.org:8443", "https://example.org:8443"},
		{"https://[::1]:8443", "https://[::1]:8443"},
		{"https://[::1]", "https://[::1]"},
		{"https://localhost", "https://localhost"},
		{"http://example.org", ""},
		{"ftp://example.org", ""},
		{"example.org", ""},
		{"//example.org", ""},
		{"https://", ""},
		{"https://:443", ""},
		{"https:example.org", ""},
		{"https:///path", ""},
		{"https://example.org/path", ""},
		{"https://user:pw@example.org", ""},
		{"https://user@example.org", ""},
		{"https://example.org?q=1", ""},
		{"https://example.org?", ""},
		{"https://example.org#frag", ""},
		{"https://example.org#", ""},
		{"https://example.org:0", ""},
		{"https://example.org:65536", ""},
		{"https://example.org:port", ""},
		{"https://exa mple.org", ""},
		{"", ""},
	}
	for _, tt := range tests {
		got, err := domain.NormalizeOrigin(tt.in)
		if tt.want == "" {
			var de *domain.Error
			if err == nil || !errors.As(err, &de) || de.Kind != domain.KindInvalid {
				t.Errorf("NormalizeOrigin(%q) = %q, %v; want a KindInvalid error", tt.in, got, err)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("NormalizeOrigin(%q) = %q, %v; want %q", tt.in, got, err, tt.want)
		}
	}
}

func TestGenerateKey(t *testing.T) {
	seen := map[string]bool{}
	for _, env := range []domain.Environment{domain.Sandbox, domain.Production} {
		for range 200 {
			k := domain.GenerateKey(env)
			if !strings.HasPrefix(k.Secret, env.KeyPrefix()) || len(k.Secret) != len(env.KeyPrefix())+32 {
				t.Fatalf("%s key %q: wrong prefix or length", env, k.Secret)
			}
			if !domain.WellFormedKey(env, k.Secret) {
				t.Fatalf("%s key %q is not well formed", env, k.Secret)
			}
			if k.Prefix != k.Secret[:len(env.KeyPrefix())+8] {
				t.Fatalf("display prefix %q of %q", k.Prefix, k.Secret)
			}
			if k.Hash != domain.HashSecret(k.Secret) || strings.Contains(k.Hash, k.Secret) {
				t.Fatalf("hash %q of %q", k.Hash, k.Secret)
			}
			if !domain.ValidID(domain.PrefixKey, k.ID) {
				t.Fatalf("key id %q", k.ID)
			}
			if seen[k.Secret] || seen[k.Prefix] {
				t.Fatalf("key %q repeats an earlier key or prefix", k.Secret)
			}
			seen[k.Secret], seen[k.Prefix] = true, true
		}
	}
}

func TestHashKeyIsSHA256Hex(t *testing.T) {
	sum := sha256.Sum256([]byte("sk_test_abc"))
	if got := domain.HashSecret("sk_test_abc"); got != hex.EncodeToString(sum[:]) {
		t.Fatalf("HashSecret = %s", got)
	}
	if domain.HashSecret("a") == domain.HashSecret("b") {
		t.Fatal("different keys hash alike")
	}
}

func TestWellFormedKey(t *testing.T) {
	test := domain.GenerateKey(domain.Sandbox).Secret
	live := domain.GenerateKey(domain.Production).Secret
	tests := []struct {
		env  domain.Environment
		key  string
		want bool
	}{
		{domain.Sandbox, test, true},
		{domain.Production, live, true},
		{domain.Sandbox, live, false},
		{domain.Production, test, false},
		{domain.Sandbox, "", false},
		{domain.Sandbox, "sk_test_", false},
		{domain.Sandbox, test[:len(test)-1], false},
		{domain.Sandbox, test + "A", false},
		{domain.Sandbox, "sk_test_" + strings.Repeat("-", 32), false},
		{domain.Sandbox, "sk_test_" + strings.Repeat("é", 16), false},
		{domain.Sandbox, "SK_TEST_" + test[8:], false},
		{domain.Sandbox, " " + test, false},
	}
	for _, tt := range tests {
		if got := domain.WellFormedKey(tt.env, tt.key); got != tt.want {
			t.Errorf("WellFormedKey(%s, %q) = %v, want %v", tt.env, tt.key, got, tt.want)
		}
	}
}

func TestPartnerLifecycle(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 6_000_000, time.UTC)
	id := domain.NewID(domain.PrefixPartner)
	var p domain.Partner
	if _, err := domain.IssueKey(&p, domain.GenerateKey(domain.Sandbox), now); domain.ErrorKind(err) != domain.KindNotFound {
		t.Fatalf("key for a missing partner: %v", err)
	}
	if _, err := domain.CreatePartner(&p, id, " ", domain.Sandbox, []string{"http://x.org", "https://ok.org"}, domain.Brand{}, now); err == nil {
		t.Fatal("blank name and http origin accepted")
	} else if de := err.(*domain.Error); len(de.Fields) != 2 || de.Fields[0].Field != "name" || de.Fields[1].Field != "redirect_origins" {
		t.Fatalf("validation fields: %+v", de.Fields)
	}
	ev, err := domain.CreatePartner(&p, id, " Acme ", domain.Sandbox, []string{"https://B.org", "https://a.org:443", "https://b.org/"}, domain.Brand{}, now)
	if err != nil {
		t.Fatal(err)
	}
	p.Apply(ev)
	if p.Name != "Acme" || strings.Join(p.RedirectOrigins, " ") != "https://a.org https://b.org" || !p.CreatedAt.Equal(now.Truncate(time.Millisecond)) {
		t.Fatalf("partner %+v", p)
	}
	if _, err := domain.CreatePartner(&p, id, "Acme", domain.Sandbox, nil, domain.Brand{}, now); domain.ErrorKind(err) != domain.KindConflict {
		t.Fatalf("second create: %v", err)
	}
	k := domain.GenerateKey(domain.Sandbox)
	ev, err = domain.IssueKey(&p, k, now)
	if err != nil {
		t.Fatal(err)
	}
	if issued := ev.Payload.(*domain.KeyIssued); issued.Hash != k.Hash || issued.Prefix != k.Prefix {
		t.Fatalf("issued %+v", issued)
	}
	if data, _ := ev.Envelope(); strings.Contains(string(data), k.Secret) {
		t.Fatal("the key's secret reached the event")
	}
	p.Apply(ev)
	if _, err := domain.RevokeKey(&p, "key_nope", now); domain.ErrorKind(err) != domain.KindNotFound {
		t.Fatalf("revoke unknown: %v", err)
	}
	ev, err = domain.RevokeKey(&p, k.ID, now)
	if err != nil {
		t.Fatal(err)
	}
	p.Apply(ev)
	if p.Keys[0].RevokedAt == nil {
		t.Fatal("key not revoked")
	}
	if _, err := domain.RevokeKey(&p, k.ID, now); domain.ErrorKind(err) != domain.KindConflict {
		t.Fatalf("second revoke: %v", err)
	}
}
