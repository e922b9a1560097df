package app

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/partnergiving/giving/domain"
	"github.com/partnergiving/giving/eventlog"
	"github.com/partnergiving/giving/eventlog/dashboard"
	"github.com/partnergiving/giving/eventlog/delivery"
	"github.com/partnergiving/giving/eventlog/idempotency"
	"github.com/partnergiving/giving/eventlog/keyuse"
	"github.com/partnergiving/giving/eventlog/seen"
	"github.com/partnergiving/giving/projections"
	"github.com/partnergiving/giving/secrets"
	"github.com/partnergiving/giving/simulators"
	"github.com/partnergiving/giving/sms"
	"github.com/partnergiving/giving/telemetry"
)

// Config is what the use cases need to know about their deployment.
type Config struct {
	Env domain.Environment
	// PublicURL is the address partners and donors reach the service at;
	// hosted-flow urls are built on it.
	PublicURL string
	Log       zerolog.Logger
	// Now is the clock; nil means time.Now. Tests move it forward to expire
	// sessions and codes without waiting.
	Now func() time.Time
	// Metrics records feed reads; nil records nothing.
	Metrics *telemetry.Metrics
}

// Deps are the parts the use cases work with.
type Deps struct {
	Ledger      Ledger
	Store       *projections.Store
	Projector   *projections.Projector
	Idempotency Idempotency
	// Reservations keep the external ids being stored.
	Reservations Reservations
	Secrets      *secrets.Secrets
	Vault        Vault
	// VendorEvents remembers the vendor events the edge has fully handled.
	VendorEvents *seen.Set
	Attempts     *delivery.AttemptLog
	// Counts counts the delivery attempts of each partner by hour and
	// outcome.
	Counts *delivery.Counts
	// Webhooks builds what checks receiver addresses and sends test
	// deliveries (the dispatcher), given the service, whose FailEndpoint
	// it calls back to disable a failing endpoint: the two need each
	// other, so New hands the service over while building it instead of
	// either being wired to the other afterwards.
	Webhooks func(*Service) (Webhooks, error)
	// Phones verifies donor phones in the hosted flow.
	Phones sms.Verifier
	// Identity verifies donors' identity in the hosted flow.
	Identity IdentityVerifier
	// Payroll is the payroll-connectivity vendor, Bank the bank holding
	// the churches' deposit accounts.
	Payroll Payroll
	Bank    Bank
	// Simulator plays the sandbox vendors; nil on the production stack.
	Simulator *simulators.Simulator
	// KeyUse keeps the hour each API key was last used.
	KeyUse *keyuse.Store
	// Dashboard keeps the dashboard's sign-in links and sessions.
	Dashboard *dashboard.Grants
}

// Service runs the use cases of one instance. Under binds it to one
// partner request, whose Idempotency-Key the use cases' commands run under.
type Service struct {
	*instance
	// req is the claimed request the use cases run for (Under); nil
	// outside one.
	req *Request
	// useCase names the spans of the commands run for the use case
	// running (as); "app.run" when none named itself.
	useCase string
}

// instance is what the use cases run on, shared by every request.
type instance struct {
	cfg       Config
	log       zerolog.Logger
	ledger    Ledger
	store     *projections.Store
	projector *projections.Projector
	idem      Idempotency
	// reservations keep the external ids being stored.
	reservations Reservations
	vault        Vault
	vendorSet    *seen.Set
	attempts     *delivery.AttemptLog
	counts       *delivery.Counts
	webhooks     Webhooks
	phones       sms.Verifier
	identity     IdentityVerifier
	payroll      Payroll
	bank         Bank
	simulator    *simulators.Simulator
	keyUse       *keyuse.Store
	dashboard    *dashboard.Grants

	// wrote is the newest sequence this instance's commands appended or
	// found appended (SeeWrites).
	wrote highWater

	flowKey     []byte
	webhookSeal *secrets.Sealer
	cancelSeal  *secrets.Sealer
	polls       longPolls
}

