package e2e

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"testing"

	"github.com/partnergiving/giving/httpapi/apitest"
)

// testdata/layout1 is a data directory written by the service before the
// feed table existed (commit 515adca: feed pages read from the ledger, a
// projection file without a schema version), with the key and cursor a
// partner held then and the pages it read with that cursor. After an
// upgrade the projection file is rebuilt, and the partner's stored cursor
// reads the same pages byte for byte, then goes on to new events.
func TestUpgradeFromLayout1ServesOldCursors(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	untar(t, "testdata/layout1/data.tar.gz", dir)
	var fixture struct {
		APIKey    string `json:"api_key"`
		PartnerID string `json:"partner_id"`
		Cursor    string `json:"cursor"`
	}
	readJSON(t, "testdata/layout1/fixture.json", &fixture)

	ts := startStack(t, withDir(dir))
	if outdated, err := ts.Store.Outdated(); err != nil || outdated {
		t.Fatalf("the projection file was not upgraded: outdated %v, %v", outdated, err)
	}
	c := &apitest.Client{TB: t, Base: ts.URL, Key: fixture.APIKey}
	for _, tc := range []struct{ query, file string }{
		{"since_cursor=" + url.QueryEscape(fixture.Cursor), "page2.json"},
		{"since_cursor=" + url.QueryEscape(fixture.Cursor) + "&type=deposit.received&limit=2", "page2typed.json"},
	} {
		want, err := os.ReadFile(filepath.Join("testdata/layout1", tc.file))
		if err != nil {
			t.Fatal(err)
		}
		got := c.Do(http.MethodGet, "/v1/events?"+tc.query, nil, nil)
		if got.Status != http.StatusOK || !bytes.Equal(bytes.TrimSpace(got.Body), bytes.TrimSpace(want)) {
			t.Fatalf("%s after the upgrade: %d\n%s\nwant\n%s", tc.query, got.Status, got.Body, want)
		}
	}

	// The old cursor's page ends where the ledger ended; a deposit made
	// after the upgrade follows it.
	var page struct {
		Next string `json:"next_cursor"`
	}
	c.Do(http.MethodGet, "/v1/events?since_cursor="+url.QueryEscape(fixture.Cursor), nil, nil).JSON(t, &page)
	var churches struct {
		Data []struct {
			ID string `json:"id"`
		} `json:"data"`
	}
	c.Do(http.MethodGet, "/v1/churches", nil, nil).JSON(t, &churches)
	if len(churches.Data) != 1 {
		t.Fatalf("the fixture's church is not listed: %+v", churches)
	}
	// The fixture's deposits were recorded as two events each (the credit,
	// then its announcement): their credits count, and an old trace sent
	// again credits and announces nothing.
	church := churches.Data[0].ID
	before, err := ts.Store.ChurchBalance(fixture.PartnerID, church)
	if err != nil || before.Count == 0 || len(before.Accounts) != 1 {
		t.Fatalf("the fixture's balance after the upgrade: %+v, %v", before, err)
	}
	var account string
	for account = range before.Accounts {
	}
	again := c.Do(http.MethodPost, "/sandbox/simulate/deposit", map[string]any{"church_id": church, "account_ref": account, "amount": 12.10, "trace": "trc_fixture_2"}, nil)
	if again.Status != http.StatusOK || again.Map(t)["status_code"].(float64) != http.StatusOK {
		t.Fatalf("an old trace again: %d %s", again.Status, again.Body)
	}
	sim := c.Do(http.MethodPost, "/sandbox/simulate/deposit", map[string]any{"church_id": church, "account_ref": "acct_1", "amount": 20.5, "trace": "trc_after_upgrade"}, apitest.Header{"Idempotency-Key": "after-upgrade"})
	if sim.Status != http.StatusOK {
		t.Fatalf("deposit after the upgrade: %d %s", sim.Status, sim.Body)
	}
	ts.waitProjected(t)
	if after, err := ts.Store.ChurchBalance(fixture.PartnerID, church); err != nil || after.Count != before.Count+1 || after.Total != before.Total+2050 || after.Accounts["acct_1"] != before.Accounts["acct_1"]+2050 {
		t.Fatalf("balance %+v after one new deposit of 20.50 on %+v (%v)", after, before, err)
	}
	var next struct {
		Data []struct {
			EventType string         `json:"event_type"`
			Payload   map[string]any `json:"payload"`
		} `json:"data"`
	}
	c.Do(http.MethodGet, "/v1/events?since_cursor="+url.QueryEscape(page.Next), nil, nil).JSON(t, &next)
	if len(next.Data) != 1 || next.Data[0].EventType != "deposit.received" || next.Data[0].Payload["trace"] != "trc_after_upgrade" {
		t.Fatalf("after the old cursor's last page: %+v", next)
	}
}

func untar(t *testing.T, archive, dir string) {
	t.Helper()
	f, err := os.Open(archive)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	gz, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(gz)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		target := filepath.Join(dir, filepath.Clean(h.Name))
		switch h.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(target, 0o700); err != nil {
				t.Fatal(err)
			}
		case tar.TypeReg:
			if err := os.MkdirAll(filepath.Dir(target), 0o700); err != nil {
				t.Fatal(err)
			}
			data, err := io.ReadAll(tr)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(target, data, 0o600); err != nil {
				t.Fatal(err)
			}
		}
	}
}

func readJSON(t *testing.T, path string, v any) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, v); err != nil {
		t.Fatal(err)
	}
}
