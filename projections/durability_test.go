package projections_test

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/partnergiving/giving/domain"
	"github.com/partnergiving/giving/eventlog/eventlogtest"
	"github.com/partnergiving/giving/projections"
)

// The live file commits without syncing: a killed process leaves it whole
// (the kernel keeps its writes), a machine that went down since may not, so
// a file marked by another boot is discarded and caught up from the ledger.
func TestUnsyncedFileSurvivesAKillButNotAnotherBoot(t *testing.T) {
	boot, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		t.Skipf("no boot id on this system (%v): the file syncs every commit", err)
	}
	l := eventlogtest.Open(t, domain.Sandbox)
	path := filepath.Join(t.TempDir(), "live.db")
	marker := projections.UnsyncedMarker(path)

	store := openStore(t, path)
	if got, _ := os.ReadFile(marker); string(got) != string(boot) {
		t.Fatalf("marker holds %q, want the boot id %q", got, boot)
	}
	p, stop := runProjector(t, l, store)
	workload(t, l, 1)
	catchUp(t, p)
	stop()
	applied, before := store.Applied(), dump(t, store)
	if len(before["churches"]) == 0 {
		t.Fatal("the workload projected no churches")
	}
	if err := store.CloseAsKilled(); err != nil {
		t.Fatal(err)
	}

	// Same boot: everything committed before the kill is there.
	store = openStore(t, path)
	if store.Discarded() || store.Applied() != applied || !reflect.DeepEqual(dump(t, store), before) {
		t.Fatalf("after a kill: discarded %v, applied %d (want %d), same content %v", store.Discarded(), store.Applied(), applied, reflect.DeepEqual(dump(t, store), before))
	}
	if err := store.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(marker); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("a clean close left the marker: %v", err)
	}
	store = openStore(t, path)
	if store.Discarded() || store.Applied() != applied {
		t.Fatalf("after a clean close: discarded %v, applied %d, want %d", store.Discarded(), store.Applied(), applied)
	}
	if err := store.CloseAsKilled(); err != nil {
		t.Fatal(err)
	}

	// Another boot: the file may be torn; it is not read but started again.
	if err := os.WriteFile(marker, []byte("00000000-another-boot\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	store = openStore(t, path)
	defer store.Close()
	if !store.Discarded() || store.Applied() != 0 || len(dump(t, store)["churches"]) != 0 {
		t.Fatalf("after another boot: discarded %v, applied %d, churches %d; want a fresh file", store.Discarded(), store.Applied(), len(dump(t, store)["churches"]))
	}
	if got, _ := os.ReadFile(marker); strings.TrimSpace(string(got)) != strings.TrimSpace(string(boot)) {
		t.Fatalf("marker holds %q after reopening, want this boot", got)
	}
	p, stop = runProjector(t, l, store)
	catchUp(t, p)
	stop()
	if store.Applied() != applied || !reflect.DeepEqual(dump(t, store), before) {
		t.Fatalf("caught up again to %d (want %d); same content %v", store.Applied(), applied, reflect.DeepEqual(dump(t, store), before))
	}
}
