package domain_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/partnergiving/giving/domain"
)

func ptr(s string) *string { return &s }

func TestImportChurchesRowRules(t *testing.T) {
	now := time.Date(2026, 3, 4, 5, 6, 7, 891_234_567, time.UTC)
	used := func(ext string) bool { return ext == "taken" }
	tests := []struct {
		name string
		row  domain.ImportRow
		code domain.Code // empty: created
	}{
		{"plain", domain.ImportRow{Name: "Grace Chapel"}, ""},
		{"trimmed", domain.ImportRow{Name: "  St Mark  "}, ""},
		{"200 runes", domain.ImportRow{Name: strings.Repeat("é", 200)}, ""},
		{"external id", domain.ImportRow{Name: "A", ExternalID: ptr("crm-1")}, ""},
		{"200-char external id", domain.ImportRow{Name: "A", ExternalID: ptr(strings.Repeat("x", 200))}, ""},
		{"empty", domain.ImportRow{Name: ""}, "invalid-row"},
		{"blank", domain.ImportRow{Name: " \t "}, "invalid-row"},
		{"201 runes", domain.ImportRow{Name: strings.Repeat("é", 201)}, "invalid-row"},
		{"control character", domain.ImportRow{Name: "Grace\x00Chapel"}, "invalid-row"},
		{"newline inside", domain.ImportRow{Name: "Grace\nChapel"}, "invalid-row"},
		{"empty external id", domain.ImportRow{Name: "A", ExternalID: ptr("")}, "invalid-row"},
		{"201-char external id", domain.ImportRow{Name: "A", ExternalID: ptr(strings.Repeat("x", 201))}, "invalid-row"},
		{"control in external id", domain.ImportRow{Name: "A", ExternalID: ptr("a\tb")}, "invalid-row"},
		{"external id used before", domain.ImportRow{Name: "A", ExternalID: ptr("taken")}, "external-id-taken"},
		{"decoding failed", domain.ImportRow{Err: domain.ProblemInvalidRow.New("name must be a string")}, "invalid-row"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ev, res, err := domain.ImportChurches("pt_x", []domain.ImportRow{tt.row}, used, now)
			if err != nil || len(res) != 1 || res[0].Index != 0 {
				t.Fatalf("ImportChurches: %+v, %v", res, err)
			}
			if tt.code != "" {
				if ev != nil || res[0].Church != nil || res[0].Err == nil || res[0].Err.Code != tt.code || res[0].Err.Detail == "" {
					t.Fatalf("want rejection %s, got event %v, result %+v", tt.code, ev, res[0])
				}
				return
			}
			c := res[0].Church
			if ev == nil || c == nil || res[0].Err != nil {
				t.Fatalf("want created, got event %v, result %+v", ev, res[0])
			}
			if c.Name != strings.TrimSpace(tt.row.Name) || !domain.ValidID(domain.PrefixChurch, c.ID) || !c.CreatedAt.Equal(ev.OccurredAt) {
				t.Fatalf("church %+v", c)
			}
			if ev.Type != "church.imported" || ev.PartnerID != "pt_x" || ev.AggregateID != domain.ChurchCatalogue {
				t.Fatalf("event %+v", ev)
			}
		})
	}
}

func TestImportChurchesBatch(t *testing.T) {
	now := time.Now()
	rows := []domain.ImportRow{
		{Name: "A", ExternalID: ptr("e1")},
		{Name: ""},
		{Name: "B", ExternalID: ptr("e1")}, // repeats row 0
		{Name: " ", ExternalID: ptr("e2")}, // rejected, so e2 stays free
		{Name: "C", ExternalID: ptr("e2")},
		{Name: "D"},
	}
	ev, res, err := domain.ImportChurches("pt_x", rows, func(string) bool { return false }, now)
	if err != nil || ev == nil {
		t.Fatal(err)
	}
	want := []string{"created", "invalid-row", "external-id-taken", "invalid-row", "created", "created"}
	for i, r := range res {
		got := "created"
		if r.Err != nil {
			got = string(r.Err.Code)
		}
		if r.Index != i || got != want[i] {
			t.Errorf("row %d: index %d, %s; want %s", i, r.Index, got, want[i])
		}
	}
	// The event alone rebuilds the same answer, which is how a retried
	// request answers after a crash.
	p := ev.Payload.(*domain.ChurchesImported)
	again := p.Results(ev.OccurredAt)
	for i := range res {
		if (res[i].Church == nil) != (again[i].Church == nil) {
			t.Fatalf("row %d differs when rebuilt", i)
		}
		if res[i].Church != nil && (res[i].Church.ID != again[i].Church.ID || res[i].Church.Name != again[i].Church.Name || !res[i].Church.CreatedAt.Equal(again[i].Church.CreatedAt)) {
			t.Fatalf("row %d: %+v vs %+v", i, res[i].Church, again[i].Church)
		}
		if res[i].Err != nil && (res[i].Err.Code != again[i].Err.Code || res[i].Err.Detail != again[i].Err.Detail) {
			t.Fatalf("row %d: %+v vs %+v", i, res[i].Err, again[i].Err)
		}
	}
	if p.Rows != 6 || len(p.Created) != 3 || len(p.Rejected) != 3 {
		t.Fatalf("payload %+v", p)
	}
}

