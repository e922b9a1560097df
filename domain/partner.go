package domain

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"net"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// Environment is the stack a partner, key or ledger belongs to.
type Environment string

// The two stacks. Test keys work only on the sandbox, live keys only in
// production.
const (
	Sandbox    Environment = "sandbox"
	Production Environment = "production"
)

// ParseEnvironment accepts "sandbox" or "production".
func ParseEnvironment(s string) (Environment, error) {
	switch Environment(s) {
	case Sandbox, Production:
		return Environment(s), nil
	}
	return "", ProblemValidation.New("environment must be sandbox or production, not %q", s)
}

// KeyPrefix is the prefix of every API key issued on the stack.
func (e Environment) KeyPrefix() string {
	if e == Production {
		return "sk_live_"
	}
	return "sk_test_"
}

// PartnerCreated records onboarding of a partner.
type PartnerCreated struct {
	Name            string   `json:"name"`
	Environment     string   `json:"environment"`
	RedirectOrigins []string `json:"redirect_origins"`
}

// KeyIssued records a new API key. Only the key's SHA-256 hash and its
// display prefix are kept; the key itself is shown once and never stored.
type KeyIssued struct {
	KeyID  string `json:"key_id"`
	Prefix string `json:"prefix"`
	Hash   string `json:"hash"`
}

// KeyRevoked records that a key stops working.
type KeyRevoked struct {
	KeyID string `json:"key_id"`
}

func (*PartnerCreated) EventType() string { return "partner.created" }
func (*KeyIssued) EventType() string      { return "partner.key_issued" }
func (*KeyRevoked) EventType() string     { return "partner.key_revoked" }

func init() {
	register[PartnerCreated](false, "An operator onboarded a partner.")
	register[KeyIssued](false, "An operator issued an API key to a partner.")
	register[KeyRevoked](false, "An operator revoked an API key.")
}

// Key is one API key's public record.
type Key struct {
	ID        string     `json:"id"`
	Prefix    string     `json:"prefix"`
	Hash      string     `json:"hash"`
	CreatedAt time.Time  `json:"created_at"`
	RevokedAt *time.Time `json:"revoked_at,omitempty"`
}

// Partner is the partner aggregate: who they are, their stack, the origins
// donors may be sent back to, and their keys. Its partner id and aggregate id
// are the same.
type Partner struct {
	ID              string      `json:"id"`
	Name            string      `json:"name"`
	Environment     Environment `json:"environment"`
	RedirectOrigins []string    `json:"redirect_origins"`
	CreatedAt       time.Time   `json:"created_at"`
	Keys            []Key       `json:"keys"`
}

// Exists reports whether the partner has been created.
func (p *Partner) Exists() bool { return p.ID != "" }

// Apply folds one of the partner's events into its state.
func (p *Partner) Apply(e Event) {
	switch pl := e.Payload.(type) {
	case *PartnerCreated:
		p.ID, p.Name, p.Environment = e.PartnerID, pl.Name, Environment(pl.Environment)
		p.RedirectOrigins, p.CreatedAt = pl.RedirectOrigins, e.OccurredAt
	case *KeyIssued:
		p.Keys = append(p.Keys, Key{ID: pl.KeyID, Prefix: pl.Prefix, Hash: pl.Hash, CreatedAt: e.OccurredAt})
	case *KeyRevoked:
		for i := range p.Keys {
			if p.Keys[i].ID == pl.KeyID && p.Keys[i].RevokedAt == nil {
				at := e.OccurredAt
				p.Keys[i].RevokedAt = &at
			}
		}
	}
}

// CreatePartner decides the onboarding of a new partner.
func CreatePartner(p *Partner, id, name string, env Environment, origins []string, now time.Time) (Event, error) {
	if p.Exists() {
		return Event{}, ProblemConflict.New("Partner %s already exists.", id)
	}
	var v Validation
	name = strings.TrimSpace(name)
	if name == "" || utf8.RuneCountInString(name) > 200 {
		v.Add("name", "must be 1 to 200 characters")
	}
	if _, err := ParseEnvironment(string(env)); err != nil {
		v.Add("environment", "must be sandbox or production")
	}
	normalized := make([]string, 0, len(origins))
	for _, o := range origins {
		n, err := NormalizeOrigin(o)
		if err != nil {
			v.Add("redirect_origins", "%q: %s", o, err.(*Error).Detail)
			continue
		}
		normalized = append(normalized, n)
	}
	if err := v.Err(); err != nil {
		return Event{}, err
	}
	sort.Strings(normalized)
	normalized = compactStrings(normalized)
	return NewEvent(id, id, "", now, &PartnerCreated{Name: name, Environment: string(env), RedirectOrigins: normalized}), nil
}

