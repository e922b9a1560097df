package app_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/partnergiving/giving/domain"
)

func ptr[T any](v T) *T { return &v }

func TestImportChurches(t *testing.T) {
	t.Parallel()
	in := startInstance(t)
	type want struct {
		code domain.Code // "" for a created church
		name string      // the created church's name
	}
	for name, tc := range map[string]struct {
		before []domain.ImportRow // imported first, by the same partner
		rows   []domain.ImportRow
		want   []want
	}{
		"names are trimmed": {
			rows: []domain.ImportRow{{Name: "  Grace  "}, {Name: "Hope"}},
			want: []want{{name: "Grace"}, {name: "Hope"}},
		},
		"a bad row is rejected alone": {
			rows: []domain.ImportRow{{Name: "Grace"}, {Name: "   "}, {Name: strings.Repeat("x", domain.MaxChurchName+1)}, {Name: "Bad\x07bell"}, {Name: "Hope"}},
			want: []want{{name: "Grace"}, {code: domain.ProblemInvalidRow.Code}, {code: domain.ProblemInvalidRow.Code}, {code: domain.ProblemInvalidRow.Code}, {name: "Hope"}},
		},
		"a row whose JSON was unusable keeps its error": {
			rows: []domain.ImportRow{{Err: domain.ProblemInvalidRow.New("name must be a string")}, {Name: "Grace"}},
			want: []want{{code: domain.ProblemInvalidRow.Code}, {name: "Grace"}},
		},
		"external ids are unique within a batch": {
			rows: []domain.ImportRow{{Name: "A", ExternalID: ptr("x-1")}, {Name: "B", ExternalID: ptr("x-1")}, {Name: "C", ExternalID: ptr("x-2")}},
			want: []want{{name: "A"}, {code: domain.ProblemExternalIDTaken.Code}, {name: "C"}},
		},
		"external ids are unique across imports": {
			before: []domain.ImportRow{{Name: "A", ExternalID: ptr("x-1")}},
			rows:   []domain.ImportRow{{Name: "B", ExternalID: ptr("x-1")}, {Name: "C", ExternalID: ptr("x-3")}},
			want:   []want{{code: domain.ProblemExternalIDTaken.Code}, {name: "C"}},
		},
		"a bad external id is an invalid row": {
			rows: []domain.ImportRow{{Name: "A", ExternalID: ptr("")}, {Name: "B", ExternalID: ptr(strings.Repeat("e", domain.MaxChurchExternal+1))}, {Name: "C", ExternalID: ptr("tab\there")}},
			want: []want{{code: domain.ProblemInvalidRow.Code}, {code: domain.ProblemInvalidRow.Code}, {code: domain.ProblemInvalidRow.Code}},
		},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			p := in.partner(t)
			if tc.before != nil {
				if _, err := in.App.ImportChurches(ctx, p, tc.before); err != nil {
					t.Fatal(err)
				}
			}
			res, err := in.App.ImportChurches(ctx, p, tc.rows)
			if err != nil {
				t.Fatal(err)
			}
			if len(res) != len(tc.want) {
				t.Fatalf("%d results for %d rows", len(res), len(tc.want))
			}
			// The next request sees the import, as the transport makes
			// every request wait for this instance's writes.
			if err := in.App.SeeWrites(ctx); err != nil {
				t.Fatal(err)
			}
			for i, w := range tc.want {
				r := res[i]
				if r.Index != i {
					t.Errorf("row %d: index %d", i, r.Index)
				}
				if w.code != "" {
					if r.Err == nil || r.Err.Code != w.code || r.Church != nil {
						t.Errorf("row %d: %+v %v, want a %s", i, r.Church, r.Err, w.code)
					}
					continue
				}
				if r.Err != nil || r.Church == nil || r.Church.Name != w.name {
					t.Fatalf("row %d: %+v %v, want %q created", i, r.Church, r.Err, w.name)
				}
				// The answer is what the partner reads back.
				got, ok, err := in.Store.Church(p, r.Church.ID)
				if err != nil || !ok || got.Name != w.name || !equalOptional(got.ExternalID, tc.rows[i].ExternalID) {
					t.Errorf("row %d: reads back %+v %v %v", i, got, ok, err)
				}
			}
		})
	}

	t.Run("a batch with no good row appends nothing", func(t *testing.T) {
		t.Parallel()
		p := in.partner(t)
		res, err := in.App.ImportChurches(context.Background(), p, []domain.ImportRow{{Name: ""}})
		if err != nil || len(res) != 1 || res[0].Err == nil {
			t.Fatalf("%+v %v", res, err)
		}
		if n := in.events(t, p, domain.ChurchCatalogue, "church.imported"); n != 0 {
			t.Errorf("%d church.imported events, want none", n)
		}
	})

	t.Run("a batch too large is refused whole", func(t *testing.T) {
		t.Parallel()
		p := in.partner(t)
		rows := make([]domain.ImportRow, domain.MaxImportRows+1)
		for i := range rows {
			rows[i].Name = "Church"
		}
		_, err := in.App.ImportChurches(context.Background(), p, rows)
		wantProblem(t, err, domain.ProblemBatchTooLarge.Code)
	})

	t.Run("partners do not share external ids", func(t *testing.T) {
		t.Parallel()
		ctx := context.Background()
		a, b := in.partner(t), in.partner(t)
		for _, p := range []string{a, b} {
			res, err := in.App.ImportChurches(ctx, p, []domain.ImportRow{{Name: "Grace", ExternalID: ptr("shared")}})
			if err != nil || res[0].Err != nil {
				t.Fatalf("partner %s: %+v %v", p, res, err)
			}
		}
	})

	t.Run("concurrent imports keep external ids unique", func(t *testing.T) {
		t.Parallel()
		ctx := context.Background()
		p := in.partner(t)
		const n = 4
		created := make(chan int, n)
		for range n {
			go func() {
				res, err := in.App.ImportChurches(ctx, p, []domain.ImportRow{{Name: "Same", ExternalID: ptr("race")}})
				if err != nil {
					t.Error(err)
					created <- 0
					return
				}
				if res[0].Church != nil {
					created <- 1
					return
				}
				if res[0].Err.Code != domain.ProblemExternalIDTaken.Code {
					t.Errorf("refused with %v", res[0].Err)
				}
				created <- 0
			}()
		}
		total := 0
		for range n {
			total += <-created
		}
		if total != 1 {
			t.Errorf("%d imports created the external id, want exactly 1", total)
		}
	})
}

