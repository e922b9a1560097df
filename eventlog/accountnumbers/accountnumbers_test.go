package accountnumbers_test

import (
	"context"
	"errors"
	"testing"

	"github.com/partnergiving/giving/domain"
	"github.com/partnergiving/giving/eventlog/accountnumbers"
	"github.com/partnergiving/giving/eventlog/eventlogtest"
)

func TestIndexRecordsEachAccountNumberForOneChurch(t *testing.T) {
	ctx := context.Background()
	l := eventlogtest.Open(t, domain.Production)
	x, err := accountnumbers.Open(ctx, l)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok, err := x.Church(ctx, "account_number_a"); ok || err != nil {
		t.Fatalf("an unknown id: ok %v, %v", ok, err)
	}
	for range 2 {
		if err := x.Put(ctx, "account_number_a", "ch_one"); err != nil {
			t.Fatalf("recording a pair (again): %v", err)
		}
	}
	if err := x.Put(ctx, "account_number_a", "ch_two"); !errors.Is(err, accountnumbers.ErrTaken) {
		t.Fatalf("another church for a recorded id: %v", err)
	}
	if church, ok, err := x.Church(ctx, "account_number_a"); church != "ch_one" || !ok || err != nil {
		t.Fatalf("church %q, ok %v, %v", church, ok, err)
	}
}
