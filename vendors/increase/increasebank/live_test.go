package increasebank_test

import (
	"context"
	"errors"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/partnergiving/giving/app"
	"github.com/partnergiving/giving/domain"
	"github.com/partnergiving/giving/eventlog/accountnumbers"
	"github.com/partnergiving/giving/eventlog/eventlogtest"
	"github.com/partnergiving/giving/vendors/increase"
	"github.com/partnergiving/giving/vendors/increase/increasebank"
	"github.com/partnergiving/giving/vendors/increase/increasefake"
)

const apiKey = "secret_key_live_test"

func newLive(t *testing.T, baseURL string, x increasebank.Index) *increasebank.Live {
	t.Helper()
	c, err := increase.NewClient(baseURL, apiKey, nil)
	if err != nil {
		t.Fatal(err)
	}
	return increasebank.NewLive(c, "account_church_gifts", x)
}

// Two instances asking at once for a church's deposit account get one
// account number at Increase, and either reconciles a credit to it.
func TestADepositAccountIsOneAccountNumberPerChurch(t *testing.T) {
	ctx := context.Background()
	fake := increasefake.New(increasefake.Options{APIKey: apiKey})
	fake.AddAccount("account_church_gifts", "grasshopper_bank")
	srv := httptest.NewServer(fake)
	defer srv.Close()
	x, err := accountnumbers.Open(ctx, eventlogtest.Open(t, domain.Production))
	if err != nil {
		t.Fatal(err)
	}
	one, two := newLive(t, srv.URL, x), newLive(t, srv.URL, x)
	var wg sync.WaitGroup
	got := make([]app.DepositAccount, 6)
	errs := make([]error, 6)
	for i := range got {
		b := one
		if i%2 == 1 {
			b = two
		}
		wg.Go(func() { got[i], errs[i] = b.DepositAccount(ctx, "ch_grace") })
	}
	wg.Wait()
	for i := range got {
		if errs[i] != nil || got[i] != got[0] {
			t.Fatalf("ask %d: %+v, %v; first %+v", i, got[i], errs[i], got[0])
		}
	}
	if got[0].RoutingNumber != "101050001" || got[0].AccountNumber == "" || got[0].BankName != "Grasshopper Bank" {
		t.Fatalf("deposit account %+v", got[0])
	}
	numbers := fake.AccountNumbers()
	if len(numbers) != 1 || numbers[0].AccountID != "account_church_gifts" || numbers[0].InboundACH.DebitStatus != "blocked" {
		t.Fatalf("account numbers at Increase: %+v", numbers)
	}
	for _, r := range fake.Requests() {
		if r.Method == "POST" && r.IdempotencyKey != "giving-deposit-account-ch_grace" {
			t.Errorf("POST %s under %q", r.Path, r.IdempotencyKey)
		}
	}
	owner, err := two.AccountOwner(ctx, numbers[0].ID)
	if err != nil || owner != (app.AccountOwner{ChurchID: "ch_grace", AccountRef: numbers[0].ID}) {
		t.Fatalf("owner %+v, %v", owner, err)
	}
	if _, err := one.AccountOwner(ctx, "account_number_nobodys"); !errors.Is(err, app.ErrUnknownAccount) {
		t.Fatalf("an account number no church was given: %v", err)
	}
}

func TestIncreaseDownIsRetryLater(t *testing.T) {
	ctx := context.Background()
	x, err := accountnumbers.Open(ctx, eventlogtest.Open(t, domain.Production))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := newLive(t, "http://127.0.0.1:1", x).DepositAccount(ctx, "ch_grace"); !errors.Is(err, domain.ErrUnavailable) {
		t.Fatalf("Increase unreachable: %v", err)
	}
}