func equalOptional(a, b *string) bool {
	return (a == nil && b == nil) || (a != nil && b != nil && *a == *b)
}

func TestChangeChurch(t *testing.T) {
	t.Parallel()
	in := startInstance(t)
	for name, tc := range map[string]struct {
		patch    domain.ChurchPatch
		archived bool
		code     domain.Code
		name     string  // the name afterwards
		ext      *string // the external id afterwards
		appends  bool
	}{
		"rename":                       {patch: domain.ChurchPatch{Name: ptr(" New name ")}, name: "New name", ext: ptr("mine"), appends: true},
		"new external id":              {patch: domain.ChurchPatch{ExternalID: ptr("fresh")}, name: "Grace", ext: ptr("fresh"), appends: true},
		"clear the external id":        {patch: domain.ChurchPatch{ClearExternalID: true}, name: "Grace", appends: true},
		"the same values change nil":   {patch: domain.ChurchPatch{Name: ptr("Grace"), ExternalID: ptr("mine")}, name: "Grace", ext: ptr("mine")},
		"a blank name":                 {patch: domain.ChurchPatch{Name: ptr("  ")}, code: domain.ProblemValidation.Code, name: "Grace", ext: ptr("mine")},
		"an external id of another":    {patch: domain.ChurchPatch{ExternalID: ptr("theirs")}, code: domain.ProblemExternalIDTaken.Code, name: "Grace", ext: ptr("mine")},
		"an archived church is frozen": {patch: domain.ChurchPatch{Name: ptr("Later")}, archived: true, code: domain.ProblemChurchArchived.Code, name: "Grace", ext: ptr("mine")},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			p := in.partner(t)
			res, err := in.App.ImportChurches(ctx, p, []domain.ImportRow{{Name: "Grace", ExternalID: ptr("mine")}, {Name: "Other", ExternalID: ptr("theirs")}})
			if err != nil {
				t.Fatal(err)
			}
			id := res[0].Church.ID
			if tc.archived {
				if _, err := in.App.ArchiveChurch(ctx, p, id); err != nil {
					t.Fatal(err)
				}
			}
			before := in.events(t, p, domain.ChurchChanges, "church.updated")
			got, err := in.App.UpdateChurch(ctx, p, id, tc.patch)
			wantProblem(t, err, tc.code)
			if err == nil && (got.Name != tc.name || !equalOptional(got.ExternalID, tc.ext)) {
				t.Errorf("answered %q %v, want %q %v", got.Name, got.ExternalID, tc.name, tc.ext)
			}
			if err := in.App.SeeWrites(ctx); err != nil {
				t.Fatal(err)
			}
			read, _, _ := in.Store.Church(p, id)
			if read.Name != tc.name || !equalOptional(read.ExternalID, tc.ext) {
				t.Errorf("reads %q %v, want %q %v", read.Name, read.ExternalID, tc.name, tc.ext)
			}
			if n := in.events(t, p, domain.ChurchChanges, "church.updated") - before; (n == 1) != tc.appends || n > 1 {
				t.Errorf("%d church.updated appended, want one: %v", n, tc.appends)
			}
		})
	}

	t.Run("a freed external id can be taken", func(t *testing.T) {
		t.Parallel()
		ctx := context.Background()
		p := in.partner(t)
		res, err := in.App.ImportChurches(ctx, p, []domain.ImportRow{{Name: "A", ExternalID: ptr("moving")}, {Name: "B"}})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := in.App.UpdateChurch(ctx, p, res[0].Church.ID, domain.ChurchPatch{ClearExternalID: true}); err != nil {
			t.Fatal(err)
		}
		got, err := in.App.UpdateChurch(ctx, p, res[1].Church.ID, domain.ChurchPatch{ExternalID: ptr("moving")})
		if err != nil || !equalOptional(got.ExternalID, ptr("moving")) {
			t.Fatalf("%+v %v", got, err)
		}
	})

	t.Run("archive", func(t *testing.T) {
		t.Parallel()
		ctx := context.Background()
		p := in.partner(t)
		c := in.church(t, p)
		first, err := in.App.ArchiveChurch(ctx, p, c.ID)
		if err != nil || first.ArchivedAt == nil {
			t.Fatalf("archive: %+v %v", first, err)
		}
		again, err := in.App.ArchiveChurch(ctx, p, c.ID)
		if err != nil || again.ArchivedAt == nil || !again.ArchivedAt.Equal(*first.ArchivedAt) {
			t.Fatalf("archive again: %+v %v, want it unchanged", again, err)
		}
		if n := in.events(t, p, domain.ChurchChanges, "church.archived"); n != 1 {
			t.Errorf("%d church.archived events, want 1", n)
		}
		// An archived church takes no new donor sessions.
		_, err = in.App.CreateSession(ctx, p, sessionRequest(c.ID))
		wantProblem(t, err, domain.ProblemChurchArchived.Code)
	})

	t.Run("another partner's church is not found", func(t *testing.T) {
		t.Parallel()
		ctx := context.Background()
		owner, other := in.partner(t), in.partner(t)
		c := in.church(t, owner)
		_, err := in.App.UpdateChurch(ctx, other, c.ID, domain.ChurchPatch{Name: ptr("Mine now")})
		wantProblem(t, err, domain.ProblemNotFound.Code)
		_, err = in.App.ArchiveChurch(ctx, other, c.ID)
		wantProblem(t, err, domain.ProblemNotFound.Code)
		read, _, _ := in.Store.Church(owner, c.ID)
		if read.Name != c.Name || read.ArchivedAt != nil {
			t.Errorf("the owner's church changed: %+v", read)
		}
	})
}

