package keyuse_test

import (
	"context"
	"testing"
	"time"

	"github.com/partnergiving/giving/domain"
	"github.com/partnergiving/giving/eventlog/eventlogtest"
	"github.com/partnergiving/giving/eventlog/keyuse"
)

// A key's use is kept as its hour, rounded down, moves only forward, and is
// read by every instance through the bucket.
func TestKeyUseKeepsTheHour(t *testing.T) {
	l := eventlogtest.Open(t, domain.Sandbox)
	ctx := context.Background()
	uses, err := keyuse.Open(ctx, l)
	if err != nil {
		t.Fatal(err)
	}
	other, err := keyuse.Open(ctx, l) // another instance's view of the bucket
	if err != nil {
		t.Fatal(err)
	}
	if at, err := other.Last(ctx, "key_never"); err != nil || !at.IsZero() {
		t.Fatalf("a key never used: %v %v", at, err)
	}
	hour := time.Date(2026, 11, 28, 21, 0, 0, 0, time.UTC)
	for _, at := range []time.Time{hour.Add(5 * time.Minute), hour.Add(59 * time.Minute), hour.Add(10 * time.Minute)} {
		uses.Note("key_a", at)
	}
	eventlogtest.WaitFor(t, 5*time.Second, "the hour is stored", func() bool {
		at, err := other.Last(ctx, "key_a")
		return err == nil && at.Equal(hour)
	})
	uses.Note("key_a", hour.Add(61*time.Minute))
	eventlogtest.WaitFor(t, 5*time.Second, "the next hour is stored", func() bool {
		at, err := other.Last(ctx, "key_a")
		return err == nil && at.Equal(hour.Add(time.Hour))
	})
	// An earlier hour never moves it back.
	uses.Note("key_a", hour.Add(30*time.Minute))
	if at, err := other.Last(ctx, "key_a"); err != nil || !at.Equal(hour.Add(time.Hour)) {
		t.Fatalf("after an earlier use: %v %v", at, err)
	}
}
