package vault_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/partnergiving/giving/domain"
	"github.com/partnergiving/giving/eventlog/eventlogtest"
	"github.com/partnergiving/giving/eventlog/vault"
	"github.com/partnergiving/giving/secrets"
)

// The vault's whole life: phones sealed into sessions' events with one
// phone key a window, opened while the key lasts, erased for good with it,
// the other donors the key sealed moved to entries of their own first.
func TestVaultErasesPhonesForGood(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	l := eventlogtest.OpenAt(t, domain.Sandbox, dir)
	secrets, err := secrets.Load("", dir)
	if err != nil {
		t.Fatal(err)
	}
	times := vault.PhoneKeyTimes{SealFor: time.Second, Settle: 300 * time.Millisecond}
	v, err := vault.Open(ctx, l, secrets, times)
	if err != nil {
		t.Fatal(err)
	}
	const phoneA, phoneB, phoneC = "+12025550100", "+12025550101", "+12025550102"
	a, b, c := v.DonorID("pt_a", phoneA), v.DonorID("pt_a", phoneB), v.DonorID("pt_a", phoneC)
	if a != v.DonorID("pt_a", phoneA) || a == v.DonorID("pt_b", phoneA) || !domain.ValidID(domain.PrefixDonor, a) {
		t.Fatalf("donor ids: same partner must match, other partner must differ, id must be well formed: %s", a)
	}
	// stored reports how many messages the vault's stream has taken.
	stored := func() uint64 {
		t.Helper()
		st, err := l.JetStream().Stream(ctx, "KV_VAULT_SANDBOX")
		if err != nil {
			t.Fatal(err)
		}
		info, err := st.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return info.State.LastSeq
	}
	seal := func(donor, phone string) domain.SealedPhone {
		t.Helper()
		p, storeBy, err := v.SealPhone(ctx, donor, phone)
		if err != nil {
			t.Fatal(err)
		}
		if d := time.Until(storeBy); d <= 0 || d > times.SealFor+times.Settle {
			t.Fatalf("store by %v from now; want within SealFor+Settle", d)
		}
		return p
	}
	phone := func(donor string, p *domain.SealedPhone) (string, error) {
		t.Helper()
		return v.Phone(ctx, donor, p)
	}
	first := time.Now()
	// Concurrent sessions of one window share its key: one vault write.
	var wg sync.WaitGroup
	keys := make([]string, 32)
	for i := range keys {
		wg.Go(func() {
			p, _, err := v.SealPhone(ctx, a, phoneA)
			if err != nil {
				t.Error(err)
			}
			keys[i] = p.Key
		})
	}
	wg.Wait()
	sa, sb := seal(a, phoneA), seal(b, phoneB)
	for _, k := range keys {
		if k != sa.Key {
			t.Fatalf("concurrent seals in one window used keys %s and %s", k, sa.Key)
		}
	}
	if sa.Key != sb.Key || stored() != 1 {
		t.Fatalf("phones sealed in one window: keys %s and %s, %d vault writes; want one key, one write", sa.Key, sb.Key, stored())
	}
	if bytes.Contains(sa.Sealed, []byte(phoneA[1:])) {
		t.Fatal("the sealed phone holds its digits")
	}
	if got, err := phone(a, &sa); err != nil || got != phoneA {
		t.Fatalf("a's phone = %q, %v", got, err)
	}
	if _, err := phone(b, &sa); err == nil || errors.Is(err, vault.ErrForgotten) {
		t.Fatalf("a's sealed phone opened as b's: %v; want a failure to open", err)
	}
	if _, err := phone(c, nil); !errors.Is(err, vault.ErrForgotten) {
		t.Fatalf("a phone never stored: %v", err)
	}
	time.Sleep(times.SealFor)
	sc := seal(c, phoneC)
	if sc.Key == sa.Key || stored() != 2 {
		t.Fatalf("after the window: key %s (first %s), %d vault writes; want a new key", sc.Key, sa.Key, stored())
	}
	// A phone the key cannot open (here c's, sealed with the other key)
	// does not stop the erasure, nor is it moved.
	damaged := domain.SealedPhone{Key: sa.Key, Sealed: sc.Sealed}
	every := []vault.SealedFor{{DonorID: a, Phone: sa}, {DonorID: c, Phone: damaged}, {DonorID: b, Phone: sb}, {DonorID: c, Phone: sc}}
	asked := map[string]bool{}
	sharing := func(_ context.Context, key string, from, to time.Time) ([]vault.SealedFor, error) {
		asked[key] = true
		// The sessions a key sealed were stored after it, and before it
		// closed.
		if now := time.Now(); !from.Before(first) || !to.After(now) || to.Sub(from) > 10*time.Minute {
			t.Errorf("sessions of key %s looked for between %v and %v; want around %v to now", key, from, to, first)
		}
		return every, nil
	}

	erased, err := v.Erase(ctx, a, []domain.SealedPhone{sa, sa}, sharing)
	if err != nil || !erased {
		t.Fatalf("erase a: %v, %v", erased, err)
	}
	if waited := time.Since(first); waited < times.SealFor+times.Settle {
		t.Fatalf("the key was erased %v after it was made; want after SealFor+Settle", waited)
	}
	if len(asked) != 1 || !asked[sa.Key] {
		t.Fatalf("asked for the sessions sharing %v; want only a's key", asked)
	}
	if _, err := phone(a, &sa); !errors.Is(err, vault.ErrForgotten) {
		t.Fatalf("a after erase: %v", err)
	}
	if got, err := phone(b, &sb); err != nil || got != phoneB {
		t.Fatalf("b, who shared a's key, after a's erase: %q, %v", got, err)
	}
	if got, err := phone(c, &sc); err != nil || got != phoneC {
		t.Fatalf("c, on another key, after a's erase: %q, %v", got, err)
	}
	if _, err := phone(c, nil); !errors.Is(err, vault.ErrForgotten) {
		t.Fatalf("c got an entry of its own from a phone a's key could not open: %v", err)
	}
	if erased, err := v.Erase(ctx, a, []domain.SealedPhone{sa}, sharing); err != nil || erased {
		t.Fatalf("second erase of a: %v, %v; want nothing erased", erased, err)
	}

	clear(asked)
	// b comes back: the new session seals with the key of the moment; the
	// erase takes both the key and b's own entry.
	sb2 := seal(b, phoneB)
	erased, err = v.Erase(ctx, b, []domain.SealedPhone{sb, sb2}, sharing)
	if err != nil || !erased {
		t.Fatalf("erase b: %v, %v", erased, err)
	}
	if len(asked) != 1 || !asked[sb2.Key] {
		t.Fatalf("asked for the sessions sharing %v; want only b's live key", asked)
	}
	for _, p := range []domain.SealedPhone{sb, sb2} {
		if _, err := phone(b, &p); !errors.Is(err, vault.ErrForgotten) {
			t.Fatalf("b after erase, key %s: %v", p.Key, err)
		}
	}
	if got, err := phone(c, &sc); err != nil || got != phoneC {
		t.Fatalf("c after b's erase: %q, %v", got, err)
	}
	// A donor's own entry is written once, and erased with the donor.
	if err := v.Put(ctx, a, phoneA); err != nil {
		t.Fatal(err)
	}
	before := stored()
	if err := v.Put(ctx, a, phoneA); err != nil || stored() != before {
		t.Fatalf("a returning donor's own entry written again: %v, %d → %d", err, before, stored())
	}
	if erased, err := v.Erase(ctx, a, nil, sharing); err != nil || !erased {
		t.Fatalf("erase a's own entry: %v, %v", erased, err)
	}
	if _, err := phone(a, nil); !errors.Is(err, vault.ErrForgotten) {
		t.Fatalf("a's own entry after erase: %v", err)
	}
	// Nothing holds a phone's digits in clear.
	filepath.Walk(dir, func(p string, info os.FileInfo, err error) error {
		if err != nil || info.IsDir() {
			return err
		}
		data, _ := os.ReadFile(p)
		for _, ph := range []string{phoneA, phoneB, phoneC} {
			if bytes.Contains(data, []byte(ph[2:])) {
				t.Errorf("%s holds the digits of %s", strings.TrimPrefix(p, dir), ph)
			}
		}
		return nil
	})
}
