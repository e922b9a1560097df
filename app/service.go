package app

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/rs/zerolog"
	"go.opentelemetry.io/otel/attribute"

	"github.com/partnergiving/giving/domain"
	"github.com/partnergiving/giving/eventlog"
	"github.com/partnergiving/giving/eventlog/dashboard"
	"github.com/partnergiving/giving/eventlog/delivery"
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
	Secrets     *secrets.Secrets
	Vault       Vault
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
	vault     Vault
	vendorSet *seen.Set
	attempts  *delivery.AttemptLog
	counts    *delivery.Counts
	webhooks  Webhooks
	phones    sms.Verifier
	payroll   Payroll
	bank      Bank
	simulator *simulators.Simulator
	keyUse    *keyuse.Store
	dashboard *dashboard.Grants

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
	if d.Payroll == nil || d.Bank == nil {
		return nil, errors.New("app: no payroll vendor or no bank")
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	cfg.PublicURL = strings.TrimRight(cfg.PublicURL, "/")
	s := &Service{instance: &instance{
		cfg: cfg, log: cfg.Log, ledger: d.Ledger, store: d.Store, projector: d.Projector, idem: d.Idempotency,
		vault: d.Vault, vendorSet: d.VendorEvents, attempts: d.Attempts, counts: d.Counts, phones: d.Phones,
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
// retry can never append twice, first looking for what an earlier run of
// the request appended) and, when it appended, waits until the local
// projections have applied the event, so the answer and any read that
// follows on this instance see the write.
func (s *Service) run(ctx context.Context, cmd eventlog.Command) (eventlog.Outcome, error) {
	claimed := s.req != nil && cmd.MsgID == ""
	if claimed {
		s.req.next(&cmd)
	}
	ctx, span := telemetry.Start(ctx, cmp.Or(s.useCase, "app.run"))
	out, err := s.execute(ctx, cmd, claimed)
	if err == nil && out.Record != nil && claimed {
		err = s.req.settleClaimed(cmd, out)
	}
	if err == nil && out.Record != nil {
		span.SetAttributes(telemetry.Attr("giving.event_type", out.Record.Type), attribute.Bool("giving.replayed", out.Replayed))
		err = s.waitApplied(ctx, out.Record.Seq)
	}
	telemetry.End(span, err)
	return out, err
}

// execute runs a command on the ledger. A claimed one first looks for
// what an earlier run of the request appended: after a crash takeover, and
// also when the key's record itself was lost (records are operational and
// persist asynchronously, so a crash can lose the newest), which Begin
// cannot tell from a first run. The look-up reads the projections once they
// have caught up with the ledger; it writes nothing.
func (s *Service) execute(ctx context.Context, cmd eventlog.Command, claimed bool) (eventlog.Outcome, error) {
	if claimed {
		rec, found, err := s.recall(ctx, cmd.MsgID)
		if err != nil {
			return eventlog.Outcome{}, fmt.Errorf("command %s/%s: recall: %w", cmd.Partner, cmd.Aggregate, err)
		}
		if found {
			return eventlog.Outcome{Record: &rec, Replayed: true}, nil
		}
	}
	return s.ledger.Execute(ctx, cmd)
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
	if err := s.store.WaitFor(ctx, seq); err != nil {
		return fmt.Errorf("read your write: %w", err)
	}
	return nil
}

// recall finds the event an earlier run of a command appended, once the
// projections have caught up with the ledger.
func (s *Service) recall(ctx context.Context, msgID string) (eventlog.Record, bool, error) {
	wctx, cancel := context.WithTimeout(ctx, readWait)
	defer cancel()
	if err := s.projector.CatchUp(wctx); err != nil {
		return eventlog.Record{}, false, err
	}
	seq, ok, err := s.store.CommandSeq(msgID)
	if err != nil || !ok {
		return eventlog.Record{}, false, err
	}
	rec, err := s.ledger.Get(ctx, seq)
	return rec, err == nil, err
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