// A partner's imports never make its church changes decide again: imports
// append to the catalogue and reserve their external ids, changes take
// turns on an aggregate of their own, so renames made while imports pour
// in meet no append conflict.
func TestChurchChangesTakeNoTurnWithImports(t *testing.T) {
	t.Parallel()
	in := startInstance(t)
	ctx := context.Background()
	p := in.partner(t)
	c := in.church(t, p)
	before := in.appendConflicts(t)
	stop := make(chan struct{})
	var imports sync.WaitGroup
	var imported atomic.Int64
	for w := range 8 {
		imports.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				ext := fmt.Sprintf("w%d-%d", w, i)
				if _, err := in.App.ImportChurches(ctx, p, []domain.ImportRow{{Name: "Pouring in", ExternalID: &ext}}); err != nil {
					t.Error(err)
					return
				}
				imported.Add(1)
			}
		})
	}
	for i := range 30 {
		name := fmt.Sprintf("Renamed %d", i)
		got, err := in.App.UpdateChurch(ctx, p, c.ID, domain.ChurchPatch{Name: &name, ExternalID: ptr(fmt.Sprintf("crm-%d", i))})
		if err != nil || got.Name != name {
			t.Errorf("change %d: %+v %v", i, got, err)
			break
		}
	}
	close(stop)
	imports.Wait()
	if imported.Load() == 0 {
		t.Fatal("no import ran beside the changes")
	}
	if n := in.appendConflicts(t) - before; n != 0 {
		t.Errorf("%.0f append conflicts beside %d imports, want none", n, imported.Load())
	}
}
