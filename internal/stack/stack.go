package stack

import (
	"context"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/partnergiving/giving/app"
	"github.com/partnergiving/giving/dispatcher"
	"github.com/partnergiving/giving/domain"
	"github.com/partnergiving/giving/eventlog"
	"github.com/partnergiving/giving/eventlog/control"
	"github.com/partnergiving/giving/eventlog/dashboard"
	"github.com/partnergiving/giving/eventlog/delivery"
	"github.com/partnergiving/giving/eventlog/idempotency"
	"github.com/partnergiving/giving/eventlog/keyuse"
	"github.com/partnergiving/giving/eventlog/presence"
	"github.com/partnergiving/giving/eventlog/reservations"
	"github.com/partnergiving/giving/eventlog/seen"
	"github.com/partnergiving/giving/eventlog/vault"
	"github.com/partnergiving/giving/httpapi"
	"github.com/partnergiving/giving/projections"
	"github.com/partnergiving/giving/secrets"
	"github.com/partnergiving/giving/simulators"
	"github.com/partnergiving/giving/sms"
	"github.com/partnergiving/giving/telemetry"
	"github.com/partnergiving/giving/vendors/stripeidentity"
)

// Config is everything needed to run one instance.
type Config struct {
	Ledger    eventlog.Config
	MasterKey string
	PublicURL string
	RateLimit httpapi.RateLimit
	// Vendors are the inbound webhook secrets. On the sandbox stack, empty
	// ones are derived from the master key, so every instance shares them.
	Vendors httpapi.VendorSecrets
	// Increase is the production bank (bank.go); the sandbox runs its own.
	Increase IncreaseConfig
	// TLSRoots lets the sandbox simulators trust the service's own
	// certificate when it serves https.
	TLSRoots *x509.CertPool
	// Instance names this instance stably across restarts; it defaults to
	// the data directory, which one process uses at a time.
	Instance string
	Log      zerolog.Logger
	// SMS verifies donor phones; nil means the sandbox verifier, which only
	// the sandbox stack may use.
	SMS sms.Verifier
	// Stripe is the production identity vendor's API (Stripe Identity):
	// its secret key and address. The sandbox stack ignores it and runs
	// its built-in stand-in instead. Stripe's webhook signing secret is
	// Vendors.KYC.
	Stripe stripeidentity.Config
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// VaultGrace is how old an unreferenced stored phone gets before the
	// vault sweep erases it; 0 means app.VaultGrace.
	VaultGrace time.Duration
	// PhoneKeys says how long a phone key seals; zero values are
	// the vault's defaults.
	PhoneKeys vault.PhoneKeyTimes
	// Webhooks tunes the dispatcher; its environment and log come from the
	// stack.
	Webhooks dispatcher.Config
	// RequestLease caps how long a request may run holding its
	// Idempotency-Key; 0 means idempotency.DefaultLease.
	RequestLease time.Duration
	// FrameAncestors is who may frame the partner dashboard (a CSP
	// frame-ancestors source list); empty means nobody.
	FrameAncestors string
	// Truv is the production stack's payroll vendor account; the sandbox
	// runs its own stand-in.
	Truv TruvConfig
}

// Stack is one running instance.
type Stack struct {
	Config     Config
	Ledger     *eventlog.Ledger
	Secrets    *secrets.Secrets
	Store      *projections.Store
	Projector  *projections.Projector
	App        *app.Service
	Operators  *app.Operators
	Dispatcher *dispatcher.Dispatcher
	API        *httpapi.Server
	// Bank holds the churches' deposit accounts: Increase in production,
	// the sandbox's own Increase on the sandbox.
	Bank app.Bank
	// Metrics is the instance's registry; serve exposes it on the metrics
	// listener.
	Metrics *telemetry.Metrics

	control  *controller
	presence *presence.Presence
	cancel   context.CancelFunc
	wg       sync.WaitGroup
}

// Open builds an instance; Start runs it.
func Open(ctx context.Context, cfg Config) (_ *Stack, err error) {
	if err := os.MkdirAll(cfg.Ledger.DataDir, 0o700); err != nil {
		return nil, fmt.Errorf("data directory: %w", err)
	}
	metrics := telemetry.NewMetrics()
	cfg.Ledger.Metrics = metrics
	cfg.Ledger.Client = "giving " + InstanceName(cfg)
	cfg.Ledger.Log = cfg.Log.With().Str("component", "nats").Logger()
	s := &Stack{Config: cfg, Metrics: metrics}
	defer func() {
		if err != nil {
			s.Close()
		}
	}()
	if s.Secrets, err = secrets.Load(cfg.MasterKey, cfg.Ledger.DataDir); err != nil {
		return nil, err
	}
	if s.Ledger, err = eventlog.Open(ctx, cfg.Ledger); err != nil {
		return nil, err
	}
	if s.Store, err = projections.Open(ProjectionsPath(cfg.Ledger)); err != nil {
		return nil, err
	}
	s.Projector = projections.NewProjector(s.Store, s.Ledger, cfg.Log.With().Str("component", "projector").Logger())
	if s.Store.Discarded() {
		cfg.Log.Warn().Str("file", s.Store.Path()).Msg("the machine went down while the projection file had unsynced writes; it starts empty and catches up from the ledger")
	}
	if err := s.upgradeProjections(ctx); err != nil {
		return nil, err
	}
	s.Operators = app.NewOperators(s.Ledger)
	instance := InstanceName(cfg)
	vendors, err := vendorSecrets(cfg, s.Secrets)
	if err != nil {
		return nil, err
	}
	if err := s.build(ctx, instance, vendors); err != nil {
		return nil, err
	}
	s.control = &controller{instance: instance, plane: control.New(s.Ledger), projector: s.Projector, log: cfg.Log, sessionsOfDonor: s.App.SessionsOfDonor}
	s.Metrics.Watch(state{s})
	return s, nil
}

