package e2e

import (
	"context"
	"net/http"
	"sync"
	"testing"
	"time"
)

// A session that completed without its enrollment (the flow's creation of it
// failed) gets it from the sweeper, a few seconds later: exactly one
// enrollment.created under the id the completion named, however many
// instances sweep.
func TestSweeperCreatesMissingEnrollment(t *testing.T) {
	t.Parallel()
	clock := &testClock{}
	ts := startStack(t, withClock(clock))
	c, pid := ts.partner(t)
	church := importChurch(t, c, "Grace")
	_, enrolled := enroll(t, ts, c, pid, church, "+12025550100")
	orphan := completeSession(t, ts, c, pid, church, "+12025550101")
	ts.waitProjected(t)

	// The projections list the completed session that lacks its enrollment,
	// and only that one.
	refs, err := ts.Store.UnenrolledSessions(clock.now().Add(time.Hour), 100)
	if err != nil || len(refs) != 1 || refs[0].SessionID != orphan.ID || refs[0].PartnerID != pid {
		t.Fatalf("unenrolled sessions: %+v %v; want only %s", refs, err, orphan.ID)
	}
	// Within the grace the flow has to create it, the sweeper leaves it.
	if refs, _ := ts.Store.UnenrolledSessions(clock.now().Add(-5*time.Second), 100); len(refs) != 0 {
		t.Fatalf("a session completed just now is already due: %+v", refs)
	}

	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ts.App.SweepSessions(ctx, 5*time.Millisecond)
		}()
	}
	clock.advance(time.Minute)
	waitFor(t, 20*time.Second, "the sweeper to create the missing enrollment", func() bool {
		return c.Do(http.MethodGet, "/v1/enrollments/"+orphan.EnrollmentID, nil, nil).Status == http.StatusOK
	})
	ts.waitProjected(t)
	waitFor(t, 10*time.Second, "the index to forget the enrolled session", func() bool {
		refs, err := ts.Store.UnenrolledSessions(clock.now().Add(time.Hour), 100)
		return err == nil && len(refs) == 0
	})
	cancel()
	wg.Wait()

	counts := map[string]int{}
	for _, ev := range ledgerEvents(t, ts.Ledger, "enrollment.created") {
		counts[ev.AggregateID]++
	}
	if len(counts) != 2 || counts[orphan.EnrollmentID] != 1 || counts[enrolled] != 1 {
		t.Fatalf("enrollment.created per enrollment: %v; want one each for %s and %s", counts, enrolled, orphan.EnrollmentID)
	}
	var e map[string]any
	c.Do(http.MethodGet, "/v1/enrollments/"+orphan.EnrollmentID, nil, nil).JSON(t, &e)
	if e["church_id"] != church || e["status"] != "pending" {
		t.Fatalf("the swept enrollment: %v", e)
	}
}
