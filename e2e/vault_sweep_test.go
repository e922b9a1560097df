package e2e

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/partnergiving/giving/eventlog"
	"github.com/partnergiving/giving/internal/stack"
)

// A donor's own vault entry no session refers to (left by builds before
// sessions carried their phones: a crash between the vault write and the
// session's append) is erased by the vault sweep once it is old enough;
// the phone keys, and the phones sessions carry, stay.
func TestVaultSweepErasesUnreferencedPhones(t *testing.T) {
	ts := startStack(t, func(c *stack.Config) { c.VaultGrace = time.Second })
	c, pid := ts.partner(t)
	church := importChurch(t, c, "Grace Chapel")
	s := openSession(t, c, church, "+12025550100", "pct", "3", "https://partner.example/back")

	ctx := context.Background()
	vault, err := ts.Ledger.OpenVault(ctx, ts.Secrets, eventlog.PhoneKeyTimes{})
	if err != nil {
		t.Fatal(err)
	}
	orphan := vault.DonorID(pid, "+12025550177")
	if err := vault.Put(ctx, orphan, "+12025550177"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 20*time.Second, "the unreferenced phone to be erased", func() bool {
		_, err := vault.Phone(ctx, orphan, nil)
		return errors.Is(err, eventlog.ErrForgotten)
	})
	if phone, err := donorPhone(t, ts, pid, s.ID); err != nil || phone != "+12025550100" {
		t.Fatalf("the session's donor phone: %q, %v", phone, err)
	}
}
