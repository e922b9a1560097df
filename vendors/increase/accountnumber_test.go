package increase_test

import (
	"context"
	"errors"
	"testing"

	"github.com/partnergiving/giving/vendors/increase"
	"github.com/partnergiving/giving/vendors/increase/increasefake"
)

// An account number opened twice under one Idempotency-Key is one account
// number: the second answer is the first object, and the fake saw the
// bearer key and the key on both requests.
func TestCreateAccountNumberIsIdempotent(t *testing.T) {
	f, srv := startFake(t, increasefake.Options{})
	f.AddAccount("account_church_deposits", "first_internet_bank")
	c := newClient(t, srv.URL, testKey)
	ctx := context.Background()
	p := increase.NewAccountNumber{AccountID: "account_church_deposits", Name: "Church ch_1"}
	first, err := c.CreateAccountNumber(ctx, p, "giving-church-ch_1")
	if err != nil {
		t.Fatal(err)
	}
	if first.AccountID != p.AccountID || first.Name != p.Name || first.InboundACH.DebitStatus != "blocked" ||
		len(first.RoutingNumber) != 9 || first.AccountNumber == "" || first.Status != "active" {
		t.Fatalf("account number %+v", first)
	}
	again, err := c.CreateAccountNumber(ctx, p, "giving-church-ch_1")
	if err != nil || again.ID != first.ID || again.AccountNumber != first.AccountNumber {
		t.Fatalf("the same key again: %+v, %v; want %s", again, err, first.ID)
	}
	// The key bound to other arguments (a renamed number): Increase's 409
	// names the first object, which is read back.
	renamed := p
	renamed.Name = "Renamed"
	if n, err := c.CreateAccountNumber(ctx, renamed, "giving-church-ch_1"); err != nil || n.ID != first.ID {
		t.Fatalf("the key with other arguments: %+v, %v", n, err)
	}
	other, err := c.CreateAccountNumber(ctx, p, "giving-church-ch_2")
	if err != nil || other.ID == first.ID {
		t.Fatalf("another key: %+v, %v", other, err)
	}
	posts := 0
	for _, r := range f.Requests() {
		if r.Authorization != "Bearer "+testKey {
			t.Errorf("%s %s sent %q", r.Method, r.Path, r.Authorization)
		}
		if r.Method == "POST" {
			posts++
			if r.Path != "/account_numbers" || r.IdempotencyKey == "" {
				t.Errorf("POST %s with Idempotency-Key %q", r.Path, r.IdempotencyKey)
			}
		}
	}
	if posts != 4 {
		t.Fatalf("%d POSTs, want 4", posts)
	}
	a, err := c.Account(ctx, "account_church_deposits")
	if err != nil || a.BankName() != "First Internet Bank of Indiana" {
		t.Fatalf("account %+v (%q), %v", a, a.BankName(), err)
	}
}

func TestCreateAccountNumberRefusals(t *testing.T) {
	f, srv := startFake(t, increasefake.Options{})
	f.AddAccount("account_church_deposits", "core_bank")
	ctx := context.Background()
	p := increase.NewAccountNumber{AccountID: "account_church_deposits", Name: "Church"}
	if _, err := newClient(t, srv.URL, "wrong").CreateAccountNumber(ctx, p, "k"); !errors.Is(err, increase.ErrRejected) {
		t.Fatalf("a wrong key: %v", err)
	}
	c := newClient(t, srv.URL, testKey)
	if _, err := c.CreateAccountNumber(ctx, increase.NewAccountNumber{AccountID: "account_unknown", Name: "x"}, "k2"); !errors.Is(err, increase.ErrRejected) {
		t.Fatalf("an unknown account: %v", err)
	}
	if _, err := c.CreateAccountNumber(ctx, p, ""); !errors.Is(err, increase.ErrRejected) {
		t.Fatalf("no Idempotency-Key: %v", err)
	}
	if _, err := c.CreateAccountNumber(ctx, increase.NewAccountNumber{AccountID: "account_church_deposits"}, "k3"); !errors.Is(err, increase.ErrRejected) {
		t.Fatalf("no name: %v", err)
	}
}

func TestBankNames(t *testing.T) {
	for bank, want := range map[string]string{"grasshopper_bank": "Grasshopper Bank", "increase_bank": "Increase Bank"} {
		if got := (increase.Account{Bank: bank}).BankName(); got != want {
			t.Errorf("%s: %q, want %q", bank, got, want)
		}
	}
}