// InstanceName is cfg.Instance, or by default the host and the absolute
// data directory, which one process uses at a time.
func InstanceName(cfg Config) string {
	if cfg.Instance != "" {
		return cfg.Instance
	}
	instance, _ := filepath.Abs(cfg.Ledger.DataDir)
	if host, err := os.Hostname(); err == nil {
		instance = host + ":" + instance
	}
	return instance
}

// build opens the shared state every instance uses and builds the use
// cases, the dispatcher and the API on it.
func (s *Stack) build(ctx context.Context, instance string, vendors httpapi.VendorSecrets) error {
	cfg := s.Config
	idem, err := idempotency.Open(ctx, s.Ledger, s.Secrets, idempotency.Config{Instance: instance, Lease: cfg.RequestLease})
	if err != nil {
		return err
	}
	reserved, err := reservations.Open(ctx, s.Ledger, reservations.Config{Instance: instance})
	if err != nil {
		return err
	}
	if s.presence, err = presence.Open(ctx, s.Ledger, instance, 5*time.Second); err != nil {
		return err
	}
	phones, err := vault.Open(ctx, s.Ledger, s.Secrets, cfg.PhoneKeys)
	if err != nil {
		return err
	}
	vendorEvents, err := seen.Open(ctx, s.Ledger, "vendor_events", 30*24*time.Hour)
	if err != nil {
		return err
	}
	attempts, err := delivery.OpenAttemptLog(ctx, s.Ledger)
	if err != nil {
		return err
	}
	counts, err := delivery.OpenCounts(ctx, s.Ledger)
	if err != nil {
		return err
	}
	recoveries, err := delivery.OpenRecoveries(ctx, s.Ledger)
	if err != nil {
		return err
	}
	keyUse, err := keyuse.Open(ctx, s.Ledger)
	if err != nil {
		return err
	}
	grants, err := dashboard.Open(ctx, s.Ledger)
	if err != nil {
		return err
	}
	bank, err := s.openBank(ctx)
	if err != nil {
		return err
	}
	s.Bank = bank.port
	var sim *simulators.Simulator
	if cfg.Ledger.Env == domain.Sandbox {
		sim = simulators.New(cfg.PublicURL, simulators.Secrets(vendors), bank.sandbox, cfg.TLSRoots)
	}
	verifier := cfg.SMS
	if verifier == nil {
		if cfg.Ledger.Env != domain.Sandbox {
			return errors.New("the production stack needs an SMS verifier (Twilio)")
		}
		verifier = sms.Sandbox{}
	}
	payroll, payrollStandIn, err := s.payrollVendor(vendors.Payroll)
	if err != nil {
		return err
	}
	identity, identityStandIn, err := s.identityVendor(sim)
	if err != nil {
		return err
	}
	standIns := map[string]http.Handler{}
	if payrollStandIn != nil {
		standIns["truv"] = payrollStandIn
	}
	if identityStandIn != nil {
		standIns["stripe"] = identityStandIn
	}
	hooks := cfg.Webhooks
	hooks.Env, hooks.Log, hooks.Metrics = cfg.Ledger.Env, cfg.Log.With().Str("component", "dispatcher").Logger(), s.Metrics
	s.App, err = app.New(app.Config{
		Env: cfg.Ledger.Env, PublicURL: cfg.PublicURL, Log: cfg.Log.With().Str("component", "app").Logger(), Now: cfg.Now,
		Metrics: s.Metrics,
	}, app.Deps{
		Ledger: s.Ledger, Store: s.Store, Projector: s.Projector, Idempotency: idem, Reservations: reserved, Secrets: s.Secrets, Vault: phones,
		VendorEvents: vendorEvents, Attempts: attempts, Counts: counts, Phones: verifier, Identity: identity, Simulator: sim, KeyUse: keyUse,
		Payroll: payroll, Bank: bank.port,
		Dashboard: grants,
		// The dispatcher disables failing endpoints through the service,
		// which sends test deliveries through the dispatcher.
		Webhooks: func(a *app.Service) (app.Webhooks, error) {
			var err error
			s.Dispatcher, err = dispatcher.New(ctx, hooks, dispatcher.Deps{
				Ledger: s.Ledger, Store: s.Store, Secrets: s.Secrets, Attempts: attempts, Counts: counts, Recoveries: recoveries,
				Instance: instance, Disabler: a,
			})
			return s.Dispatcher, err
		},
	})
	if err != nil {
		return err
	}
	s.API, err = httpapi.New(httpapi.Config{
		RateLimit: cfg.RateLimit, Vendors: vendors, BankTransfers: bank.transfers, Log: cfg.Log.With().Str("component", "http").Logger(), Metrics: s.Metrics,
		FrameAncestors: cfg.FrameAncestors, StandIns: standIns,
		Keys: httpapi.Keys{Cursor: s.Secrets.Key("cursor"), CSRF: s.Secrets.Key("flow-csrf"), Fingerprint: s.Secrets.Key("idempotency-fingerprint")},
	}, httpapi.Deps{App: s.App, Store: s.Store, Instances: s.presence})
	return err
}

