package app_test

import (
	"context"
	"errors"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/partnergiving/giving/app"
	"github.com/partnergiving/giving/domain"
	"github.com/partnergiving/giving/eventlog"
	"github.com/partnergiving/giving/eventlog/eventlogtest"
	"github.com/partnergiving/giving/httpapi"
	"github.com/partnergiving/giving/internal/stack"
)

// The use cases run on a whole sandbox instance, built by the composition
// root as serve builds it: an embedded JetStream in the test's temporary
// directory, the projections beside it, and the HTTP API on a loopback port
// (the simulators post signed webhooks to the instance's own edge). Starting
// one takes a few hundred milliseconds, so a test starts one and its
// subtests share it, each as a partner of its own: partners see nothing of
// each other, which is what lets the subtests run in parallel.

// instance is a running sandbox instance whose use cases a test calls.
type instance struct {
	*stack.Stack
	// App is the instance's use cases.
	App *app.Service
}

// startInstance runs a sandbox instance with every background loop, and
// stops it when the test ends.
func startInstance(t testing.TB) *instance {
	t.Helper()
	return startInstanceOn(t, "")
}

// sharedMasterKey is the master key of instances that share a ledger, as
// every instance of one deployment does.
const sharedMasterKey = "3c4e2a9b8d7e6f50412233445566778899aabbccddeeff00112233445566778b"

// startInstanceOn runs a sandbox instance on the NATS server at natsURL,
// which other instances may share (eventlogtest.StartServer), or on an
// embedded one when natsURL is empty.
func startInstanceOn(t testing.TB, natsURL string) *instance {
	t.Helper()
	dir := t.TempDir()
	srv := httptest.NewUnstartedServer(nil)
	cfg := stack.Config{
		Ledger:    eventlog.Config{Env: domain.Sandbox, DataDir: dir, NATSURL: natsURL},
		PublicURL: "http://" + srv.Listener.Addr().String(),
		RateLimit: httpapi.RateLimit{PerSecond: 10000, Burst: 10000},
		Log:       zerolog.Nop(),
	}
	if natsURL != "" {
		cfg.MasterKey = sharedMasterKey
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	st, err := stack.Open(ctx, cfg)
	if err != nil {
		srv.Close()
		t.Fatalf("open stack: %v", err)
	}
	srv.Config.Handler = st.API.Handler()
	srv.Start()
	t.Cleanup(func() {
		st.API.EndLongPolls()
		srv.Close()
		st.Close()
	})
	if err := st.Start(ctx); err != nil {
		t.Fatalf("start stack: %v", err)
	}
	return &instance{Stack: st, App: st.App}
}

// partnerOrigin is the one redirect origin every test partner allows.
const partnerOrigin = "https://partner.example"

// partner onboards a partner of its own for a test and returns its id.
func (in *instance) partner(t testing.TB) string {
	t.Helper()
	ctx := context.Background()
	id, _, err := in.Operators.CreatePartner(ctx, "Partner "+t.Name(), []string{partnerOrigin}, domain.Brand{})
	if err != nil {
		t.Fatalf("create partner: %v", err)
	}
	in.catchUp(t)
	return id
}

// catchUp waits until the projections hold everything in the ledger.
func (in *instance) catchUp(t testing.TB) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := in.Projector.CatchUp(ctx); err != nil {
		t.Fatalf("projections catch up: %v", err)
	}
}

// church imports one church for the partner and returns it.
func (in *instance) church(t testing.TB, partner string) domain.Church {
	t.Helper()
	res, err := in.App.ImportChurches(context.Background(), partner, []domain.ImportRow{{Name: "Church of " + t.Name()}})
	if err != nil || len(res) != 1 || res[0].Church == nil {
		t.Fatalf("import a church: %v %+v", err, res)
	}
	// The import answers from its own decision; a test that reads the
	// store next reads it applied, as a request would (SeeWrites).
	if err := in.App.SeeWrites(context.Background()); err != nil {
		t.Fatal(err)
	}
	return *res[0].Church
}

