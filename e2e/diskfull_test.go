package e2e

import (
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/partnergiving/giving/httpapi/apitest"
)

// The data directory's disk fills: writes are refused (503, never an
// acknowledged write lost) and /readyz says 503 while they cannot succeed;
// the embedded NATS server's errors reach the service's log. Once space is
// back, writes succeed again within 30 s, without a restart, and every
// write acknowledged before reads back.
func TestWritesRecoverWhenTheDiskHasRoomAgain(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("runs the binary")
	}
	disk := t.TempDir()
	if err := syscall.Mount("tmpfs", disk, "tmpfs", 0, "size=64m,mode=0700"); err != nil {
		t.Skipf("a tmpfs cannot be mounted here (%v): the disk-full test needs root", err)
	}
	t.Cleanup(func() { _ = syscall.Unmount(disk, syscall.MNT_DETACH) })
	srv := startServer(t, filepath.Join(disk, "data"), nil)
	c, _ := srv.partner(t, "https://full.example")
	n := 0
	write := func() *apitest.Response {
		n++
		return c.Do(http.MethodPost, importPath, fmt.Sprintf(`{"churches":[{"name":"Full %d","external_id":"full-%d"}]}`, n, n), apitest.Header{"Idempotency-Key": fmt.Sprintf("full-%d", n)})
	}
	var acked []string
	ack := func(r *apitest.Response) {
		var out importResponse
		r.JSON(t, &out)
		acked = append(acked, out.Results[0].Church.ID)
	}
	if r := write(); r.Status != http.StatusOK {
		t.Fatalf("a write with room: %d %s", r.Status, r.Body)
	} else {
		ack(r)
	}

	church := acked[0]
	filler := filepath.Join(disk, "filler")
	fill(t, filler)
	refused := 0
	waitFor(t, time.Minute, "a write refused on the full disk", func() bool {
		r := write()
		switch {
		case r.Status == http.StatusOK:
			ack(r) // stored before the disk ran out
			return false
		case r.Status == http.StatusServiceUnavailable:
			refused++
			return true
		}
		t.Fatalf("a write on the full disk: %d %s", r.Status, r.Body)
		return false
	})
	waitFor(t, 30*time.Second, "/readyz to say 503 while writes cannot succeed", func() bool {
		return c.Do(http.MethodGet, "/readyz", nil, nil).Status == http.StatusServiceUnavailable
	})
	if r := write(); r.Status != http.StatusServiceUnavailable {
		t.Fatalf("a write while not ready: %d %s", r.Status, r.Body)
	}
	// Whichever store met the full disk first, the ledger's does too once
	// something appends: a new donor session is an aggregate of its own,
	// whose append waits for nothing the projections hold.
	waitFor(t, 20*time.Second, "the NATS server's error in the service's log", func() bool {
		c.Do(http.MethodPost, "/v1/donor_sessions", sessionBody(church, "+12025550100", "pct", "3", "https://full.example/back"), nil)
		return strings.Contains(srv.Stderr.String(), `"component":"nats"`) && strings.Contains(srv.Stderr.String(), "no space left")
	})

	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	freed := time.Now()
	waitFor(t, 30*time.Second, "a write to succeed once the disk has room again", func() bool {
		r := write()
		if r.Status == http.StatusOK {
			ack(r)
			return true
		}
		time.Sleep(200 * time.Millisecond)
		return false
	})
	healed := time.Since(freed)
	waitFor(t, 10*time.Second, "/readyz to say 200", func() bool {
		return c.Do(http.MethodGet, "/readyz", nil, nil).Status == http.StatusOK
	})
	for _, id := range acked {
		if r := c.Do(http.MethodGet, "/v1/churches/"+id, nil, nil); r.Status != http.StatusOK {
			t.Fatalf("acknowledged church %s: %d %s", id, r.Status, r.Body)
		}
	}
	t.Logf("disk full: %d writes refused while full; writes succeed again %s after space returned; %d acknowledged writes read back", refused, healed.Round(100*time.Millisecond), len(acked))
}

// fill writes path until its disk has no room left.
func fill(t *testing.T, path string) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	chunk := make([]byte, 1<<20)
	for {
		if _, err := f.Write(chunk); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatal(err)
			}
			return
		}
	}
}
