package domain

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"errors"
)

// Cursors encodes list positions into opaque strings that a client can
// neither build nor alter: versioned, bound to the partner they were issued
// to, and authenticated with a server-side key. Every instance sharing the
// master key reads every other instance's cursors, and a feed cursor (a
// stream sequence) stays valid across restarts and projection rebuilds.
// It is the service's one cursor codec.
type Cursors struct {
	key []byte
}

// NewCursors returns the codec keyed with key (derived from the master key
// for the purpose "cursor").
func NewCursors(key []byte) Cursors { return Cursors{key: key} }

// CursorKind separates the lists, so a cursor of one list is refused by
// another.
type CursorKind byte

// The lists that page with cursors.
const (
	CursorEvents      CursorKind = 'e'
	CursorChurches    CursorKind = 'c'
	CursorEnrollments CursorKind = 'n'
	CursorEndpoints   CursorKind = 'w'
	CursorDeliveries  CursorKind = 'a'
)

const (
	cursorVersion = 1
	cursorMACLen  = 16
	maxCursorPos  = 64
)

// ErrBadCursor is returned for any cursor this service did not issue to
// this partner for this list.
var ErrBadCursor = errors.New("invalid cursor")

// Encode wraps pos.
func (c Cursors) Encode(kind CursorKind, partner string, pos []byte) string {
	raw := make([]byte, 0, 3+len(pos)+cursorMACLen)
	raw = append(raw, cursorVersion, byte(kind), byte(len(pos)))
	raw = append(raw, pos...)
	raw = append(raw, c.mac(raw, partner)...)
	return base64.RawURLEncoding.EncodeToString(raw)
}

// Decode unwraps a cursor, checking version, list, partner and MAC.
func (c Cursors) Decode(kind CursorKind, partner, s string) ([]byte, error) {
	if len(s) > 2*(3+maxCursorPos+cursorMACLen) {
		return nil, ErrBadCursor
	}
	raw, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil || len(raw) < 3+cursorMACLen {
		return nil, ErrBadCursor
	}
	n := int(raw[2])
	if raw[0] != cursorVersion || raw[1] != byte(kind) || len(raw) != 3+n+cursorMACLen {
		return nil, ErrBadCursor
	}
	body, mac := raw[:3+n], raw[3+n:]
	if !hmac.Equal(mac, c.mac(body, partner)) {
		return nil, ErrBadCursor
	}
	return body[3:], nil
}

// EncodeSeq wraps a stream sequence.
func (c Cursors) EncodeSeq(kind CursorKind, partner string, seq uint64) string {
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], seq)
	return c.Encode(kind, partner, b[:])
}

// DecodeSeq unwraps a stream sequence.
func (c Cursors) DecodeSeq(kind CursorKind, partner, s string) (uint64, error) {
	pos, err := c.Decode(kind, partner, s)
	if err != nil || len(pos) != 8 {
		return 0, ErrBadCursor
	}
	return binary.BigEndian.Uint64(pos), nil
}

func (c Cursors) mac(body []byte, partner string) []byte {
	m := hmac.New(sha256.New, c.key)
	m.Write(body)
	m.Write([]byte{0})
	m.Write([]byte(partner))
	return m.Sum(nil)[:cursorMACLen]
}