// enrollment opens a donor session at the partner's church and appends the
// enrollment it makes as the hosted flow's last step does (through the
// ledger's command, with the domain's decision), then moves it to status
// through the use cases, and returns its id.
func (in *instance) enrollment(t testing.TB, partner, church string, status domain.EnrollmentStatus) string {
	t.Helper()
	ctx := context.Background()
	sess, err := in.App.CreateSession(ctx, partner, sessionRequest(church))
	if err != nil {
		t.Fatalf("open a donor session: %v", err)
	}
	id := domain.NewID(domain.PrefixEnrollment)
	// The session completed naming the enrollment, as the payroll vendor's
	// word on the switch makes it do.
	in.execute(t, partner, sess.Session.ID, func(eventlog.History) (*domain.Event, error) {
		ev := domain.NewEvent(partner, sess.Session.ID, church, time.Now(), &domain.DonorSessionCompleted{EnrollmentID: id, Provider: domain.PayrollVendor})
		return &ev, nil
	})
	in.execute(t, partner, id, func(h eventlog.History) (*domain.Event, error) {
		e := domain.Fold[domain.Enrollment](h.Events)
		ev, err := domain.CreateEnrollment(&e, domain.NewEnrollment{
			ID: id, PartnerID: partner, ChurchID: church, SessionID: sess.Session.ID,
			Giving: domain.Giving{Mode: domain.ModePercent, Value: 2_50},
		}, time.Now())
		return &ev, err
	})
	if status != domain.EnrollmentPending {
		in.execute(t, partner, id, func(h eventlog.History) (*domain.Event, error) {
			e := domain.Fold[domain.Enrollment](h.Events)
			return domain.ActivateEnrollment(&e, time.Now())
		})
	}
	in.catchUp(t)
	switch status {
	case domain.EnrollmentPending, domain.EnrollmentActive:
	case domain.EnrollmentPaused:
		_, err = in.App.PauseEnrollment(ctx, partner, id)
	case domain.EnrollmentCanceled:
		_, err = in.App.CancelEnrollment(ctx, partner, id, nil)
	case domain.EnrollmentPendingConsent:
		_, err = in.App.UpdateEnrollment(ctx, partner, id, []byte("9.5"))
	case domain.EnrollmentEnded:
		in.execute(t, partner, id, func(h eventlog.History) (*domain.Event, error) {
			e := domain.Fold[domain.Enrollment](h.Events)
			return domain.EndEnrollment(&e, domain.EndReasons[0], time.Now())
		})
		in.catchUp(t)
	default:
		t.Fatalf("no way to an enrollment %s", status)
	}
	if err != nil {
		t.Fatalf("move enrollment %s to %s: %v", id, status, err)
	}
	got, err := in.App.Enrollment(partner, id)
	if err != nil || got.Status != status {
		t.Fatalf("enrollment %s: %s %v, want %s", id, got.Status, err, status)
	}
	return id
}

// execute appends the event decide makes on one aggregate of the partner.
func (in *instance) execute(t testing.TB, partner, aggregate string, decide func(eventlog.History) (*domain.Event, error)) {
	t.Helper()
	_, err := in.Ledger.Execute(context.Background(), eventlog.Command{
		Partner: partner, Aggregate: aggregate,
		Decide: func(_ context.Context, h eventlog.History) (*domain.Event, error) { return decide(h) },
	})
	if err != nil {
		t.Fatalf("append to %s: %v", aggregate, err)
	}
}

// publicEvents counts the partner's public events of one type in the ledger
// about one aggregate.
func (in *instance) events(t testing.TB, partner, aggregate, eventType string) int {
	t.Helper()
	recs, _, err := in.Ledger.Read(context.Background(), in.Ledger.Subjects().Aggregate(partner, aggregate), 0, 10000)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, r := range recs {
		ev, err := r.Event()
		if err != nil {
			t.Fatal(err)
		}
		if ev.Type == eventType {
			n++
		}
	}
	return n
}

// wantProblem fails unless err is a domain error with code; an empty code
// wants no error at all.
func wantProblem(t testing.TB, err error, code domain.Code) {
	t.Helper()
	if code == "" {
		if err != nil {
			t.Fatalf("unexpected error: %v", err)
		}
		return
	}
	var de *domain.Error
	if !errors.As(err, &de) || de.Code != code {
		t.Fatalf("error %v, want a %s", err, code)
	}
}

// waitFor polls until cond holds.
func waitFor(t testing.TB, msg string, cond func() bool) {
	t.Helper()
	eventlogtest.WaitFor(t, 10*time.Second, msg, cond)
}

// appendConflicts is how many appends the instance's ledger refused for
// another writer's so far, from its metrics.
func (in *instance) appendConflicts(t testing.TB) float64 {
	t.Helper()
	return in.Metrics.AppendConflicts()
}
