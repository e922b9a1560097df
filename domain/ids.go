package domain

import (
	"strings"

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
