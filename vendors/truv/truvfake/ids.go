package truvfake

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"strings"
	"time"

	"github.com/partnergiving/giving/vendors/truv"
)

// The fake's user ids and bridge tokens carry their own proof, keyed with
// the account's secret, so several service instances that each mount the
// fake as the sandbox's stand-in accept what any of them issued: a token
// minted by one instance opens the widget on another. The maps in Fake
// only serve Users and Tokens, for tests to look at.

// key derives the fake's sealing key from the account's secret.
func (f *Fake) key() []byte {
	k := sha256.Sum256([]byte("truvfake seal\x00" + f.cfg.Secret))
	return k[:]
}

func (f *Fake) seal(b []byte) []byte {
	m := hmac.New(sha256.New, f.key())
	m.Write(b)
	return m.Sum(nil)
}

// newUserID returns 16 random hex digits and 16 hex digits of their seal:
// 32 lowercase hex digits, the form of Truv's ids.
func (f *Fake) newUserID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	r := hex.EncodeToString(b[:])
	return r + hex.EncodeToString(f.seal([]byte("user\x00" + r))[:8])
}

// issuedUser reports whether this account issued the user id.
func (f *Fake) issuedUser(id string) bool {
	if len(id) != 32 {
		return false
	}
	want := hex.EncodeToString(f.seal([]byte("user\x00" + id[:16]))[:8])
	return hmac.Equal([]byte(id[16:]), []byte(want))
}

// tokenClaims is what a bridge token carries.
type tokenClaims struct {
	UserID       string              `json:"u"`
	ProductType  string              `json:"p"`
	ClientName   string              `json:"c,omitempty"`
	TrackingInfo string              `json:"t,omitempty"`
	Account      truv.AccountRequest `json:"a"`
	IssuedAt     int64               `json:"iat"`
	Nonce        string              `json:"n"`
}

var b64 = base64.RawURLEncoding

// sealToken writes a token's claims and their seal.
func (f *Fake) sealToken(t Token) string {
	body, _ := json.Marshal(tokenClaims{
		UserID: t.UserID, ProductType: t.ProductType, ClientName: t.ClientName,
		TrackingInfo: t.TrackingInfo, Account: t.Account, IssuedAt: t.CreatedAt.Unix(), Nonce: truv.NewID(),
	})
	return b64.EncodeToString(body) + "." + b64.EncodeToString(f.seal(append([]byte("token\x00"), body...)))
}

// openToken reads a token this account sealed and that has not expired.
func (f *Fake) openToken(s string) (Token, bool) {
	body64, sig64, ok := strings.Cut(s, ".")
	if !ok {
		return Token{}, false
	}
	body, err1 := b64.DecodeString(body64)
	sig, err2 := b64.DecodeString(sig64)
	if err1 != nil || err2 != nil || !hmac.Equal(sig, f.seal(append([]byte("token\x00"), body...))) {
		return Token{}, false
	}
	var c tokenClaims
	if json.Unmarshal(body, &c) != nil {
		return Token{}, false
	}
	t := Token{
		Token: s, UserID: c.UserID, ProductType: c.ProductType, ClientName: c.ClientName,
		TrackingInfo: c.TrackingInfo, Account: c.Account, CreatedAt: time.Unix(c.IssuedAt, 0),
	}
	if f.cfg.Now().Sub(t.CreatedAt) > bridgeTokenLifetime {
		return Token{}, false
	}
	return t, true
}