func TestImportChurchesWithNothingCreatedEmitsNoEvent(t *testing.T) {
	ev, res, err := domain.ImportChurches("pt_x", []domain.ImportRow{{Name: ""}, {Name: " "}}, func(string) bool { return false }, time.Now())
	if err != nil || ev != nil || len(res) != 2 {
		t.Fatalf("event %v, results %+v, err %v", ev, res, err)
	}
	ev, res, err = domain.ImportChurches("pt_x", nil, func(string) bool { return false }, time.Now())
	if err != nil || ev != nil || len(res) != 0 {
		t.Fatalf("empty batch: event %v, results %+v, err %v", ev, res, err)
	}
}

func TestImportChurchesRefusesOversizedBatch(t *testing.T) {
	rows := make([]domain.ImportRow, domain.MaxImportRows+1)
	for i := range rows {
		rows[i].Name = "x"
	}
	if _, _, err := domain.ImportChurches("pt_x", rows, func(string) bool { return false }, time.Now()); domain.ErrorKind(err) != domain.KindInvalid {
		t.Fatalf("1001 rows: %v", err)
	}
	if _, res, err := domain.ImportChurches("pt_x", rows[:domain.MaxImportRows], func(string) bool { return false }, time.Now()); err != nil || len(res) != domain.MaxImportRows {
		t.Fatalf("1000 rows: %d results, %v", len(res), err)
	}
}

func TestUpdateChurch(t *testing.T) {
	now := time.Now()
	archivedAt := now.Add(-time.Hour)
	base := domain.Church{ID: "ch_1", Name: "Grace", ExternalID: ptr("crm-1")}
	used := func(e string) bool { return e == "crm-taken" }
	for _, tc := range []struct {
		name     string
		church   domain.Church
		patch    domain.ChurchPatch
		code     domain.Code
		event    bool
		wantName string
		wantExt  *string
	}{
		{name: "rename, trimmed", church: base, patch: domain.ChurchPatch{Name: ptr("  Grace Chapel ")}, event: true, wantName: "Grace Chapel", wantExt: ptr("crm-1")},
		{name: "same values record nothing", church: base, patch: domain.ChurchPatch{Name: ptr("Grace"), ExternalID: ptr("crm-1")}, wantName: "Grace", wantExt: ptr("crm-1")},
		{name: "new external id", church: base, patch: domain.ChurchPatch{ExternalID: ptr("crm-2")}, event: true, wantName: "Grace", wantExt: ptr("crm-2")},
		{name: "clear external id", church: base, patch: domain.ChurchPatch{ClearExternalID: true}, event: true, wantName: "Grace"},
		{name: "taken external id", church: base, patch: domain.ChurchPatch{ExternalID: ptr("crm-taken")}, code: "external-id-taken"},
		{name: "blank name", church: base, patch: domain.ChurchPatch{Name: ptr("  ")}, code: "validation-error"},
		{name: "long name", church: base, patch: domain.ChurchPatch{Name: ptr(strings.Repeat("a", domain.MaxChurchName+1))}, code: "validation-error"},
		{name: "empty external id", church: base, patch: domain.ChurchPatch{ExternalID: ptr("")}, code: "validation-error"},
		{name: "archived", church: domain.Church{ID: "ch_1", Name: "Grace", ArchivedAt: &archivedAt}, patch: domain.ChurchPatch{Name: ptr("New")}, code: "church-archived"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ev, got, err := domain.UpdateChurch("pt_1", tc.church, tc.patch, used, now)
			if tc.code != "" {
				var de *domain.Error
				if !errors.As(err, &de) || de.Code != tc.code || ev != nil {
					t.Fatalf("err %v, event %v; want %s and no event", err, ev, tc.code)
				}
				return
			}
			if err != nil || (ev != nil) != tc.event || got.Name != tc.wantName || (got.ExternalID == nil) != (tc.wantExt == nil) || (got.ExternalID != nil && *got.ExternalID != *tc.wantExt) {
				t.Fatalf("got %+v, event %v, err %v", got, ev, err)
			}
		})
	}
}

func TestArchiveChurchOnce(t *testing.T) {
	ev, c := domain.ArchiveChurch("pt_1", domain.Church{ID: "ch_1", Name: "Grace"}, time.Now())
	if ev == nil || c.ArchivedAt == nil {
		t.Fatalf("first archive: %v %+v", ev, c)
	}
	if again, c2 := domain.ArchiveChurch("pt_1", c, time.Now()); again != nil || c2.ArchivedAt != c.ArchivedAt {
		t.Fatalf("archiving again: %v %+v", again, c2)
	}
}
