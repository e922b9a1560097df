package dispatcher

import (
	"cmp"
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/partnergiving/giving/domain"
	"github.com/partnergiving/giving/eventlog"
	"github.com/partnergiving/giving/eventlog/delivery"
	"github.com/partnergiving/giving/projections"
	"github.com/partnergiving/giving/secrets"
	"github.com/partnergiving/giving/telemetry"
)

// Config tunes the dispatcher.
type Config struct {
	Env domain.Environment
	// Timeout bounds one attempt: connecting, sending and the answer's
	// headers. Default 10s.
	Timeout time.Duration
	// Schedule is the waits between attempts; a delivery gets
	// len(Schedule)+1 attempts. Default DefaultSchedule.
	Schedule []time.Duration
	// Jitter spreads each wait over ±Jitter of its value. Default
	// DefaultJitter; negative means none.
	Jitter float64
	// MaxRetryAfter bounds a receiver's Retry-After. Default
	// DefaultMaxRetryAfter.
	MaxRetryAfter time.Duration
	// Concurrency is how many attempts one endpoint gets at once in this
	// instance, pushed first attempts and queued ones together. Default 8.
	Concurrency int
	// MaxInFlight bounds this instance's attempts at once, all endpoints
	// together. Default 512.
	MaxInFlight int
	// DisableAfter is how long every attempt to an endpoint must have
	// failed before the endpoint is disabled (reason failing). Default
	// DefaultDisableAfter.
	DisableAfter time.Duration
	// Resolver looks up receiver hosts. Default the system resolver.
	Resolver Resolver
	// Receivers overrides which receivers the stack may connect to; nil is
	// PolicyFor(Env). No setting of the service sets it: an end-to-end
	// test of the production stack does, to deliver to a receiver on
	// loopback.
	Receivers *Policy
	Log       zerolog.Logger
	// Metrics records delivery attempts; nil records nothing.
	Metrics *telemetry.Metrics
}

func (c *Config) defaults() {
	if c.Timeout <= 0 {
		c.Timeout = 10 * time.Second
	}
	if len(c.Schedule) == 0 {
		c.Schedule = DefaultSchedule
	}
	if c.Jitter == 0 {
		c.Jitter = DefaultJitter
	}
	c.Jitter = max(min(c.Jitter, 1), 0)
	if c.MaxRetryAfter <= 0 {
		c.MaxRetryAfter = DefaultMaxRetryAfter
	}
	if c.Concurrency <= 0 {
		c.Concurrency = 8
	}
	if c.DisableAfter <= 0 {
		c.DisableAfter = DefaultDisableAfter
	}
	if c.MaxInFlight <= 0 {
		c.MaxInFlight = 512
	}
}

// DefaultDisableAfter is Svix's span: an endpoint failing for 5 days is
// disabled.
const DefaultDisableAfter = 120 * time.Hour

// Deps are the parts the dispatcher works with.
type Deps struct {
	Ledger   *eventlog.Ledger
	Store    *projections.Store
	Secrets  *secrets.Secrets
	Attempts *delivery.AttemptLog
	// Counts counts each partner's attempts by hour and outcome; nil
	// counts nothing.
	Counts *delivery.Counts
	// Recoveries keeps the recoveries this and every other instance run.
	Recoveries *delivery.Recoveries
	// Instance names this instance stably across restarts: the recoveries
	// it runs are leased in that name, so that after a crash it takes its
	// own back as soon as it is up again. Empty names this process alone.
	Instance string
	// Disabler disables an endpoint whose every attempt failed for
	// Config.DisableAfter; nil only logs such an endpoint.
	Disabler EndpointDisabler
}

// EndpointDisabler is the use case the dispatcher calls back to disable a
// failing endpoint (app.Service.FailEndpoint): it records the endpoint's
// disabling in the ledger and emits webhook_endpoint.disabled, which the
// dispatcher then delivers like any event.
type EndpointDisabler interface {
	FailEndpoint(ctx context.Context, partner, endpoint string) error
}

// Dispatcher delivers partner events to webhook endpoints.
type Dispatcher struct {
	cfg      Config
	log      zerolog.Logger
	ledger   *eventlog.Ledger
	store    *projections.Store
	seal     *secrets.Sealer
	attempts *delivery.AttemptLog
	counts   *delivery.Counts
	guard    *guard
	// endpoints is the in-memory table of endpoints (endpoints.go).
	endpoints *endpoints

	recoveries *delivery.Recoveries
	// instance names this instance as the owner of the recoveries it runs.
	instance string
	runs     recoveryRuns
	sender   *sender

	queue    *delivery.Queue
	fanout   *eventlog.SharedReader
	inFlight chan struct{}

	mu      sync.Mutex
	workers map[string]*worker
	pushers map[string]*pusher
	closing bool
	jobs    sync.WaitGroup
	// spills are the fan-out's rounds still waiting for their spilled
	// first attempts to be stored, to settle their events.
	spills sync.WaitGroup

	// disabler turns an endpoint off for failing; nil only logs.
	disabler EndpointDisabler
}

// fanoutConsumer is the durable name every instance shares on the ledger.
const fanoutConsumer = "webhook_fanout"

// fanOutHold is how long the events an instance had taken wait, after it
// died (or lost one on its way), before the fan-out hands them out again.
// While the instance lives, the fan-out's reader keeps what it works on.
const fanOutHold = 10 * time.Second

