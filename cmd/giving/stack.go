package main

import (
	"context"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/partnergiving/giving/dispatcher"
	"github.com/partnergiving/giving/domain"
	"github.com/partnergiving/giving/eventlog"
	"github.com/partnergiving/giving/httpapi"
	"github.com/partnergiving/giving/httpapi/sms"
	"github.com/partnergiving/giving/projections"
	"github.com/partnergiving/giving/simulators"
)

// stackConfig is everything needed to run one instance.
type stackConfig struct {
	Ledger    eventlog.Config
	MasterKey string
	PublicURL string
	RateLimit httpapi.RateLimit
	// Vendors are the inbound webhook secrets. On the sandbox stack, empty
	// ones are derived from the master key, so every instance shares them.
	Vendors httpapi.VendorSecrets
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
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Webhooks tunes the dispatcher; its environment and log come from the
	// stack.
	Webhooks dispatcher.Config
}

// stack is one running instance: the ledger, the projections and their
// projector, and the HTTP API. It is wiring only.
type stack struct {
	cfg       stackConfig
	ledger    *eventlog.Ledger
	secrets   *eventlog.Secrets
	store     *projections.Store
	projector *projections.Projector
	api       *httpapi.Server
	control   *control

	dispatcher *dispatcher.Dispatcher

	cancel context.CancelFunc
	wg     sync.WaitGroup
}

func openStack(ctx context.Context, cfg stackConfig) (_ *stack, err error) {
	if err := os.MkdirAll(cfg.Ledger.DataDir, 0o700); err != nil {
		return nil, fmt.Errorf("data directory: %w", err)
	}
	s := &stack{cfg: cfg}
	defer func() {
		if err != nil {
			s.Close()
		}
	}()
	if s.secrets, err = eventlog.LoadSecrets(cfg.MasterKey, cfg.Ledger.DataDir); err != nil {
		return nil, err
	}
	if s.ledger, err = eventlog.Open(ctx, cfg.Ledger); err != nil {
		return nil, err
	}
	if s.store, err = projections.Open(projectionsPath(cfg.Ledger)); err != nil {
		return nil, err
	}
	s.projector = projections.NewProjector(s.store, s.ledger, cfg.Log.With().Str("component", "projector").Logger())
	instance := cfg.Instance
	if instance == "" {
		instance, _ = filepath.Abs(cfg.Ledger.DataDir)
		if host, err := os.Hostname(); err == nil {
			instance = host + ":" + instance
		}
	}
	idem, err := s.ledger.OpenIdempotency(ctx, s.secrets, eventlog.IdempotencyConfig{Instance: instance})
	if err != nil {
		return nil, err
	}
	limits, err := s.ledger.OpenRateLimits(ctx)
	if err != nil {
		return nil, err
	}
	vault, err := s.ledger.OpenVault(ctx, s.secrets)
	if err != nil {
		return nil, err
	}
	vendorEvents, err := s.ledger.OpenSeenSet(ctx, "vendor_events", 30*24*time.Hour)
	if err != nil {
		return nil, err
	}
	vendors, err := vendorSecrets(cfg, s.secrets)
	if err != nil {
		return nil, err
	}
	var sim *simulators.Simulator
	if cfg.Ledger.Env == domain.Sandbox {
		sim = simulators.New(cfg.PublicURL, simulators.Secrets(vendors), cfg.TLSRoots)
	}
	verifier := cfg.SMS
	if verifier == nil {
		if cfg.Ledger.Env != domain.Sandbox {
			return nil, errors.New("the production stack needs an SMS verifier (Twilio)")
		}
		verifier = sms.Sandbox{}
	}
	attempts, err := s.ledger.OpenAttemptLog(ctx)
	if err != nil {
		return nil, err
	}
	hooks := cfg.Webhooks
	hooks.Env, hooks.Log = cfg.Ledger.Env, cfg.Log.With().Str("component", "dispatcher").Logger()
	s.dispatcher, err = dispatcher.New(ctx, hooks, dispatcher.Deps{Ledger: s.ledger, Store: s.store, Secrets: s.secrets, Attempts: attempts})
	if err != nil {
		return nil, err
	}
	s.api, err = httpapi.New(httpapi.Config{
		Env: cfg.Ledger.Env, PublicURL: cfg.PublicURL, RateLimit: cfg.RateLimit, Vendors: vendors,
		Log: cfg.Log.With().Str("component", "http").Logger(), Now: cfg.Now,
	}, httpapi.Deps{
		Ledger: s.ledger, Store: s.store, Projector: s.projector,
		Idempotency: idem, RateLimits: limits, Secrets: s.secrets, Vault: vault, VendorEvents: vendorEvents, Simulator: sim, SMS: verifier,
		Webhooks: s.dispatcher, Attempts: attempts,
	})
	if err != nil {
		return nil, err
	}
	s.control = &control{instance: instance, ledger: s.ledger, projector: s.projector, log: cfg.Log}
	return s, nil
}

// projectionsPath is where an instance keeps its bbolt file.
func projectionsPath(cfg eventlog.Config) string {
	return filepath.Join(cfg.DataDir, "projections-"+string(cfg.Env)+".db")
}

// start runs the background loops and waits until the projections have
// caught up with the ledger, so the first request already sees every key.
func (s *stack) start(ctx context.Context) error {
	runCtx, cancel := context.WithCancel(context.Background())
	s.cancel = cancel
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		s.projector.Run(runCtx)
	}()
	s.wg.Add(2)
	go func() {
		defer s.wg.Done()
		s.api.SweepSessions(runCtx, time.Second)
	}()
	go func() {
		defer s.wg.Done()
		s.dispatcher.Run(runCtx)
	}()
	if err := s.control.listen(); err != nil {
		return err
	}
	catchCtx, cancelCatch := context.WithTimeout(ctx, 5*time.Minute)
	defer cancelCatch()
	return s.projector.CatchUp(catchCtx)
}

// Close stops the loops, then closes the projections and the ledger (which
// stops an embedded NATS server cleanly).
func (s *stack) Close() error {
	if s.control != nil {
		s.control.stop()
	}
	if s.cancel != nil {
		s.cancel()
	}
	s.wg.Wait()
	var errs []error
	if s.store != nil {
		errs = append(errs, s.store.Close())
	}
	if s.ledger != nil {
		s.ledger.Close()
	}
	return errors.Join(errs...)
}

// vendorSecrets returns the inbound webhook secrets: configured ones, or on
// the sandbox stack its own, derived from the master key. Production refuses
// to start without all three.
func vendorSecrets(cfg stackConfig, secrets *eventlog.Secrets) (httpapi.VendorSecrets, error) {
	v := cfg.Vendors
	pick := func(have []byte, kind string) []byte {
		if len(have) > 0 || cfg.Ledger.Env != domain.Sandbox {
			return have
		}
		return []byte(hex.EncodeToString(secrets.Key("sandbox-vendor/" + kind)))
	}
	v.Payroll, v.Bank, v.KYC = pick(v.Payroll, "payroll"), pick(v.Bank, "bank"), pick(v.KYC, "kyc")
	if len(v.Payroll) == 0 || len(v.Bank) == 0 || len(v.KYC) == 0 {
		return v, errors.New("production needs every vendor webhook secret: --vendor-secret-payroll, --vendor-secret-bank, --vendor-secret-kyc")
	}
	return v, nil
}
