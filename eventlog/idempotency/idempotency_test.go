package idempotency_test

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/partnergiving/giving/domain"
	"github.com/partnergiving/giving/eventlog"
	"github.com/partnergiving/giving/eventlog/eventlogtest"
	"github.com/partnergiving/giving/eventlog/idempotency"
	"github.com/partnergiving/giving/secrets"
)

func openIdem(t *testing.T, l *eventlog.Ledger, secrets *secrets.Secrets, instance string, lease time.Duration) *idempotency.Store {
	t.Helper()
	s, err := idempotency.Open(context.Background(), l, secrets, idempotency.Config{Instance: instance, Lease: lease, Settle: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestIdempotencyRecordLifecycle(t *testing.T) {
	ctx := context.Background()
	l := eventlogtest.Open(t, domain.Sandbox)
	secrets, err := secrets.Load("", t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	s := openIdem(t, l, secrets, "host:/data", time.Minute)

	first, err := s.Begin(ctx, "pt_a", "k1", "fp1")
	if err != nil || first.Claim == nil || first.Claim.Takeover {
		t.Fatalf("first begin: %+v %v", first, err)
	}
	if first.Claim.MsgID(0) == first.Claim.MsgID(1) || first.Claim.MsgID(0) == "" {
		t.Fatal("message ids do not tell commands apart")
	}
	busy, err := s.Begin(ctx, "pt_a", "k1", "fp1")
	if err != nil || !busy.InFlight || busy.RetryAfter < time.Second {
		t.Fatalf("while running: %+v %v", busy, err)
	}
	if r, _ := s.Begin(ctx, "pt_a", "k1", "fp2"); !r.Mismatch {
		t.Fatalf("other request while running: %+v", r)
	}
	// Keys are scoped: another partner's k1 is another record.
	if r, _ := s.Begin(ctx, "pt_b", "k1", "fp2"); r.Claim == nil {
		t.Fatalf("partner B's k1: %+v", r)
	}

	secret := []byte(`{"secret":"whsec_shown_once"}`)
	if err := s.Complete(ctx, first.Claim, "fp1", 200, secret); err != nil {
		t.Fatal(err)
	}
	done, err := s.Begin(ctx, "pt_a", "k1", "fp1")
	if err != nil || done.Replay == nil || done.Replay.Status != 200 || !bytes.Equal(done.Replay.Body, secret) {
		t.Fatalf("after completion: %+v %v", done, err)
	}
	if r, _ := s.Begin(ctx, "pt_a", "k1", "fp2"); !r.Mismatch {
		t.Fatalf("other request after completion: %+v", r)
	}
	// Stored answers are sealed: the bucket never holds them in clear.
	kv, err := l.JetStream().KeyValue(ctx, "REQUESTS_SANDBOX")
	if err != nil {
		t.Fatal(err)
	}
	keys, _ := kv.ListKeys(ctx)
	for k := range keys.Keys() {
		e, err := kv.Get(ctx, k)
		if err == nil && strings.Contains(string(e.Value()), "whsec_shown_once") {
			t.Fatal("a stored response is in clear text")
		}
	}

	// A failed request releases its key: the retry runs, as a takeover
	// that must look for what the failed run stored.
	failed, _ := s.Begin(ctx, "pt_a", "k2", "fp")
	if err := s.Release(ctx, failed.Claim, "fp"); err != nil {
		t.Fatal(err)
	}
	retry, err := s.Begin(ctx, "pt_a", "k2", "fp")
	if err != nil || retry.Claim == nil || !retry.Claim.Takeover || retry.Claim.MsgID(0) != failed.Claim.MsgID(0) {
		t.Fatalf("retry after release: %+v %v", retry, err)
	}
	if r, _ := s.Begin(ctx, "pt_a", "k2", "other"); !r.Mismatch {
		t.Fatalf("a released key taken by another request: %+v", r)
	}
}

func TestIdempotencyTakeoverAfterCrash(t *testing.T) {
	ctx := context.Background()
	l := eventlogtest.Open(t, domain.Sandbox)
	secrets, _ := secrets.Load("", t.TempDir())
	before := openIdem(t, l, secrets, "host:/data", time.Hour)
	if r, _ := before.Begin(ctx, "pt_a", "k", "fp"); r.Claim == nil {
		t.Fatal("no claim")
	}
	// Another instance must wait for the lease: the first may be alive.
	other := openIdem(t, l, secrets, "other:/data", time.Hour)
	if r, _ := other.Begin(ctx, "pt_a", "k", "fp"); !r.InFlight {
		t.Fatalf("another instance took a live key: %+v", r)
	}
	// The same instance after a restart knows its earlier boot is dead.
	after := openIdem(t, l, secrets, "host:/data", time.Hour)
	r, err := after.Begin(ctx, "pt_a", "k", "fp")
	if err != nil || r.Claim == nil || !r.Claim.Takeover {
		t.Fatalf("restarted instance: %+v %v", r, err)
	}
	// A lease that ran out frees the key for anyone.
	short := openIdem(t, l, secrets, "a:/x", time.Millisecond)
	if r, _ := short.Begin(ctx, "pt_a", "k3", "fp"); r.Claim == nil {
		t.Fatal("no claim")
	}
	eventlogtest.WaitFor(t, 5*time.Second, "the lease to run out", func() bool {
		r, err := other.Begin(ctx, "pt_a", "k3", "fp")
		return err == nil && r.Claim != nil && r.Claim.Takeover
	})
}