// IssueKey decides adding an API key to an existing partner.
func IssueKey(p *Partner, k NewKey, now time.Time) (Event, error) {
	if !p.Exists() {
		return Event{}, NotFound("partner", p.ID)
	}
	return NewEvent(p.ID, p.ID, "", now, &KeyIssued{KeyID: k.ID, Prefix: k.Prefix, Hash: k.Hash}), nil
}

// RevokeKey decides revoking one of the partner's keys.
func RevokeKey(p *Partner, keyID string, now time.Time) (Event, error) {
	for _, k := range p.Keys {
		if k.ID != keyID {
			continue
		}
		if k.RevokedAt != nil {
			return Event{}, ProblemConflict.New("Key %s is already revoked.", k.Prefix)
		}
		return NewEvent(p.ID, p.ID, "", now, &KeyRevoked{KeyID: keyID}), nil
	}
	return Event{}, NotFound("key", keyID)
}

// NewKey is a freshly generated API key: the secret to show once, and what
// may be stored.
type NewKey struct {
	ID     string
	Secret string
	Prefix string
	Hash   string
}

// keyAlphabet is base62, so keys survive copy and paste and URLs untouched.
const keyAlphabet = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"

// keyRandomChars gives 32 base62 characters, about 190 bits of entropy.
const keyRandomChars = 32

// GenerateKey creates a random API key for env.
func GenerateKey(env Environment) NewKey {
	secret := env.KeyPrefix() + randomBase62(keyRandomChars)
	return NewKey{
		ID:     NewID(PrefixKey),
		Secret: secret,
		Prefix: secret[:len(env.KeyPrefix())+8],
		Hash:   HashSecret(secret),
	}
}

// HashSecret is how the service stores and looks up its high-entropy
// secrets, API keys and hosted-flow url tokens: SHA-256, hex.
func HashSecret(secret string) string {
	sum := sha256.Sum256([]byte(secret))
	return hex.EncodeToString(sum[:])
}

// WellFormedKey reports whether s looks like a key of env. It lets
// authentication reject garbage before any lookup, with the same answer as for
// an unknown key.
func WellFormedKey(env Environment, s string) bool {
	rest, ok := strings.CutPrefix(s, env.KeyPrefix())
	if !ok || len(rest) != keyRandomChars {
		return false
	}
	for i := 0; i < len(rest); i++ {
		if !strings.ContainsRune(keyAlphabet, rune(rest[i])) {
			return false
		}
	}
	return true
}

func randomBase62(n int) string {
	out := make([]byte, n)
	buf := make([]byte, 1)
	for i := 0; i < n; {
		if _, err := rand.Read(buf); err != nil {
			panic("domain: crypto/rand failed: " + err.Error())
		}
		// Rejection sampling keeps every character equally likely.
		if buf[0] >= 248 {
			continue
		}
		out[i] = keyAlphabet[int(buf[0])%62]
		i++
	}
	return string(out)
}

// NormalizeOrigin checks that s is an https origin (scheme, host, optional
// port, nothing else) and returns it in canonical form: lowercase host, no
// default port.
func NormalizeOrigin(s string) (string, error) {
	u, err := url.Parse(s)
	if err != nil || !strings.EqualFold(u.Scheme, "https") || u.Hostname() == "" {
		return "", ProblemValidation.New("must be an https origin such as https://example.org")
	}
	if u.User != nil || (u.Path != "" && u.Path != "/") || strings.ContainsAny(s, "?#") || u.Opaque != "" {
		return "", ProblemValidation.New("must be an origin only: scheme, host and optional port")
	}
	if p := u.Port(); p != "" {
		if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
			return "", ProblemValidation.New("port must be 1 to 65535")
		}
	}
	return OriginOf(u), nil
}

// OriginOf returns the canonical origin of an absolute URL.
func OriginOf(u *url.URL) string {
	host := strings.ToLower(u.Hostname())
	port := u.Port()
	if strings.Contains(host, ":") {
		host = "[" + host + "]"
	}
	if port == "" || (u.Scheme == "https" && port == "443") || (u.Scheme == "http" && port == "80") {
		return strings.ToLower(u.Scheme) + "://" + host
	}
	return strings.ToLower(u.Scheme) + "://" + net.JoinHostPort(strings.Trim(host, "[]"), port)
}

func compactStrings(sorted []string) []string {
	out := sorted[:0]
	for i, s := range sorted {
		if i == 0 || s != sorted[i-1] {
			out = append(out, s)
		}
	}
	return out
}
