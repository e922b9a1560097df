package eventlog_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/partnergiving/giving/domain"
	"github.com/partnergiving/giving/eventlog"
	"github.com/partnergiving/giving/eventlog/eventlogtest"
)

func TestVaultForgetErasesThePhoneFromDisk(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	l := eventlogtest.OpenAt(t, domain.Sandbox, dir)
	secrets, err := eventlog.LoadSecrets("", dir)
	if err != nil {
		t.Fatal(err)
	}
	v, err := l.OpenVault(ctx, secrets)
	if err != nil {
		t.Fatal(err)
	}
	a := v.DonorID("pt_a", "+12025550100")
	if a != v.DonorID("pt_a", "+12025550100") || a == v.DonorID("pt_b", "+12025550100") || !domain.ValidID(domain.PrefixDonor, a) {
		t.Fatalf("donor ids: same partner must match, other partner must differ, id must be well formed: %s", a)
	}
	// stored reports how many messages the vault's stream has taken.
	stored := func() uint64 {
		t.Helper()
		st, err := l.JetStreamForTest().Stream(ctx, "KV_VAULT_SANDBOX")
		if err != nil {
			t.Fatal(err)
		}
		info, err := st.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return info.State.LastSeq
	}
	if err := v.Put(ctx, a, "+12025550100"); err != nil {
		t.Fatal(err)
	}
	// A returning donor writes nothing.
	if err := v.Put(ctx, a, "+12025550100"); err != nil {
		t.Fatal(err)
	}
	if n := stored(); n != 1 {
		t.Fatalf("the vault stored %d messages for one donor put twice; want 1", n)
	}
	if got, err := v.Phone(ctx, a); err != nil || got != "+12025550100" {
		t.Fatalf("phone = %q, %v", got, err)
	}
	if err := v.Forget(ctx, a); err != nil {
		t.Fatal(err)
	}
	if _, err := v.Phone(ctx, a); !errors.Is(err, eventlog.ErrForgotten) {
		t.Fatalf("after forget: %v", err)
	}
	if err := v.Forget(ctx, a); !errors.Is(err, eventlog.ErrForgotten) {
		t.Fatalf("second forget: %v", err)
	}
	// A forgotten donor who comes back is stored again, and can be
	// forgotten again.
	if err := v.Put(ctx, a, "+12025550100"); err != nil {
		t.Fatal(err)
	}
	if got, err := v.Phone(ctx, a); err != nil || got != "+12025550100" {
		t.Fatalf("phone after coming back = %q, %v", got, err)
	}
	if err := v.Forget(ctx, a); err != nil {
		t.Fatal(err)
	}
	// The sealed phone never sits on disk in clear, and nothing holds its
	// digits.
	filepath.Walk(dir, func(p string, info os.FileInfo, err error) error {
		if err != nil || info.IsDir() {
			return err
		}
		data, _ := os.ReadFile(p)
		if bytes.Contains(data, []byte("2025550100")) {
			t.Errorf("%s holds the phone digits", strings.TrimPrefix(p, dir))
		}
		return nil
	})
}
