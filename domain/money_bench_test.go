package domain_test

import (
	"encoding/json"
	"testing"

	"github.com/partnergiving/giving/domain"
)

// BenchmarkParseHundredths: every amount in every event is read by it, on
// every replay.
func BenchmarkParseHundredths(b *testing.B) {
	for b.Loop() {
		if _, ok := domain.ParseHundredths(json.Number("1234.56")); !ok {
			b.Fatal("refused")
		}
	}
}
