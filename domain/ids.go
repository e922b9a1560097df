package domain

import (
	"encoding/binary"
	"math/bits"
	"math/rand/v2"
	"strings"
	"sync"
	"time"

	"github.com/segmentio/ksuid"
)

// Prefixes of the service's identifiers. An id is its prefix followed by a
// KSUID, so ids sort by creation time and say what they name.
const (
	PrefixPartner      = "pt_"
	PrefixKey          = "key_"
	PrefixChurch       = "ch_"
	PrefixEvent        = "evt_"
	PrefixSession      = "ds_"
	PrefixDonor        = "dn_"
	PrefixEnrollment   = "en_"
	PrefixEndpoint     = "we_"
	PrefixAttempt      = "wa_"
	PrefixRecovery     = "wr_"
	PrefixDeposit      = "dep_"
	PrefixImport       = "imp_"
	ksuidEncodedLength = 27
)

// NewID returns a fresh id with the given prefix.
func NewID(prefix string) string {
	return prefix + ksuid.New().String()
}

// NewSortedID returns a fresh id with the given prefix that sorts after
// every id this process made before it for the same scope (a partner, an
// endpoint), within a second too: for ids made in bulk that key an index
// by their scope, and stand for nothing secret (event ids, imported
// church ids, delivery attempt ids). A KSUID orders ids by the second
// only; within one its payload is random. Event ids key each partner's
// public events in the projections, so a partner's burst of events (a bank
// file reconciled, a church import) put each new id at a random place
// among that second's: a transaction of a few hundred of them touched,
// read and wrote as many pages of the index, where ids in order land at
// its end.
//
// Each scope's ids start from a fresh random KSUID every second, so ids of
// different processes do not collide, and step by a random amount after
// that: the step tells roughly how many ids of the same scope came between
// two, and nothing of any other scope's (another partner's activity). It
// reads the system's randomness once a second and scope, where NewID reads
// it for every id.
func NewSortedID(prefix, scope string) string {
	return prefix + sortedIDs.next(scope, time.Now()).String()
}

var sortedIDs orderedIDs

// orderedIDs makes KSUIDs in increasing order per scope (see NewSortedID).
type orderedIDs struct {
	mu sync.Mutex
	// second is the second (Unix) last holds the ids of: an id of an
	// earlier second is of no use, the next one of its scope starts afresh.
	second int64
	last   map[string]ksuid.KSUID
}

func (g *orderedIDs) next(scope string, now time.Time) ksuid.KSUID {
	g.mu.Lock()
	defer g.mu.Unlock()
	if sec := now.Unix(); sec != g.second || g.last == nil {
		g.second, g.last = sec, map[string]ksuid.KSUID{}
	}
	if last, ok := g.last[scope]; ok {
		if id, ok := stepPayload(last, uint64(rand.Uint32())+1); ok {
			g.last[scope] = id
			return id
		}
	}
	id, err := ksuid.NewRandomWithTime(now)
	if err != nil {
		id = ksuid.New() // as every other id: it panics when the system has no randomness to give
	}
	g.last[scope] = id
	return id
}

// stepPayload adds n to id's payload (its 16 bytes after the timestamp,
// big-endian), false when that would overflow it.
func stepPayload(id ksuid.KSUID, n uint64) (ksuid.KSUID, bool) {
	hi, lo := binary.BigEndian.Uint64(id[4:12]), binary.BigEndian.Uint64(id[12:20])
	lo, carry := bits.Add64(lo, n, 0)
	hi, overflow := bits.Add64(hi, 0, carry)
	if overflow != 0 {
		return ksuid.Nil, false
	}
	binary.BigEndian.PutUint64(id[4:12], hi)
	binary.BigEndian.PutUint64(id[12:20], lo)
	return id, true
}

// ValidID reports whether s is a well-formed id with the given prefix. It
// protects lookups and ledger subjects from arbitrary input.
func ValidID(prefix, s string) bool {
	rest, ok := strings.CutPrefix(s, prefix)
	if !ok || len(rest) != ksuidEncodedLength {
		return false
	}
	_, err := ksuid.Parse(rest)
	return err == nil
}
