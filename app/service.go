package app

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"time"
	"unicode"

	"github.com/rs/zerolog"
	"go.opentelemetry.io/otel/attribute"

	"github.com/partnergiving/giving/domain"
	"github.com/partnergiving/giving/eventlog"
	"github.com/partnergiving/giving/projections"
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
	Ledger      *eventlog.Ledger
	Store       *projections.Store
	Projector   *projections.Projector
	Idempotency *eventlog.Idempotency
	Secrets     *eventlog.Secrets
	Vault       *eventlog.Vault
	// VendorEvents remembers the vendor events the edge has fully handled.
	VendorEvents *eventlog.SeenSet
	Attempts     *eventlog.AttemptLog
	// Webhooks checks receiver addresses and sends test deliveries (the
	// dispatcher).
	Webhooks Webhooks
	// Phones verifies donor phones in the hosted flow.
	Phones sms.Verifier
	// Simulator plays the sandbox vendors; nil on the production stack.
	Simulator *simulators.Simulator
	// KeyUse keeps the hour each API key was last used.
	KeyUse *eventlog.KeyUse
	// Dashboard keeps the dashboard's sign-in links and sessions.
	Dashboard *eventlog.DashboardGrants
}

// Service runs the use cases of one instance.
type Service struct {
	cfg       Config
	log       zerolog.Logger
	ledger    *eventlog.Ledger
	store     *projections.Store
	projector *projections.Projector
	idem      *eventlog.Idempotency
	vault     *eventlog.Vault
	vendorSet *eventlog.SeenSet
	attempts  *eventlog.AttemptLog
	webhooks  Webhooks
	phones    sms.Verifier
	simulator *simulators.Simulator
	keyUse    *eventlog.KeyUse
	dashboard *eventlog.DashboardGrants

	flowKey     []byte
	webhookSeal *eventlog.Sealer
	cancelSeal  *eventlog.Sealer
	polls       longPolls
}

// New builds the service.
func New(cfg Config, d Deps) (*Service, error) {
	if d.Phones == nil {
		return nil, errors.New("app: no phone verifier")
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	cfg.PublicURL = strings.TrimRight(cfg.PublicURL, "/")
	return &Service{
		cfg: cfg, log: cfg.Log, ledger: d.Ledger, store: d.Store, projector: d.Projector, idem: d.Idempotency,
		vault: d.Vault, vendorSet: d.VendorEvents, attempts: d.Attempts, webhooks: d.Webhooks, phones: d.Phones,
		simulator: d.Simulator, keyUse: d.KeyUse, dashboard: d.Dashboard, flowKey: d.Secrets.Key("flow-token"),
		webhookSeal: d.Secrets.Sealer(eventlog.WebhookSecretPurpose),
		cancelSeal:  d.Secrets.Sealer(cancelReasonPurpose),
	}, nil
}

// Env is the stack the service runs.
func (s *Service) Env() domain.Environment { return s.cfg.Env }

// Now is the service's clock.
func (s *Service) Now() time.Time { return s.cfg.Now() }

// readWait bounds how long a use case waits for the local projections to
// show its own write, or to catch up before a recall.
const readWait = 5 * time.Second

// run is the one way a use case writes: it executes the command (under the
// request's Idempotency-Key, if the context carries one, so a retry can
// never append twice, and after a crash takeover first looking for what the
// dead request appended) and, when it appended, waits until the local
// projections have applied the event, so the answer and any read that
// follows on this instance see the write.
func (s *Service) run(ctx context.Context, cmd eventlog.Command) (eventlog.Outcome, error) {
	claimed := underClaim(ctx, &cmd, s.recall)
	ctx, span := telemetry.Start(ctx, useCase())
	out, err := s.ledger.Execute(ctx, cmd)
	if err == nil && out.Record != nil && claimed {
		err = settleClaimed(ctx, cmd, out)
	}
	if err == nil && out.Record != nil {
		span.SetAttributes(telemetry.Attr("giving.event_type", out.Record.Type), attribute.Bool("giving.replayed", out.Replayed))
		err = s.waitApplied(ctx, out.Record.Seq)
	}
	telemetry.End(span, err)
	return out, err
}

// useCase names the span of a command after the exported use case that
// runs it (app.ConnectPayroll), found on the call stack, so that no use
// case has to name itself; "app.run" when none is found.
func useCase() string {
	var pcs [8]uintptr
	n := runtime.Callers(3, pcs[:])
	if name, ok := useCases.Load(pcs); ok {
		return name.(string)
	}
	name := useCaseOf(pcs[:n])
	useCases.Store(pcs, name)
	return name
}

// useCases caches useCase's answer by call stack: resolving the frames'
// function names cost more than the rest of a command's span (about 7 µs
// of CPU per write request under load), and a program has few distinct
// stacks into run.
var useCases sync.Map // [8]uintptr → string

func useCaseOf(pcs []uintptr) string {
	frames := runtime.CallersFrames(pcs)
	const prefix = "github.com/partnergiving/giving/app.(*Service)."
	for {
		f, more := frames.Next()
		if name, ok := strings.CutPrefix(f.Function, prefix); ok && name != "" && unicode.IsUpper(rune(name[0])) {
			name, _, _ = strings.Cut(name, ".") // a closure inside the use case
			return "app." + name
		}
		if !more {
			return "app.run"
		}
	}
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
