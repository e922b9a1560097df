package delivery_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/partnergiving/giving/domain"
	"github.com/partnergiving/giving/eventlog/delivery"
	"github.com/partnergiving/giving/eventlog/eventlogtest"
)

// Attempts counted by several writers at once add up, by partner, hour and
// outcome; hours before the asked one and other partners' counts are not
// listed.
func TestDeliveryCountsAddUp(t *testing.T) {
	ctx := context.Background()
	l := eventlogtest.Open(t, domain.Sandbox)
	counts, err := delivery.OpenCounts(ctx, l)
	if err != nil {
		t.Fatal(err)
	}
	partner, other := domain.NewID(domain.PrefixPartner), domain.NewID(domain.PrefixPartner)
	if none, err := counts.Since(ctx, partner, time.Now().Add(-time.Hour)); err != nil || len(none) != 0 {
		t.Fatalf("before any attempt: %v, %v", none, err)
	}
	now := time.Now().UTC().Truncate(time.Hour).Add(30 * time.Minute)
	before := now.Add(-3 * time.Hour)
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 25 {
				counts.Add(partner, now, "succeeded")
			}
			counts.Add(partner, now, "failed")
			counts.Add(partner, before, "succeeded")
			counts.Add(other, now, "succeeded")
		}()
	}
	wg.Wait()
	want := map[string]int64{"succeeded": 100, "failed": 4}
	eventlogtest.WaitFor(t, 10*time.Second, "the counts to add up", func() bool {
		got, err := counts.Since(ctx, partner, now.Add(-time.Hour))
		if err != nil {
			t.Fatal(err)
		}
		sum := map[string]int64{}
		for _, c := range got {
			if !c.Hour.Equal(now.Truncate(time.Hour)) {
				t.Fatalf("an hour before the one asked for is listed: %+v", c)
			}
			sum[c.Outcome] += c.N
		}
		return sum["succeeded"] == want["succeeded"] && sum["failed"] == want["failed"]
	})
	all, err := counts.Since(ctx, partner, before)
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != 3 || !all[0].Hour.Equal(before.Truncate(time.Hour)) || all[0].N != 4 {
		t.Fatalf("since the earlier hour: %+v", all)
	}
}