// upgradeProjections rebuilds a projection file written with an older
// layout (before the feed table, say) from the ledger, before anything
// reads it. The ledger is untouched, so positions (feed cursors) stay valid.
func (s *Stack) upgradeProjections(ctx context.Context) error {
	outdated, err := s.Store.Outdated()
	if err != nil || !outdated {
		return err
	}
	log := s.Config.Log.With().Str("component", "projector").Logger()
	log.Warn().Str("file", s.Store.Path()).Msg("the projection file has an older layout; rebuilding it from the ledger")
	var last time.Time
	err = s.Projector.Rebuild(ctx, func(applied, total uint64) {
		if time.Since(last) > 5*time.Second {
			last = time.Now()
			log.Info().Uint64("applied", applied).Uint64("total", total).Msg("rebuilding projections")
		}
	})
	if err != nil {
		return fmt.Errorf("upgrade projections: %w", err)
	}
	log.Info().Uint64("applied", s.Store.Applied()).Msg("projection file rebuilt")
	return nil
}

// ProjectionsPath is where an instance keeps its bbolt file.
func ProjectionsPath(cfg eventlog.Config) string {
	return filepath.Join(cfg.DataDir, "projections-"+string(cfg.Env)+".db")
}

// Start runs the background loops and waits until the projections have
// caught up with the ledger, so the first request already sees every key.
func (s *Stack) Start(ctx context.Context) error {
	runCtx, cancel := context.WithCancel(context.Background())
	s.cancel = cancel
	grace := s.Config.VaultGrace
	if grace <= 0 {
		grace = app.VaultGrace
	}
	s.wg.Add(5)
	go func() {
		defer s.wg.Done()
		s.App.SweepVault(runCtx, grace)
	}()
	go func() {
		defer s.wg.Done()
		s.Projector.Run(runCtx)
	}()
	go func() {
		defer s.wg.Done()
		s.presence.Run(runCtx)
	}()
	go func() {
		defer s.wg.Done()
		s.App.SweepSessions(runCtx, time.Second)
	}()
	go func() {
		defer s.wg.Done()
		s.Dispatcher.Run(runCtx)
	}()
	if err := s.control.listen(); err != nil {
		return err
	}
	catchCtx, cancelCatch := context.WithTimeout(ctx, 5*time.Minute)
	defer cancelCatch()
	return s.Projector.CatchUp(catchCtx)
}

// Close stops the loops, then closes the projections and the ledger (which
// stops an embedded NATS server cleanly).
func (s *Stack) Close() error {
	if s.control != nil {
		s.control.stop()
	}
	if s.cancel != nil {
		s.cancel()
	}
	s.wg.Wait()
	var errs []error
	if s.Store != nil {
		errs = append(errs, s.Store.Close())
	}
	if s.Ledger != nil {
		s.Ledger.Close()
	}
	return errors.Join(errs...)
}

// vendorSecrets returns the inbound webhook secrets: configured ones, or on
// the sandbox stack its own, derived from the master key. Production refuses
// to start without all three.
func vendorSecrets(cfg Config, secrets *secrets.Secrets) (httpapi.VendorSecrets, error) {
	v := cfg.Vendors
	if cfg.Ledger.Env != domain.Sandbox {
		// Truv signs its webhooks with the access secret.
		v.Payroll = []byte(cfg.Truv.Secret)
	}
	pick := func(have []byte, kind string) []byte {
		if len(have) > 0 || cfg.Ledger.Env != domain.Sandbox {
			return have
		}
		return []byte(hex.EncodeToString(secrets.Key("sandbox-vendor/" + kind)))
	}
	v.Payroll, v.Bank, v.KYC = pick(v.Payroll, "payroll"), pick(v.Bank, "bank"), pick(v.KYC, "kyc")
	if len(v.Payroll) == 0 || len(v.Bank) == 0 || len(v.KYC) == 0 {
		return v, errors.New("production needs every vendor webhook secret: --truv-secret, --increase-webhook-secret, --stripe-webhook-secret")
	}
	return v, nil
}
