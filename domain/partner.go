package domain

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"net"
	"net/url"
	"slices"
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
	Brand           Brand    `json:"brand,omitzero"`
}

// KeyIssued records a new API key. Only the key's SHA-256 hash and its
// display prefix are kept; the key itself is shown once and never stored.
type KeyIssued struct {
	KeyID  string `json:"key_id"`
	Prefix string `json:"prefix"`
	Hash   string `json:"hash"`
}

// KeyRevoked records that a key stops working, revoked by an operator or
// by the partner with another of its keys.
type KeyRevoked struct {
	KeyID string `json:"key_id"`
}

// KeyRolled records a partner rolling the key it called with: a new key
// (only its hash and display prefix, like KeyIssued), and the time the
// rolled key stops working.
type KeyRolled struct {
	KeyID             string    `json:"key_id"`
	Prefix            string    `json:"prefix"`
	Hash              string    `json:"hash"`
	PreviousKeyID     string    `json:"previous_key_id"`
	PreviousExpiresAt time.Time `json:"previous_expires_at"`
}

func (*PartnerCreated) EventType() string { return "partner.created" }
func (*KeyIssued) EventType() string      { return "partner.key_issued" }
func (*KeyRevoked) EventType() string     { return "partner.key_revoked" }
func (*KeyRolled) EventType() string      { return "partner.key_rolled" }

func init() {
	register[PartnerCreated](false, "An operator onboarded a partner.")
	register[KeyIssued](false, "An operator issued an API key to a partner.")
	register[KeyRevoked](false, "An operator, or the partner with another key, revoked an API key.")
	register[KeyRolled](false, "A partner rolled its API key: a new key, and the time the old one stops working.")
}

// Key is one API key's public record.
type Key struct {
	ID        string     `json:"id"`
	Prefix    string     `json:"prefix"`
	Hash      string     `json:"hash"`
	CreatedAt time.Time  `json:"created_at"`
	RevokedAt *time.Time `json:"revoked_at,omitempty"`
	// ExpiresAt is when a rolled key stops working; nil for a key that
	// works until revoked.
	ExpiresAt *time.Time `json:"expires_at,omitempty"`
}

// Live reports whether the key works at now: neither revoked nor expired.
func (k Key) Live(now time.Time) bool {
	return k.RevokedAt == nil && (k.ExpiresAt == nil || now.Before(*k.ExpiresAt))
}

// Partner is the partner aggregate: who they are, their stack, the origins
// donors may be sent back to, their keys, and what donors see of them. Its partner id and aggregate id
// are the same.
type Partner struct {
	ID              string      `json:"id"`
	Name            string      `json:"name"`
	Environment     Environment `json:"environment"`
	RedirectOrigins []string    `json:"redirect_origins"`
	CreatedAt       time.Time   `json:"created_at"`
	Keys            []Key       `json:"keys"`
	Brand           Brand       `json:"brand,omitzero"`
}

// Exists reports whether the partner has been created.
func (p *Partner) Exists() bool { return p.ID != "" }

// Apply folds one of the partner's events into its state.
func (p *Partner) Apply(e Event) {
	switch pl := e.Payload.(type) {
	case *PartnerCreated:
		p.ID, p.Name, p.Environment = e.PartnerID, pl.Name, Environment(pl.Environment)
		p.RedirectOrigins, p.CreatedAt, p.Brand = pl.RedirectOrigins, e.OccurredAt, pl.Brand
	case *PartnerBrandChanged:
		p.Brand = pl.Brand
	case *KeyIssued:
		p.Keys = append(p.Keys, Key{ID: pl.KeyID, Prefix: pl.Prefix, Hash: pl.Hash, CreatedAt: e.OccurredAt})
	case *KeyRolled:
		p.Keys = append(p.Keys, Key{ID: pl.KeyID, Prefix: pl.Prefix, Hash: pl.Hash, CreatedAt: e.OccurredAt})
		for i := range p.Keys {
			if p.Keys[i].ID == pl.PreviousKeyID {
				at := pl.PreviousExpiresAt
				p.Keys[i].ExpiresAt = &at
			}
		}
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
func CreatePartner(p *Partner, id, name string, env Environment, origins []string, brand Brand, now time.Time) (Event, error) {
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
	brand = brand.normalized(env, &v)
	if err := v.Err(); err != nil {
		return Event{}, err
	}
	sort.Strings(normalized)
	normalized = compactStrings(normalized)
	return NewEvent(id, id, "", now, &PartnerCreated{Name: name, Environment: string(env), RedirectOrigins: normalized, Brand: brand}), nil
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

// RollKey decides a partner's roll of the key it calls with (keyID): a new
// key, the old one working beside it for overlap (0 to MaxOverlap).
func RollKey(p *Partner, keyID string, k NewKey, overlap time.Duration, now time.Time) (Event, error) {
	i := slices.IndexFunc(p.Keys, func(x Key) bool { return x.ID == keyID })
	if i < 0 || !p.Keys[i].Live(now) {
		// Authentication let the key in a moment ago; it expired since.
		return Event{}, ProblemConflict.New("The key this request was made with is no longer live; roll a live key.")
	}
	if overlap < 0 || overlap > MaxOverlap {
		return Event{}, errOverlap()
	}
	ev := NewEvent(p.ID, p.ID, "", now, &KeyRolled{KeyID: k.ID, Prefix: k.Prefix, Hash: k.Hash, PreviousKeyID: keyID})
	expires := ev.OccurredAt.Add(overlap)
	if old := p.Keys[i].ExpiresAt; old != nil && old.Before(expires) {
		expires = *old // a roll never lengthens a key's life
	}
	ev.Payload.(*KeyRolled).PreviousExpiresAt = expires
	return ev, nil
}

// RevokeOtherKey decides the partner's revoking of one of its live keys,
// shown as prefix, with another key (callerKeyID). A key that is not the
// partner's, or no longer live, is not found; the calling key cannot
// revoke itself (it would lock the caller out mid-request; roll it with
// expire_current_in 0 instead).
func RevokeOtherKey(p *Partner, prefix, callerKeyID string, now time.Time) (Event, error) {
	i := slices.IndexFunc(p.Keys, func(x Key) bool { return x.Prefix == prefix && x.Live(now) })
	if i < 0 {
		return Event{}, NotFound("API key", prefix)
	}
	if p.Keys[i].ID == callerKeyID {
		return Event{}, ProblemKeyInUse.New("Key %s is the one making this request; revoke it with another key, or roll it with expire_current_in 0.", prefix)
	}
	return RevokeKey(p, p.Keys[i].ID, now)
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
