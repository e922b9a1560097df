package app_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/partnergiving/giving/domain"
	"github.com/partnergiving/giving/eventlog"
	"github.com/partnergiving/giving/eventlog/eventlogtest"
	"github.com/partnergiving/giving/eventlog/reservations"
	"github.com/partnergiving/giving/internal/stack"
)

// reservations opens the instance's ledger's reservations as another
// process would: an instance of the given name whose reservations hold for
// lease.
func (in *instance) reservations(t testing.TB, name string, lease time.Duration) *reservations.Store {
	t.Helper()
	r, err := reservations.Open(context.Background(), in.Ledger, reservations.Config{Instance: name, Lease: lease})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// storeChurch appends an import of one church with external id ext as a
// build before reservations did, or a holder whose reservation is not the
// instance's concern: straight to the ledger, reserving nothing.
func (in *instance) storeChurch(t *testing.T, partner, ext string) {
	t.Helper()
	in.execute(t, partner, domain.ChurchCatalogue, func(eventlog.History) (*domain.Event, error) {
		ev, _, err := domain.ImportChurches(partner, []domain.ImportRow{{Name: "Stored " + ext, ExternalID: &ext}}, func(string) bool { return false }, time.Now())
		return ev, err
	})
}

func TestExternalIDReservations(t *testing.T) {
	t.Parallel()
	in := startInstance(t)
	// Holders of other processes: one live on another instance, one whose
	// lease ended (it crashed), and an earlier boot of this very instance.
	elsewhere := in.reservations(t, "elsewhere", time.Minute)
	crashed := in.reservations(t, "crashed", time.Millisecond)
	earlierBoot := in.reservations(t, stack.InstanceName(in.Config), time.Minute)
	reserve := func(r *reservations.Store) func(t *testing.T, p, ext string) {
		return func(t *testing.T, p, ext string) {
			if res, err := r.Reserve(context.Background(), reservations.ExternalID(p, ext), "another request"); err != nil || !res.Mine {
				t.Fatalf("reserve: %+v %v", res, err)
			}
		}
	}
	for name, tc := range map[string]struct {
		// before holds the external id, or not, before the import.
		before func(t *testing.T, p, ext string)
		// during runs while the import runs.
		during func(t *testing.T, p, ext string)
		// within bounds the import; 0 is none.
		within time.Duration
		// want is the row's problem; "" wants it created, and then held
		// by the importer.
		want domain.Code
	}{
		"a free external id": {},
		"one an import reserved and stored": {
			before: func(t *testing.T, p, ext string) {
				if res, err := in.App.ImportChurches(context.Background(), p, []domain.ImportRow{{Name: "First", ExternalID: &ext}}); err != nil || res[0].Church == nil {
					t.Fatalf("first import: %+v %v", res, err)
				}
			},
			want: domain.ProblemExternalIDTaken.Code,
		},
		"one a church holds with no reservation (stored before reservations)": {
			// An instance applies every earlier church before it serves.
			before: func(t *testing.T, p, ext string) {
				in.storeChurch(t, p, ext)
				in.catchUp(t)
			},
			want: domain.ProblemExternalIDTaken.Code,
		},
		"one another instance reserved and stores meanwhile": {
			before: reserve(elsewhere), during: in.storeChurch, want: domain.ProblemExternalIDTaken.Code,
		},
		"one another instance reserved and stores nothing within the wait": {
			before: reserve(elsewhere), within: 300 * time.Millisecond, want: domain.ProblemUnavailable.Code,
		},
		"one a crashed holder reserved and stored nothing: taken over after its lease": {
			before: reserve(crashed),
		},
		"one a crashed holder reserved and stored": {
			before: func(t *testing.T, p, ext string) {
				reserve(crashed)(t, p, ext)
				in.storeChurch(t, p, ext)
			},
			want: domain.ProblemExternalIDTaken.Code,
		},
		"one an earlier boot of this instance reserved: taken over at once": {
			before: reserve(earlierBoot),
		},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			p, ext := in.partner(t), "crm-1"
			if tc.before != nil {
				tc.before(t, p, ext)
			}
			ctx := context.Background()
			if tc.within > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, tc.within)
				defer cancel()
			}
			var stored sync.WaitGroup
			if tc.during != nil {
				stored.Go(func() { tc.during(t, p, ext) })
			}
			res, err := in.App.ImportChurches(ctx, p, []domain.ImportRow{{Name: "Mine", ExternalID: &ext}, {Name: "Plain"}})
			stored.Wait()
			if tc.want == domain.ProblemUnavailable.Code {
				wantProblem(t, err, tc.want)
				return
			}
			if err != nil || len(res) != 2 || res[1].Church == nil {
				t.Fatalf("%+v %v", res, err)
			}
			if tc.want != "" {
				if res[0].Err == nil || res[0].Err.Code != tc.want {
					t.Fatalf("row: %+v %v, want a %s", res[0].Church, res[0].Err, tc.want)
				}
				return
			}
			if res[0].Church == nil {
				t.Fatalf("row refused: %v", res[0].Err)
			}
			// The importer holds it now: another holder finds it live.
			if r, err := elsewhere.Reserve(context.Background(), reservations.ExternalID(p, ext), "a later request"); err != nil || r.Mine || r.Stale {
				t.Fatalf("after the import the reservation is %+v %v, want the importer's, live", r, err)
			}
		})
	}

	t.Run("a change takes over an external id a crashed holder reserved", func(t *testing.T) {
		t.Parallel()
		ctx := context.Background()
		p := in.partner(t)
		c := in.church(t, p)
		reserve(crashed)(t, p, "crm-2")
		got, err := in.App.UpdateChurch(ctx, p, c.ID, domain.ChurchPatch{ExternalID: ptr("crm-2")})
		if err != nil || !equalOptional(got.ExternalID, ptr("crm-2")) {
			t.Fatalf("%+v %v", got, err)
		}
	})

	t.Run("a change releases the external id it replaces", func(t *testing.T) {
		t.Parallel()
		ctx := context.Background()
		p := in.partner(t)
		res, err := in.App.ImportChurches(ctx, p, []domain.ImportRow{{Name: "A", ExternalID: ptr("old")}})
		if err != nil || res[0].Church == nil {
			t.Fatalf("%+v %v", res, err)
		}
		if _, err := in.App.UpdateChurch(ctx, p, res[0].Church.ID, domain.ChurchPatch{ExternalID: ptr("new")}); err != nil {
			t.Fatal(err)
		}
		if r, err := elsewhere.Reserve(ctx, reservations.ExternalID(p, "old"), "a later request"); err != nil || !r.Mine {
			t.Fatalf("the replaced external id: %+v %v, want it free at once", r, err)
		}
	})
}

