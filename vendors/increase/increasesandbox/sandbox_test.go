package increasesandbox_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/partnergiving/giving/secrets"
	"github.com/partnergiving/giving/vendors/increase"
	"github.com/partnergiving/giving/vendors/increase/increasesandbox"
)

func newSandbox(t *testing.T, master string) *increasesandbox.Sandbox {
	t.Helper()
	s, err := secrets.Load(master, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return increasesandbox.New(s)
}

const master = "6a1f2c9b8d7e6f50412233445566778899aabbccddeeff00112233445566778b"

// A sealed deposit reads back, on another instance with the same master
// key, as an accepted credit production's Normalise turns into the deposit
// the partner asked for.
func TestATransferIdCarriesItsDeposit(t *testing.T) {
	ctx := context.Background()
	one, two := newSandbox(t, master), newSandbox(t, master)
	at := time.Date(2026, 11, 29, 10, 0, 0, 123e6, time.UTC)
	d := increasesandbox.Deposit{ChurchID: "ch_2pQm3s8JmYc5B9vXk0QeLr1nD7a", AccountRef: "Acct-1.x", Trace: "SHARED-1", Amount: "1010", At: at}
	id, err := one.TransferID(d)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(id, "1010") || strings.Contains(strings.ToLower(id), "shared") {
		t.Fatalf("the id shows what it carries: %s", id)
	}
	tr, err := two.InboundACHTransfer(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	c, err := increase.Normalise("event_sandbox_1", tr)
	if err != nil {
		t.Fatal(err)
	}
	if c.Trace != d.Trace || c.AmountCents != 1010 || !c.AcceptedAt.Equal(at) || c.TransferID != id {
		t.Fatalf("credit %+v", c)
	}
	church, ref, err := two.Owner(c.AccountNumberID)
	if err != nil || church != d.ChurchID || ref != d.AccountRef {
		t.Fatalf("owner %q %q, %v", church, ref, err)
	}
}

// What a partner may ask for that no bank sends reaches Normalise as is,
// and is refused there.
func TestAmountsAreForNormaliseToJudge(t *testing.T) {
	b := newSandbox(t, master)
	for _, amount := range []string{"1010.1", "0", "-100", `"10"`, "1e400", "true"} {
		id, err := b.TransferID(increasesandbox.Deposit{ChurchID: "ch_1", AccountRef: "a", Trace: "t", Amount: amount, At: time.Now()})
		if err != nil {
			t.Fatal(err)
		}
		tr, err := b.InboundACHTransfer(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := increase.Normalise("event_1", tr); !errors.Is(err, increase.ErrInvalidCredit) {
			t.Errorf("amount %s: %v, want ErrInvalidCredit", amount, err)
		}
	}
}

func TestForeignAndTamperedIdsAreUnknown(t *testing.T) {
	ctx := context.Background()
	b := newSandbox(t, master)
	id, err := b.TransferID(increasesandbox.Deposit{ChurchID: "ch_1", AccountRef: "a", Trace: "t", Amount: "1", At: time.Now()})
	if err != nil {
		t.Fatal(err)
	}
	other := newSandbox(t, strings.Repeat("0", 64))
	flipped := "a"
	if strings.HasSuffix(id, "a") {
		flipped = "b"
	}
	tampered := id[:len(id)-1] + flipped
	for name, tc := range map[string]struct {
		b  *increasesandbox.Sandbox
		id string
	}{
		"another master key": {other, id},
		"tampered":           {b, tampered},
		"Increase's own":     {b, "inbound_ach_transfer_tdrwqr3fq9gnnq49odev"},
	} {
		if _, err := tc.b.InboundACHTransfer(ctx, tc.id); !errors.Is(err, increasesandbox.ErrUnknownTransfer) || !errors.Is(err, increase.ErrRejected) {
			t.Errorf("%s: %v", name, err)
		}
	}
	if _, _, err := b.Owner("account_number_v18nkfqm6afpsrvy82b2"); !errors.Is(err, increasesandbox.ErrNotSandboxAccount) {
		t.Errorf("Increase's own account number: %v", err)
	}
}

// The longest deposit still makes an id Increase's client and the edge
// accept; a longer one is refused before it is sealed.
func TestTheLongestDepositFitsAnId(t *testing.T) {
	b := newSandbox(t, master)
	long := strings.Repeat("x", increasesandbox.MaxField)
	id, err := b.TransferID(increasesandbox.Deposit{ChurchID: long, AccountRef: long, Trace: long, Amount: long, At: time.Now()})
	if err != nil {
		t.Fatal(err)
	}
	tr, err := b.InboundACHTransfer(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	// The amount is refused, the id is not: ErrMalformedAmount, not
	// ErrMalformedTransfer.
	if _, err := increase.Normalise("event_1", tr); !errors.Is(err, increase.ErrMalformedAmount) {
		t.Fatalf("a %d-character id: %v", len(id), err)
	}
	if _, err := b.TransferID(increasesandbox.Deposit{Trace: long + "x"}); !errors.Is(err, increasesandbox.ErrFieldTooLong) {
		t.Fatalf("a trace over the bound: %v", err)
	}
}

func TestDepositAccountsAreDerivedFromTheChurch(t *testing.T) {
	one, two := newSandbox(t, master), newSandbox(t, master)
	r1, a1 := one.DepositAccount("ch_1")
	r2, a2 := two.DepositAccount("ch_1")
	_, a3 := one.DepositAccount("ch_2")
	if r1 != "101050001" || r1 != r2 || a1 != a2 || len(a1) != 12 || a1 == a3 {
		t.Fatalf("ch_1: %s %s and %s %s; ch_2: %s", r1, a1, r2, a2, a3)
	}
}
