package eventlog_test

import (
	"context"
	"errors"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"

	"github.com/partnergiving/giving/domain"
	"github.com/partnergiving/giving/eventlog"
)

// The embedded server's loopback listener takes only clients presenting the
// token kept in the data directory: any local user can reach the port, and
// the ledger holds key hashes and money.
func TestEmbeddedNATSRequiresToken(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	l, err := eventlog.Open(ctx, eventlog.Config{Env: domain.Sandbox, DataDir: dir, NATSListen: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	u, err := url.Parse(l.ClientURL())
	if err != nil || u.Host == "" {
		t.Fatalf("client url %q: %v", l.ClientURL(), err)
	}
	path := filepath.Join(dir, eventlog.NATSTokenFile)
	info, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if info.Mode().Perm() != 0o600 {
		t.Fatalf("%s has mode %v, want 0600", path, info.Mode().Perm())
	}
	data, _ := os.ReadFile(path)
	token := strings.TrimSpace(string(data))
	if !regexp.MustCompile(`^[0-9a-f]{64}$`).MatchString(token) {
		t.Fatalf("token %q is not 32 random bytes in hex", token)
	}

	for name, addr := range map[string]string{
		"no token":    "nats://" + u.Host,
		"wrong token": "nats://" + strings.Repeat("0", 64) + "@" + u.Host,
		"user:pass":   "nats://giving:" + token + "@" + u.Host,
	} {
		nc, err := nats.Connect(addr)
		if err == nil {
			nc.Close()
			t.Fatalf("%s: connected without the token", name)
		}
		if !errors.Is(err, nats.ErrAuthorization) {
			t.Fatalf("%s: %v, want an authorization error", name, err)
		}
	}
	// With the token, another process reaches the ledger.
	for _, opts := range [][]nats.Option{{nats.Token(token)}, nil} {
		addr := "nats://" + u.Host
		if opts == nil {
			addr = l.ClientURL()
		}
		nc, err := nats.Connect(addr, opts...)
		if err != nil {
			t.Fatalf("connect with the token: %v", err)
		}
		if _, err := nc.Request("$JS.API.INFO", nil, nats.DefaultTimeout); err != nil {
			t.Fatalf("JetStream with the token: %v", err)
		}
		nc.Close()
	}
	other, err := eventlog.Open(ctx, eventlog.Config{Env: domain.Sandbox, NATSURL: l.ClientURL()})
	if err != nil {
		t.Fatalf("a second instance with the client url: %v", err)
	}
	other.Close()

	// The token is made once: a restart keeps it.
	l.Close()
	again, err := eventlog.Open(ctx, eventlog.Config{Env: domain.Sandbox, DataDir: dir, NATSListen: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	defer again.Close()
	if got, err := eventlog.NATSToken(dir); err != nil || got != token {
		t.Fatalf("after a restart the token is %q (%v), want %q", got, err, token)
	}
	if u2, _ := url.Parse(again.ClientURL()); u2.User.Username() != token {
		t.Fatalf("client url %q does not carry the token", eventlog.RedactURL(again.ClientURL()))
	}
}

// RedactURL hides passwords and tokens in every URL it is given.
func TestRedactURL(t *testing.T) {
	for in, want := range map[string]string{
		"":                                  "",
		"nats://127.0.0.1:4222":             "nats://127.0.0.1:4222",
		"nats://giving:s3cret@nats-1:4222":  "nats://giving:xxxxx@nats-1:4222",
		"nats://tok3n@127.0.0.1:14222":      "nats://xxxxx@127.0.0.1:14222",
		"giving:s3cret@nats-1:4222":         "giving:xxxxx@nats-1:4222",
		"nats://giving:p@ss/w:rd@nats:4222": "nats://giving:xxxxx@nats:4222",
		"nats://a:s3cret@n1:4222, nats://a:s3cret@n2:4222,nats://n3:4222": "nats://a:xxxxx@n1:4222, nats://a:xxxxx@n2:4222,nats://n3:4222",
		"tls://giving:s3cret@[::1]:4222":                                  "tls://giving:xxxxx@[::1]:4222",
	} {
		got := eventlog.RedactURL(in)
		if got != want {
			t.Errorf("RedactURL(%q) = %q, want %q", in, got, want)
		}
		if strings.Contains(got, "s3cret") || strings.Contains(got, "tok3n") || strings.Contains(got, "p@ss") {
			t.Errorf("RedactURL(%q) = %q shows a secret", in, got)
		}
	}
}
