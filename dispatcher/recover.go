package dispatcher

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/partnergiving/giving/domain"
	"github.com/partnergiving/giving/eventlog"
	"github.com/partnergiving/giving/eventlog/delivery"
	"github.com/partnergiving/giving/projections"
)

// Recoveries re-deliver a range of an endpoint's events, in ledger order.
// A recovery is stored (delivery.Recoveries) with its position; one
// instance runs it under a lease, one event at a time, each through
// attempt (the one delivery path) and holding one of the endpoint's
// attempt slots, so live deliveries and the recovery share the endpoint's
// concurrency. Its position is stored after every event: after a clean
// stop the lease is given back and the recovery resumes at the next event,
// on this instance after a restart or on another one; after a crash, the
// same instance takes it over as soon as it is back (the lease is in its
// name), another one once the lease has run out, and the event that was
// under way may be sent again (delivery is at least once).

// recoveryRescan bounds how long a recovery left without a runner waits
// for one.
const recoveryRescan = 2 * time.Second

// recoveryPage is how many events a runner reads at a time.
const recoveryPage = 50

// recoveryLease is how long a runner may go without storing progress
// before another instance takes its recovery over: longer than waiting for
// a slot and making one attempt.
func (d *Dispatcher) recoveryLease() time.Duration { return 2 * d.ackWait() }

// recoveryRuns tracks the recoveries this instance runs.
type recoveryRuns struct {
	mu      sync.Mutex
	running map[string]bool
	wg      sync.WaitGroup
	wake    chan struct{}
}

// Recover stores a new recovery and has it started at once; the recovery
// runner of some instance carries it out.
func (d *Dispatcher) Recover(ctx context.Context, r domain.WebhookRecovery) error {
	if _, err := d.recoveries.Create(ctx, r); err != nil {
		return err
	}
	select {
	case d.runs.wake <- struct{}{}:
	default:
	}
	return nil
}

// Recovery returns one of the partner's recoveries.
func (d *Dispatcher) Recovery(ctx context.Context, partner, id string) (domain.WebhookRecovery, bool, error) {
	r, ok, err := d.recoveries.Get(ctx, partner, id)
	return r.WebhookRecovery, ok, err
}

// runRecoveries takes up the running recoveries nobody runs, until ctx
// ends, then waits for its runners to give theirs back.
func (d *Dispatcher) runRecoveries(ctx context.Context) {
	tick := time.NewTicker(recoveryRescan)
	defer tick.Stop()
	for {
		d.claimRecoveries(ctx)
		select {
		case <-ctx.Done():
			d.runs.wg.Wait()
			return
		case <-tick.C:
		case <-d.runs.wake:
		}
	}
}

func (d *Dispatcher) claimRecoveries(ctx context.Context) {
	running, err := d.recoveries.Running(ctx)
	if err != nil {
		if ctx.Err() == nil {
			d.log.Warn().Err(err).Msg("webhook recoveries: list")
		}
		return
	}
	for _, r := range running {
		// A lease in this instance's own name that this process does not
		// run was left by its previous life, stopped before it could give
		// the lease back (a crash): nobody else runs it, so it is taken
		// over at once instead of when the lease runs out.
		leftByMe := r.Owner == d.instance
		if d.runs.has(r.ID) || (r.Owner != "" && !leftByMe && time.Now().Before(r.LeaseUntil)) {
			continue
		}
		r.Owner, r.LeaseUntil = d.instance, time.Now().Add(d.recoveryLease())
		claimed, err := d.recoveries.Update(ctx, r)
		if err != nil {
			continue // another instance claimed it first
		}
		d.runs.start(claimed.ID, func() { d.recover(ctx, claimed) })
	}
}

func (rr *recoveryRuns) has(id string) bool {
	rr.mu.Lock()
	defer rr.mu.Unlock()
	return rr.running[id]
}

func (rr *recoveryRuns) start(id string, run func()) {
	rr.mu.Lock()
	rr.running[id] = true
	rr.mu.Unlock()
	rr.wg.Add(1)
	go func() {
		defer rr.wg.Done()
		defer func() {
			rr.mu.Lock()
			delete(rr.running, id)
			rr.mu.Unlock()
		}()
		run()
	}()
}

