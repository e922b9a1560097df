package dashboard_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/partnergiving/giving/domain"
	"github.com/partnergiving/giving/eventlog/dashboard"
	"github.com/partnergiving/giving/eventlog/eventlogtest"
)

// A dashboard grant is used once: of many instances using one link at the
// same moment, exactly one succeeds; the others, and every later use, get
// ErrGrantUsed. A grant is stored once under its hash.
func TestDashboardGrantIsUsedOnce(t *testing.T) {
	l := eventlogtest.Open(t, domain.Sandbox)
	ctx := context.Background()
	grant := domain.DashboardGrant{Partner: "pt_1", KeyPrefix: "sk_test_AbCd1234", ExpiresAt: time.Now().Add(time.Minute).UTC()}
	const instances = 8
	buckets := make([]*dashboard.Grants, instances)
	for i := range buckets {
		var err error
		if buckets[i], err = dashboard.Open(ctx, l); err != nil {
			t.Fatal(err)
		}
	}
	if err := buckets[0].Put(ctx, "link.h1", grant); err != nil {
		t.Fatal(err)
	}
	if err := buckets[1].Put(ctx, "link.h1", grant); err == nil {
		t.Fatal("a second grant under the same hash was stored")
	}
	var wg sync.WaitGroup
	results := make([]error, instances)
	for i, b := range buckets {
		wg.Go(func() {
			g, found, err := b.Use(ctx, "link.h1")
			if err == nil && (!found || g.Partner != grant.Partner || g.Used) {
				err = errors.New("the grant as it was is not returned")
			}
			results[i] = err
		})
	}
	wg.Wait()
	won := 0
	for _, err := range results {
		switch {
		case err == nil:
			won++
		case !errors.Is(err, dashboard.ErrGrantUsed):
			t.Fatalf("use: %v", err)
		}
	}
	if won != 1 {
		t.Fatalf("%d uses succeeded, want 1", won)
	}
	if _, _, err := buckets[0].Use(ctx, "link.h1"); !errors.Is(err, dashboard.ErrGrantUsed) {
		t.Fatalf("a later use: %v", err)
	}
	g, found, err := buckets[2].Get(ctx, "link.h1")
	if err != nil || !found || !g.Used || g.Usable(time.Now()) {
		t.Fatalf("the used grant reads %+v %v %v", g, found, err)
	}
	if _, found, err := buckets[0].Use(ctx, "link.none"); err != nil || found {
		t.Fatalf("an unknown grant: %v %v", found, err)
	}
}