// fanOutMaxOut bounds the events being delivered at once, across every
// instance. A hanging endpoint holds at most its pusher's slots and backlog
// of them, so many hanging endpoints are needed before healthy ones wait.
const fanOutMaxOut = 16384

// New sets up the delivery queue and the fan-out consumer. It delivers
// nothing until Run.
func New(ctx context.Context, cfg Config, d Deps) (*Dispatcher, error) {
	cfg.defaults()
	policy := PolicyFor(cfg.Env)
	if cfg.Receivers != nil {
		policy = *cfg.Receivers
	}
	g := newGuard(policy, cfg.Resolver)
	disp := &Dispatcher{
		cfg: cfg, log: cfg.Log, ledger: d.Ledger, store: d.Store, attempts: d.Attempts, counts: d.Counts,
		seal: d.Secrets.Sealer(secrets.WebhookSecretPurpose), guard: g, endpoints: newEndpoints(),
		sender:   newSender(g, cfg.Timeout, cfg.Concurrency),
		inFlight: make(chan struct{}, cfg.MaxInFlight), workers: map[string]*worker{}, pushers: map[string]*pusher{},
		recoveries: d.Recoveries, instance: cmp.Or(d.Instance, domain.NewID("")), disabler: d.Disabler,
		runs: recoveryRuns{running: map[string]bool{}, wake: make(chan struct{}, 1)},
	}
	if err := disp.setup(ctx); err != nil {
		return nil, err
	}
	return disp, nil
}

func (d *Dispatcher) setup(ctx context.Context) error {
	span := time.Duration(0)
	for _, w := range d.cfg.Schedule {
		span += w
	}
	var err error
	// The queue's age limit is a backstop for jobs of endpoints deleted
	// while they were being enqueued; every live job is consumed long before.
	if d.queue, err = delivery.OpenQueue(ctx, d.ledger, max(7*24*time.Hour, 2*span)); err != nil {
		return fmt.Errorf("dispatcher: %w", err)
	}
	d.fanout, err = d.ledger.OpenSharedReader(ctx, eventlog.SharedReaderConfig{
		Name: fanoutConsumer, Description: "Fans partner events out to webhook deliveries.",
		// An instance that dies holds its events for fanOutHold; while
		// alive it keeps an event as long as a pushed first attempt may
		// wait behind its pusher's backlog and then run, at most.
		Hold:    fanOutHold,
		MaxHold: time.Duration(pushBacklog+1)*d.cfg.Timeout + 30*time.Second,
		MaxOut:  fanOutMaxOut,
	}, func(err error) {
		d.log.Error().Err(err).Msg("webhook fan-out: unreadable ledger message")
	})
	if err != nil {
		return fmt.Errorf("dispatcher: %w", err)
	}
	return nil
}

// Holds reports what the delivery queue holds for an endpoint: whether its
// consumer exists and how many jobs and retries wait there.
func (d *Dispatcher) Holds(ctx context.Context, partner, endpoint string) (delivery.Holding, error) {
	return d.queue.Holds(ctx, partner, endpoint)
}

// Backlog reports what waits for delivery, across every endpoint and
// instance.
func (d *Dispatcher) Backlog(ctx context.Context) (telemetry.Backlog, error) {
	return d.queue.Backlog(ctx)
}

// CheckURL refuses, as a validation error naming url, a receiver address
// this stack will not connect to.
func (d *Dispatcher) CheckURL(ctx context.Context, rawURL string) error {
	return d.guard.checkURL(ctx, rawURL)
}

// Run delivers until ctx ends, then stops taking jobs and waits for the
// attempts under way. Interrupted attempts are put back on the queue.
func (d *Dispatcher) Run(ctx context.Context) {
	var wg sync.WaitGroup
	wg.Add(4)
	go func() {
		defer wg.Done()
		d.runEndpoints(ctx)
	}()
	go func() {
		defer wg.Done()
		d.runFanOut(ctx)
	}()
	go func() {
		defer wg.Done()
		d.runRecoveries(ctx)
	}()
	go func() {
		defer wg.Done()
		d.runWorkers(ctx)
	}()
	wg.Wait()
	// The fan-out has stopped: its last spills settle their events (at
	// once, as ctx has ended) before the settlements are flushed below.
	d.spills.Wait()
	d.mu.Lock()
	d.closing = true
	workers := d.workers
	d.workers = map[string]*worker{}
	d.mu.Unlock()
	// Drain hands the jobs already buffered to take, which puts them back
	// on the queue, so none waits out an ack wait after a restart.
	for _, w := range workers {
		w.cc.Drain()
	}
	deadline := time.After(5 * time.Second)
	for _, w := range workers {
		select {
		case <-w.cc.Closed():
		case <-deadline:
		}
	}
	d.jobs.Wait()
	// The attempts logged without waiting are stored before the connection
	// closes.
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	d.attempts.Settle(sctx)
	// So do the fan-out's acknowledgements and hand-backs, the last of
	// them sent by the pushers just stopped: otherwise a server stopping
	// with the service could lose some, and hold their events until the
	// fan-out's hold ran out.
	if err := d.fanout.Settled(sctx); err != nil {
		d.log.Warn().Err(err).Msg("webhook fan-out: the server did not confirm the last settlements before the stop")
	}
}

// FanOutBehind reports how many ledger events the fan-out has yet to
// settle, across every instance: 0 once every event so far has its
// deliveries done or stored.
func (d *Dispatcher) FanOutBehind(ctx context.Context) (uint64, error) {
	return d.fanout.Behind(ctx)
}