// recover sends the recovery's events from its position on, storing the
// position after each, until the range is done, the endpoint is gone or
// disabled, another instance took the recovery over, or ctx ends (then the
// lease is given back).
func (d *Dispatcher) recover(ctx context.Context, r delivery.Recovery) {
	log := d.log.With().Str("recovery_id", r.ID).Str("endpoint_id", r.EndpointID).Logger()
	// The local feed must hold the whole range, and the endpoint as it was
	// when the recovery was asked for, before the range is read: a
	// projection still catching up after a start would end the recovery
	// early, or take the endpoint for deleted.
	if err := d.store.WaitFor(ctx, r.UpTo); err != nil {
		d.release(r)
		return
	}
	for {
		events, reached, done, err := d.store.RecoveryPage(&r.WebhookRecovery, r.Position, recoveryPage)
		if err != nil {
			log.Error().Err(err).Msg("webhook recovery: feed unreadable; will retry")
			if eventlog.Sleep(ctx, time.Second) != nil {
				d.release(r)
				return
			}
			continue
		}
		for _, ev := range events {
			ok, stop := d.recoverOne(ctx, &r, ev)
			if stop != "" {
				d.finish(r, domain.RecoveryFailed, stop)
				return
			}
			if !ok {
				d.release(r)
				return
			}
			if r, err = d.progress(ctx, r); err != nil {
				log.Warn().Err(err).Msg("webhook recovery: progress not stored; leaving it to the next runner")
				return
			}
		}
		r.Position = reached
		if done {
			d.finish(r, domain.RecoveryCompleted, "")
			log.Info().Int("sent", r.Sent).Int("failed", r.Failed).Msg("webhook recovery completed")
			return
		}
		if r, err = d.progress(ctx, r); err != nil {
			log.Warn().Err(err).Msg("webhook recovery: progress not stored; leaving it to the next runner")
			return
		}
	}
}

// recoverOne makes one attempt of one event of a recovery, holding one of
// the endpoint's slots. It reports false when it was interrupted (nothing
// was sent), and why the recovery cannot go on when the endpoint is gone
// or disabled.
func (d *Dispatcher) recoverOne(ctx context.Context, r *delivery.Recovery, ev projections.FeedEvent) (bool, string) {
	for {
		ep, ok, err := d.store.WebhookEndpoint(r.PartnerID, r.EndpointID)
		switch {
		case err != nil:
		case !ok:
			return false, "the endpoint was deleted"
		case !ep.Enabled():
			return false, "the endpoint was disabled"
		}
		rec, rerr := d.ledger.Get(ctx, ev.Seq)
		if err == nil && rerr == nil {
			j := job{
				Seq: ev.Seq, EventID: ev.ID, EventType: ev.Type, Partner: r.PartnerID, Endpoint: r.EndpointID,
				Attempt: 1, AttemptID: domain.NewSortedID(domain.PrefixAttempt, r.EndpointID), Once: true,
			}
			v, outcome := d.attemptInSlot(ctx, j, rec)
			switch v {
			case settled:
				r.Sent++
				if outcome != domain.DeliverySucceeded {
					r.Failed++
				}
				r.Position = ev.Seq
				return true, ""
			case interrupted:
				return false, ""
			}
		}
		if eventlog.Sleep(ctx, time.Second) != nil {
			return false, ""
		}
	}
}

// attemptInSlot makes an attempt holding one of this instance's attempt
// slots and one of the endpoint's, as queued attempts do.
func (d *Dispatcher) attemptInSlot(ctx context.Context, j job, rec eventlog.Record) (verdict, domain.DeliveryOutcome) {
	pu := d.pusherOf(ctx, j.Endpoint)
	if pu == nil {
		return interrupted, ""
	}
	select {
	case d.inFlight <- struct{}{}:
	case <-ctx.Done():
		return interrupted, ""
	}
	defer func() { <-d.inFlight }()
	if !pu.hold(ctx) {
		return interrupted, ""
	}
	defer pu.release()
	v, _, outcome := d.attempt(ctx, j, rec)
	return v, outcome
}

// progress stores the recovery's position and renews its lease.
func (d *Dispatcher) progress(ctx context.Context, r delivery.Recovery) (delivery.Recovery, error) {
	r.LeaseUntil = time.Now().Add(d.recoveryLease())
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	return d.recoveries.Update(ctx, r)
}

// finish stores the recovery's end.
func (d *Dispatcher) finish(r delivery.Recovery, status, why string) {
	r.Status, r.Error, r.Owner, r.LeaseUntil = status, why, "", time.Time{}
	d.save(r, "webhook recovery: end not stored; another runner will finish it")
}

// release gives the lease back after a clean stop, so the recovery resumes
// at once after a restart.
func (d *Dispatcher) release(r delivery.Recovery) {
	r.Owner, r.LeaseUntil = "", time.Time{}
	d.save(r, "webhook recovery: lease not given back; it resumes once the lease runs out")
}

func (d *Dispatcher) save(r delivery.Recovery, msg string) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := d.recoveries.Update(ctx, r); err != nil && !errors.Is(err, delivery.ErrRecoveryMoved) {
		d.log.Warn().Err(err).Str("recovery_id", r.ID).Msg(msg)
	}
}
