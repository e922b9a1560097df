package e2e

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/partnergiving/giving/eventlog/vault"
	"github.com/partnergiving/giving/internal/stack"
)

// What the vault holds that no session refers to is erased by the vault
// sweep once it can be judged: a donor's own entry (left by builds before
// sessions carried their phones: a crash between the vault write and the
// session's append) once it is old enough, a phone key that sealed no
// stored session (a crash after the key was made) once it closed. The key
// a session was sealed with, and so its phone, stays.
func TestVaultSweepErasesUnreferencedPhones(t *testing.T) {
	t.Parallel()
	ts := startStack(t, func(c *stack.Config) { c.VaultGrace = time.Second })
	c, pid := ts.partner(t)
	church := importChurch(t, c, "Grace Chapel")
	s := openSession(t, c, church, "+12025550100", "pct", "3", "https://partner.example/back")

	ctx := context.Background()
	v, err := vault.Open(ctx, ts.Ledger, ts.Secrets, ts.Config.PhoneKeys)
	if err != nil {
		t.Fatal(err)
	}
	orphan := v.DonorID(pid, "+12025550177")
	if err := v.Put(ctx, orphan, "+12025550177"); err != nil {
		t.Fatal(err)
	}
	// A key sealed with, its session never stored.
	unused, _, err := v.SealPhone(ctx, orphan, "+12025550177")
	if err != nil {
		t.Fatal(err)
	}
	if s2, err := donorPhone(t, ts, pid, s.ID); err != nil || s2 == "" {
		t.Fatalf("the session's donor phone: %v", err)
	}
	waitFor(t, 20*time.Second, "the unreferenced phone to be erased", func() bool {
		_, err := v.Phone(ctx, orphan, nil)
		return errors.Is(err, vault.ErrForgotten)
	})
	waitFor(t, 20*time.Second, "the unused phone key to be erased", func() bool {
		_, err := v.Phone(ctx, orphan, &unused)
		return errors.Is(err, vault.ErrForgotten)
	})
	if phone, err := donorPhone(t, ts, pid, s.ID); err != nil || phone != "+12025550100" {
		t.Fatalf("the session's donor phone: %q, %v", phone, err)
	}
}