// New builds the service.
func New(cfg Config, d Deps) (*Service, error) {
	if d.Phones == nil {
		return nil, errors.New("app: no phone verifier")
	}
	if d.Identity == nil {
		return nil, errors.New("app: no identity verifier")
	}
	if d.Payroll == nil || d.Bank == nil {
		return nil, errors.New("app: no payroll vendor or no bank")
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	cfg.PublicURL = strings.TrimRight(cfg.PublicURL, "/")
	s := &Service{instance: &instance{
		cfg: cfg, log: cfg.Log, ledger: d.Ledger, store: d.Store, projector: d.Projector, idem: d.Idempotency, reservations: d.Reservations,
		vault: d.Vault, vendorSet: d.VendorEvents, attempts: d.Attempts, counts: d.Counts, phones: d.Phones, identity: d.Identity,
		payroll: d.Payroll, bank: d.Bank,
		simulator: d.Simulator, keyUse: d.KeyUse, dashboard: d.Dashboard, flowKey: d.Secrets.Key("flow-token"),
		webhookSeal: d.Secrets.Sealer(secrets.WebhookSecretPurpose),
		cancelSeal:  d.Secrets.Sealer(cancelReasonPurpose),
	}}
	if d.Webhooks != nil {
		w, err := d.Webhooks(s)
		if err != nil {
			return nil, err
		}
		s.webhooks = w
	}
	return s, nil
}

// Env is the stack the service runs.
func (s *Service) Env() domain.Environment { return s.cfg.Env }

// Now is the service's clock.
func (s *Service) Now() time.Time { return s.cfg.Now() }

// readWait bounds how long a use case waits for the local projections to
// show its own write, or to catch up before a recall.
const readWait = 5 * time.Second

// run is the one way a use case writes: it executes the command (under the
// request's Idempotency-Key when the service runs for one (Under), so a
// retry can never append twice) and, when it appended, waits until the
// local projections have applied the event, so that the use case's own
// reads after it see the write.
func (s *Service) run(ctx context.Context, cmd eventlog.Command) (eventlog.Outcome, error) {
	return s.runCommand(ctx, cmd, true)
}

// runAnswered is run for a use case that answers from its own decision
// and reads nothing after it: it does not wait for the local projections.
// A read that follows on this instance still sees the write, because
// every read first waits for what this instance appended before it began
// (SeeWrites), and a write that reads what such a use case made (a church
// just imported) waits where it reads it (writtenChurch); by then the
// projector has mostly applied it.
func (s *Service) runAnswered(ctx context.Context, cmd eventlog.Command) (eventlog.Outcome, error) {
	return s.runCommand(ctx, cmd, false)
}

func (s *Service) runCommand(ctx context.Context, cmd eventlog.Command, wait bool) (eventlog.Outcome, error) {
	claimed := s.claim(&cmd)
	ctx, span := telemetry.Start(ctx, cmp.Or(s.useCase, "app.run"))
	out, err := s.execute(ctx, cmd, claimed)
	if err == nil && out.Record != nil && claimed {
		err = s.req.settleClaimed(cmd, out)
	}
	if err == nil && out.Record != nil {
		span.SetAttributes(telemetry.Attr("giving.event_type", out.Record.Type), attribute.Bool("giving.replayed", out.Replayed))
		s.wrote.advance(out.Record.Seq)
		if wait {
			err = s.waitApplied(ctx, out.Record.Seq)
		}
	}
	telemetry.End(span, err)
	return out, err
}

// claim gives cmd the dedup id of the request the service runs for
// (Under), unless cmd has one already (a vendor's event id, or the
// request's, given before the command ran: holderOf), and reports whether
// cmd runs under the request's claim.
func (s *Service) claim(cmd *eventlog.Command) bool {
	if s.req == nil {
		return false
	}
	if cmd.MsgID == "" {
		s.req.next(cmd)
	}
	return idempotency.IsRequestMsgID(cmd.MsgID)
}

// SeeWrites waits, bounded, until the local projections hold every event
// this instance's commands had appended (or found appended) when it was
// called: the transport calls it before serving any read, so that a read
// after a write on this instance sees the write, though the write's use
// case answered without waiting (runAnswered). It costs nothing once the
// projector has caught up, as it mostly has by the time the next request
// arrives.
func (s *Service) SeeWrites(ctx context.Context) error {
	seq := s.wrote.Load()
	if s.store.Applied() >= seq {
		return nil
	}
	return s.waitApplied(ctx, seq)
}

// writtenChurch is one of the partner's churches, as the projections hold
// it once they hold this instance's writes: a church an import on this
// instance answered a moment ago may not be applied yet, so one not found
// is looked for again after SeeWrites. A church found needs no wait (only
// imports answer before their event is applied, and they only add
// churches), so a request naming one never waits for the projections.
func (s *Service) writtenChurch(ctx context.Context, partner, churchID string) (domain.Church, bool, error) {
	c, ok, err := s.store.Church(partner, churchID)
	if err != nil || ok {
		return c, ok, err
	}
	if err := s.SeeWrites(ctx); err != nil {
		return c, false, err
	}
	return s.store.Church(partner, churchID)
}

// caughtUp waits until this instance's projections hold everything the
// ledger holds now: for a vendor's webhook or a church change naming
// something it does not find, which may have been written a moment ago, on
// this instance or another, before it is called unknown; and before a
// stale reservation is taken over (externalids.go).
func (s *Service) caughtUp(ctx context.Context) error {
	last, err := s.ledger.LastSeq(ctx)
	if err != nil {
		return err
	}
	return s.waitApplied(ctx, last)
}

// highWater is the newest sequence written, raised concurrently.
type highWater struct{ atomic.Uint64 }

// advance raises the mark to seq unless it is there already.
func (h *highWater) advance(seq uint64) {
	for {
		cur := h.Load()
		if cur >= seq || h.CompareAndSwap(cur, seq) {
			return
		}
	}
}

// execute runs a command on the ledger. A claimed one must not repeat what
// an earlier run of its request appended: the append's dedup id finds an
// event the ledger stored within its dedup window, and the projections'
// index of dedup ids an older one (recall). A claim taken over from a run
// that died or failed looks first, with the projections caught up with the
// ledger, since that run's event may be newer than what this instance has
// applied. A fresh claim, the usual case, reads the index as it stands:
// its key had no record, so an earlier run exists only if the record was
// lost (records are operational and persist asynchronously, so a crash of
// the single node can lose the newest), and that run's event was then
// stored before this process started, which applies the whole ledger
// before it serves. A fresh claim whose command appended nothing (or was
// refused) may have decided so from the earlier run's own effect, which no
// dedup id tells: it looks again, caught up, before answering.
func (s *Service) execute(ctx context.Context, cmd eventlog.Command, claimed bool) (eventlog.Outcome, error) {
	if !claimed {
		return s.ledger.Execute(ctx, cmd)
	}
	takeover := s.req.claim.Takeover
	if out, found, err := s.recall(ctx, cmd, takeover); err != nil || found {
		return out, err
	}
	out, err := s.ledger.Execute(ctx, cmd)
	if out.Record != nil || takeover {
		return out, err
	}
	if earlier, found, rerr := s.recall(ctx, cmd, true); rerr == nil && found {
		return earlier, nil
	}
	return out, err
}

// as returns the service running the use case called name: the spans of
// the commands it runs are named after it ("app.CreateSession"). Every
// exported use case that runs commands names itself first thing, so a
// trace reads as the use cases a request called.
func (s *Service) as(name string) *Service {
	return &Service{instance: s.instance, req: s.req, useCase: name}
}

// waitApplied waits, bounded, until the local projections reach seq.
func (s *Service) waitApplied(ctx context.Context, seq uint64) error {
	ctx, cancel := context.WithTimeout(ctx, readWait)
	defer cancel()
	ctx, span := telemetry.Start(ctx, "projections.wait")
	err := s.store.WaitFor(ctx, seq)
	telemetry.End(span, err)
	if err != nil {
		return fmt.Errorf("read your write: %w", err)
	}
	return nil
}

// recall finds the event an earlier run of a claimed command appended,
// by its dedup id, in the projections: caught up with the ledger first
// when caughtUp, else once they hold what the dedup window no longer
// does (pastWindow). It writes nothing.
func (s *Service) recall(ctx context.Context, cmd eventlog.Command, caughtUp bool) (eventlog.Outcome, bool, error) {
	ctx, span := telemetry.Start(ctx, "app.recall", trace.WithAttributes(attribute.Bool("giving.caught_up", caughtUp)))
	out, found, err := s.lookUp(ctx, cmd.MsgID, caughtUp)
	telemetry.End(span, err)
	if err != nil {
		return out, false, fmt.Errorf("command %s/%s: recall: %w", cmd.Partner, cmd.Aggregate, err)
	}
	return out, found, nil
}

func (s *Service) lookUp(ctx context.Context, msgID string, caughtUp bool) (eventlog.Outcome, bool, error) {
	wctx, cancel := context.WithTimeout(ctx, readWait)
	defer cancel()
	settle := s.pastWindow
	if caughtUp {
		settle = s.projector.CatchUp
	}
	if err := settle(wctx); err != nil {
		return eventlog.Outcome{}, false, err
	}
	seq, ok, err := s.store.CommandSeq(msgID)
	if err != nil || !ok {
		return eventlog.Outcome{}, false, err
	}
	rec, err := s.ledger.Get(ctx, seq)
	if err != nil {
		return eventlog.Outcome{}, false, err
	}
	return eventlog.Outcome{Record: &rec, Replayed: true}, true, nil
}

// windowMargin is how much of the ledger's dedup window pastWindow leaves
// aside for clocks: the stream's timestamps come from whichever node leads
// it, the deadline from this process.
const windowMargin = time.Minute

// pastWindow makes sure the local projections hold every event the ledger
// stored longer ago than its dedup window (less windowMargin), which an
// append's dedup id no longer finds: at once when this process has applied
// an event stored since (the projector follows the ledger within
// milliseconds while it is written), else by catching up with the ledger.
func (s *Service) pastWindow(ctx context.Context) error {
	horizon := time.Now().Add(windowMargin - s.ledger.DedupWindow())
	if s.store.AppliedThrough().After(horizon) {
		return nil
	}
	return s.projector.CatchUp(ctx)
}

// Readiness is how far this instance is behind its ledger.
type Readiness struct {
	LedgerSeq  uint64
	AppliedSeq uint64
	// Unwritable is set when the ledger answers but cannot store writes
	// (its store's disk is full).
	Unwritable bool
}

// Ready reports whether the ledger answers and can store writes, and the
// projections have caught up with it (waiting, within ctx, for them to).
func (s *Service) Ready(ctx context.Context) (Readiness, error) {
	if err := s.ledger.Writable(); err != nil {
		return Readiness{Unwritable: true}, err
	}
	last, err := s.ledger.LastSeq(ctx)
	if err != nil {
		return Readiness{}, err
	}
	r := Readiness{LedgerSeq: last}
	err = s.store.WaitFor(ctx, last)
	r.AppliedSeq = s.store.Applied()
	return r, err
}

// churchOf returns one of the partner's churches, or a not-found error.
func (s *Service) churchOf(partner, churchID string) (domain.Church, error) {
	c, ok, err := s.store.Church(partner, churchID)
	if err != nil {
		return c, err
	}
	if !ok {
		return c, domain.NotFound("church", churchID)
	}
	return c, nil
}

// PublicURL is the address partners and donors reach the service at.
func (s *Service) PublicURL() string { return s.cfg.PublicURL }