// Two instances sharing one ledger import the same external id at once,
// round after round: exactly one import stores it each time, and every
// other finds it taken.
func TestTwoInstancesStoreAnExternalIDOnce(t *testing.T) {
	t.Parallel()
	url := eventlogtest.StartServer(t)
	a, b := startInstanceOn(t, url), startInstanceOn(t, url)
	p := a.partner(t)
	b.catchUp(t)
	const rounds, each = 10, 3
	ctx := context.Background()
	for round := range rounds {
		ext := fmt.Sprintf("race-%d", round)
		var created atomic.Int32
		var wg sync.WaitGroup
		for i := range 2 * each {
			in := []*instance{a, b}[i%2]
			wg.Go(func() {
				res, err := in.App.ImportChurches(ctx, p, []domain.ImportRow{{Name: fmt.Sprintf("Church %d", i), ExternalID: &ext}})
				switch {
				case err != nil:
					t.Errorf("round %d: %v", round, err)
				case res[0].Church != nil:
					created.Add(1)
				case res[0].Err.Code != domain.ProblemExternalIDTaken.Code:
					t.Errorf("round %d: refused with %v", round, res[0].Err)
				}
			})
		}
		wg.Wait()
		if n := created.Load(); n != 1 {
			t.Fatalf("round %d: %d imports stored external id %s, want exactly 1", round, n, ext)
		}
	}
	// The ledger agrees: one church per external id.
	a.catchUp(t)
	seen := map[string]int{}
	recs, _, err := a.Ledger.Read(ctx, a.Ledger.Subjects().Aggregate(p, domain.ChurchCatalogue), 0, 10000)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range recs {
		ev, err := r.Event()
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range ev.Payload.(*domain.ChurchesImported).Created {
			seen[*c.ExternalID]++
		}
	}
	if len(seen) != rounds {
		t.Errorf("%d external ids stored, want %d", len(seen), rounds)
	}
	for ext, n := range seen {
		if n != 1 {
			t.Errorf("%d churches hold %s", n, ext)
		}
	}
}
