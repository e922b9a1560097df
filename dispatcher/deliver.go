package dispatcher

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/partnergiving/giving/domain"
	"github.com/partnergiving/giving/eventlog"
	"github.com/partnergiving/giving/eventlog/delivery"
	"github.com/partnergiving/giving/projections"
	"github.com/partnergiving/giving/telemetry"
)

// worker consumes one endpoint's jobs in this instance.
type worker struct {
	partner, endpoint string
	cc                *delivery.Consumption
}

// ackWait is how long a job may stay with an instance before the server
// hands it to another: a whole attempt and a margin.
func (d *Dispatcher) ackWait() time.Duration { return d.cfg.Timeout + 30*time.Second }

// reconcileEvery bounds how long a change in endpoints, or a worker that
// stopped on its own, goes unnoticed.
const reconcileEvery = 2 * time.Second

// runWorkers keeps one worker per existing endpoint, starting and stopping
// them as endpoints are created and deleted.
func (d *Dispatcher) runWorkers(ctx context.Context) {
	d.sweep(ctx)
	tick := time.NewTicker(reconcileEvery)
	defer tick.Stop()
	seen, due := uint64(0), true
	for {
		changed := d.store.Changed()
		// Most batches the projector applies touch no endpoint: only look at
		// the endpoints when they changed, or on the tick, which also
		// restarts a worker that stopped on its own.
		if v, _, err := d.store.WebhookEndpointsChanged(); err != nil || v != seen || due {
			seen = v
			d.reconcile(ctx)
		}
		select {
		case <-ctx.Done():
			return
		case <-changed:
			due = false
		case <-tick.C:
			due = true
		}
	}
}

func (d *Dispatcher) reconcile(ctx context.Context) {
	endpoints, err := d.store.AllWebhookEndpoints()
	if err != nil {
		d.log.Error().Err(err).Msg("webhook workers: list endpoints")
		return
	}
	want := make(map[string]projections.WebhookEndpoint, len(endpoints))
	for _, ep := range endpoints {
		want[ep.ID] = ep
	}
	d.mu.Lock()
	var gone []*worker
	for id, w := range d.workers {
		_, keep := want[id]
		select {
		case <-w.cc.Closed():
			keep = false // stopped on its own; start again below if still wanted
		default:
		}
		if !keep {
			w.cc.Stop()
			delete(d.workers, id)
			if _, still := want[id]; !still {
				gone = append(gone, w)
			}
		}
	}
	for id, pu := range d.pushers {
		if _, keep := want[id]; !keep {
			pu.stop()
			delete(d.pushers, id)
		}
	}
	var start []projections.WebhookEndpoint
	for id, ep := range want {
		if _, ok := d.workers[id]; !ok {
			start = append(start, ep)
		}
	}
	d.mu.Unlock()
	for _, w := range gone {
		d.cleanup(ctx, w.partner, w.endpoint)
	}
	for _, ep := range start {
		if err := d.startWorker(ctx, ep); err != nil && ctx.Err() == nil {
			d.log.Error().Err(err).Str("endpoint_id", ep.ID).Msg("webhook worker did not start; retrying")
		}
	}
}

func (d *Dispatcher) startWorker(ctx context.Context, ep projections.WebhookEndpoint) error {
	cc, err := d.queue.Consume(ctx, ep.PartnerID, ep.ID, d.cfg.Concurrency, d.ackWait(),
		func(job delivery.Job) { d.take(ctx, job) },
		func(err error) {
			if errors.Is(err, eventlog.ErrStalled) {
				d.log.Warn().Err(err).Str("endpoint_id", ep.ID).Msg("webhook worker stalled; starting it again")
				return
			}
			d.log.Debug().Err(err).Str("endpoint_id", ep.ID).Msg("webhook worker")
		})
	if err != nil {
		return err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closing {
		cc.Stop()
		return nil
	}
	if old, ok := d.workers[ep.ID]; ok {
		old.cc.Stop()
	}
	d.workers[ep.ID] = &worker{partner: ep.PartnerID, endpoint: ep.ID, cc: cc}
	return nil
}

// sweep removes, after a restart, the queues of endpoints deleted while this
// instance was down. A consumer is only removed once the ledger itself says
// its endpoint was deleted, so an instance whose projections lag never
// removes a live endpoint's queue.
func (d *Dispatcher) sweep(ctx context.Context) {
	queued, err := d.queue.Endpoints(ctx)
	if err != nil {
		d.log.Warn().Err(err).Msg("webhook sweep: list consumers")
		return
	}
	for _, q := range queued {
		if !domain.ValidID(domain.PrefixEndpoint, q.Endpoint) {
			continue
		}
		last, err := d.ledger.LastOf(ctx, d.ledger.Subjects().Aggregate(q.Partner, q.Endpoint))
		if err != nil || last == 0 {
			continue
		}
		rec, err := d.ledger.Get(ctx, last)
		if err == nil && rec.Type == "webhook_endpoint.deleted" {
			d.cleanup(ctx, q.Partner, q.Endpoint)
		}
	}
}

// cleanup drops a deleted endpoint's consumer, queued jobs, scheduled
// retries and attempt log. Every instance may do it; the second finds
// nothing to do.
func (d *Dispatcher) cleanup(ctx context.Context, partner, endpoint string) {
	// Finish even when the dispatcher is stopping, so a deletion that
	// coincides with a shutdown leaves nothing behind.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	log := d.log.With().Str("endpoint_id", endpoint).Logger()
	if err := d.queue.Drop(ctx, partner, endpoint); err != nil {
		log.Warn().Err(err).Msg("webhook cleanup: delivery queue")
	}
	if err := d.attempts.Forget(ctx, partner, endpoint); err != nil {
		log.Warn().Err(err).Msg("webhook cleanup: attempt log")
	}
}

// take runs a job on its own goroutine, so the endpoint's consumer never
// waits for an attempt. Once the dispatcher is closing, the job goes back on
// the queue at once instead.
func (d *Dispatcher) take(ctx context.Context, m delivery.Job) {
	var j job
	if err := json.Unmarshal(m.Data(), &j); err != nil || j.Attempt < 1 {
		d.log.Error().Err(err).Str("subject", m.Subject()).Msg("webhook job unreadable; dropped")
		m.Drop()
		return
	}
	d.mu.Lock()
	closing := d.closing
	if !closing {
		d.jobs.Add(1)
	}
	d.mu.Unlock()
	if closing {
		d.requeue(m, j)
		return
	}
	go func() {
		defer d.jobs.Done()
		pu := d.pusherOf(ctx, j.Endpoint)
		if pu == nil || !d.acquire(ctx, m, pu) {
			d.requeue(m, j)
			return
		}
		defer func() { <-d.inFlight; pu.release() }()
		d.deliver(ctx, m, j)
	}()
}

// acquire takes one of this instance's attempt slots and one of the
// endpoint's (shared with its pushed attempts), telling the server the job
// is still being worked on while it waits.
func (d *Dispatcher) acquire(ctx context.Context, m delivery.Job, pu *pusher) bool {
	tick := time.NewTicker(d.ackWait() / 3)
	defer tick.Stop()
	for _, slots := range []chan struct{}{d.inFlight, pu.slots} {
		select {
		case slots <- struct{}{}:
			continue
		default:
		}
	wait:
		for {
			select {
			case slots <- struct{}{}:
				break wait
			case <-tick.C:
				m.InProgress()
			case <-ctx.Done():
				if slots == pu.slots {
					<-d.inFlight
				}
				return false
			}
		}
	}
	return true
}

// deliver makes one attempt of a job from the delivery queue (a spilled
// first attempt or a due retry) and settles it: acknowledged on success, on
// exhaustion, or once its retry is scheduled.
func (d *Dispatcher) deliver(ctx context.Context, m delivery.Job, j job) {
	rec, err := d.ledger.Get(ctx, j.Seq)
	if err != nil {
		if ctx.Err() != nil {
			d.requeue(m, j)
			return
		}
		d.log.Error().Err(err).Str("endpoint_id", j.Endpoint).Str("event_id", j.EventID).Msg("webhook delivery: event not readable; will retry")
		m.Retry(5 * time.Second)
		return
	}
	if rec.Partner != j.Partner || !rec.Public {
		d.log.Error().Uint64("seq", j.Seq).Str("endpoint_id", j.Endpoint).Msg("webhook job points at another partner's or an internal event; dropped")
		m.Drop()
		return
	}
	switch v, wait, _ := d.attempt(ctx, j, rec); v {
	case settled:
		if ctx.Err() != nil {
			d.ackConfirmed(m, j)
			return
		}
		m.Ack()
	case interrupted:
		d.requeue(m, j)
	default:
		if ctx.Err() != nil {
			// A plain nak sent as the server stops with the service may be
			// lost, and the job held, with the endpoint's slot, for a
			// whole ack wait after the restart.
			d.handBack(m, j, max(wait, requeueDelay))
			return
		}
		m.Retry(wait)
	}
}

// verdict is how an attempt left its job.
type verdict int

const (
	// settled: delivered, exhausted, retry scheduled, or the endpoint is
	// gone; nothing more to do with this copy of the job.
	settled verdict = iota
	// later: the job must be tried again after the returned wait.
	later
	// interrupted: the instance is stopping; it was not an attempt.
	interrupted
)

// attempt makes one attempt of j with the event's stored record, records it
// in the attempt log, and schedules the next attempt after a failure. It
// reports what is left to do with the job and how the attempt went (empty
// when none was made). Real
// deliveries, whether pushed at once or taken from the queue, all go
// through it.
func (d *Dispatcher) attempt(ctx context.Context, j job, rec eventlog.Record) (verdict, time.Duration, domain.DeliveryOutcome) {
	ep, sign, signed, ok, err := d.endpointOf(j.Partner, j.Endpoint)
	if err != nil {
		d.log.Error().Err(err).Str("endpoint_id", j.Endpoint).Str("event_id", j.EventID).Msg("webhook delivery: endpoint lookup")
		return later, time.Second, ""
	}
	if !ok {
		return settled, 0, "" // deleted: no further deliveries, retries included
	}
	if !ep.Enabled() {
		return settled, 0, "" // disabled: nothing new, retries included; enabling replays nothing
	}
	if !j.Once && !ep.Subscribes(j.EventType) {
		return settled, 0, "" // unsubscribed since: no attempt, retries included
	}
	if !signed {
		if sign, err = d.signerOf(ep); err != nil {
			d.log.Error().Err(err).Str("endpoint_id", j.Endpoint).Str("event_id", j.EventID).
				Msg("webhook delivery: endpoint secret cannot be opened (master key changed?)")
			return later, time.Minute, ""
		}
		d.endpoints.keepSigner(ep, sign)
	}
	at := time.Now()
	if j.Attempt == 1 && !j.Once {
		d.cfg.Metrics.DispatchLag(telemetry.LagAttempted, rec.Stored, at)
	}
	sctx, span := d.attemptSpan(ctx, j, rec.Trace)
	res := d.sender.send(sctx, ep.URL, sign, j.EventID, j.Attempt, rec.Data)
	endAttemptSpan(span, res)
	if ctx.Err() != nil && res.outcome != domain.DeliverySucceeded {
		return interrupted, 0, res.outcome
	}
	d.cfg.Metrics.WebhookDelivery(sctx, string(res.outcome), res.duration)
	d.counts.Add(j.Partner, at, string(res.outcome))
	attempt := newAttempt(ep.ID, j.EventID, j.EventType, j.Attempt, at, res)
	if j.AttemptID != "" {
		attempt.ID = j.AttemptID
	}
	if res.outcome == domain.DeliverySucceeded {
		// The common case writes nothing the delivery waits for: the
		// attempt log is an operational record, persisted asynchronously.
		d.endpoints.succeeded(ep.ID, at)
		d.log.Debug().Str("endpoint_id", j.Endpoint).Str("event_id", j.EventID).Int("attempt", j.Attempt).
			Str("partner_id", j.Partner).Str("event_type", j.EventType).Int("status", res.status).Dur("duration", res.duration).
			Msg("webhook attempt succeeded")
		d.recordLater(ctx, j.Partner, attempt)
		return settled, 0, res.outcome
	}
	attempt.FailingSince = d.failingSince(ctx, j.Partner, ep.ID, res.outcome, at)
	log := d.log.With().Str("endpoint_id", j.Endpoint).Str("event_id", j.EventID).Int("attempt", j.Attempt).
		Str("partner_id", j.Partner).Str("event_type", j.EventType).Str("outcome", string(res.outcome)).
		Int("status", res.status).Dur("duration", res.duration).Logger()
	if attempt.FailingSince != nil && at.Sub(*attempt.FailingSince) >= d.cfg.DisableAfter {
		log.Error().Str("reason", res.err).Time("failing_since", *attempt.FailingSince).
			Msg("webhook endpoint: every attempt failed for the disable-after span; disabling it (reason failing)")
		d.record(ctx, j.Partner, attempt)
		d.fail(ctx, j.Partner, ep.ID)
		return settled, 0, res.outcome
	} else if j.Once {
		log.Warn().Str("reason", res.err).Msg("webhook resend or recovery attempt failed; it is not retried")
	} else {
		if j.Attempt > len(d.cfg.Schedule) {
			attempt.Exhausted = true
			log.Error().Str("reason", res.err).Msg("webhook delivery exhausted: no automatic retry is left; the event stays on the feed")
		} else {
			next := time.Now().Add(nextWait(d.cfg.Schedule, j.Attempt, d.cfg.Jitter, res.retryAfter, d.cfg.MaxRetryAfter))
			attempt.NextAttemptAt = &next
			log.Warn().Str("reason", res.err).Time("next_attempt_at", next).Msg("webhook attempt failed; retry scheduled")
			if err := d.scheduleRetry(ctx, j, next); err != nil {
				log.Error().Err(err).Msg("webhook retry not scheduled; trying the job again instead")
				d.record(ctx, j.Partner, attempt)
				return later, time.Until(next), res.outcome
			}
		}
	}
	d.record(ctx, j.Partner, attempt)
	return settled, 0, res.outcome
}

// endpointOf returns the partner's endpoint from the endpoint table, with
// its signer when its secret was already opened. An endpoint the table does
// not hold is looked up in the projections, as before the table, so a lag of
// the table never drops a job.
func (d *Dispatcher) endpointOf(partner, id string) (ep projections.WebhookEndpoint, sign domain.WebhookSigner, signed, ok bool, err error) {
	if ep, sign, signed, ok = d.endpoints.get(partner, id); ok {
		return ep, sign, signed, true, nil
	}
	ep, ok, err = d.store.WebhookEndpoint(partner, id)
	return ep, sign, false, ok, err
}

// scheduleRetry stores the next attempt as a scheduled message that the
// server moves onto the endpoint's queue when it is due. One retry subject
// per event and endpoint, rolled up, so a repeated schedule replaces the
// earlier one.
func (d *Dispatcher) scheduleRetry(ctx context.Context, j job, at time.Time) error {
	j.Attempt++
	data, _ := json.Marshal(j)
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	return d.queue.Schedule(ctx, j.Partner, j.Endpoint, j.EventID, at, data)
}

// requeue hands back a job that was not attempted because the dispatcher
// is stopping, to be handed out again after requeueDelay (see
// delivery.Job.Release). If NATS is gone too, the server hands the job out
// again after the ack wait.
func (d *Dispatcher) requeue(m delivery.Job, j job) { d.handBack(m, j, requeueDelay) }

// handBack hands a job back, to be handed out again after delay, and waits
// for the server to take that in (see delivery.Job.Release).
func (d *Dispatcher) handBack(m delivery.Job, j job, delay time.Duration) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := m.Release(ctx, delay); err != nil {
		d.log.Warn().Err(err).Str("endpoint_id", j.Endpoint).Str("event_id", j.EventID).Msg("webhook job: the server did not confirm its release; it is handed out again after the hold")
	}
}

// requeueDelay is how long a job handed back by a stopping instance waits:
// longer than a stop takes, so the consumer being stopped is not handed it
// again (and the instance does not put it back again and again as it
// stops); after a restart, or on another instance, the job waits that long.
const requeueDelay = 2 * time.Second

// ackConfirmed lets go of a job and waits for the server to take that in.
// Jobs are settled this way while the dispatcher stops: a plain ack lost
// with a server stopping beside the service would leave the taken copy
// held after the restart, and the endpoint's slots with it, for a whole ack
// wait (and then hand it out again).
func (d *Dispatcher) ackConfirmed(m delivery.Job, j job) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := m.AckConfirmed(ctx); err != nil {
		d.log.Warn().Err(err).Str("endpoint_id", j.Endpoint).Str("event_id", j.EventID).Msg("webhook job: the server did not confirm its acknowledgement; it is handed out again after the hold")
	}
}

// failingSince is when the endpoint's run of failed attempts began, this
// attempt included (see domain.FailingSince). The previous attempt is read
// from the attempt log, which every instance writes, so the run spans
// instances and restarts; a success this instance saw after it (logged
// without waiting, so perhaps not stored yet) ends the run. Only failures
// read it.
func (d *Dispatcher) failingSince(ctx context.Context, partner, endpoint string, outcome domain.DeliveryOutcome, at time.Time) *time.Time {
	if outcome == domain.DeliverySucceeded {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	prev, err := d.attempts.Newest(ctx, partner, endpoint)
	if err != nil {
		d.log.Warn().Err(err).Str("endpoint_id", endpoint).Msg("webhook attempt log unreadable; a new run of failures starts")
	}
	if okAt := d.endpoints.lastSuccess(endpoint); !okAt.IsZero() && (prev == nil || okAt.After(prev.AttemptedAt)) {
		prev = nil
	}
	return domain.FailingSince(prev, outcome, at)
}

// fail disables an endpoint for failing, through the use case the wiring
// gave. A failure is logged; the next failed attempt tries again.
func (d *Dispatcher) fail(ctx context.Context, partner, endpoint string) {
	if d.disabler == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	if err := d.disabler.FailEndpoint(ctx, partner, endpoint); err != nil {
		d.log.Error().Err(err).Str("endpoint_id", endpoint).Msg("webhook endpoint not disabled; the next failed attempt tries again")
	}
}

func (d *Dispatcher) record(ctx context.Context, partner string, at domain.DeliveryAttempt) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if err := d.attempts.Record(ctx, partner, at); err != nil {
		d.log.Error().Err(err).Str("endpoint_id", at.EndpointID).Msg("webhook attempt not logged")
	}
}

// recordLater logs an attempt without waiting for the server to store it,
// in order with this instance's other records; when too many are already on
// their way it waits, as record does.
func (d *Dispatcher) recordLater(ctx context.Context, partner string, at domain.DeliveryAttempt) {
	endpoint := at.EndpointID
	err := d.attempts.RecordAsync(partner, at, func(err error) {
		d.log.Error().Err(err).Str("endpoint_id", endpoint).Msg("webhook attempt not logged")
	})
	if err != nil {
		d.record(ctx, partner, at)
	}
}

// attemptSpanOptions start every attempt's span; made once, since each
// option is an allocation and every delivery starts a span.
var attemptSpanOptions = []trace.SpanStartOption{trace.WithNewRoot(), trace.WithSpanKind(trace.SpanKindClient)}

// attemptSpan starts the span of one delivery attempt. The attempt runs
// long after, and apart from, the request that appended its event, so the
// span starts a trace of its own, linked to the append's span (its
// traceparent is stored with the event in the ledger, never in the
// envelope). Nothing of the trace is sent to the receiver. A span that is
// not recorded (no tracing, or not sampled) gets no attributes and no link:
// a burst's deliveries spend nothing building them.
func (d *Dispatcher) attemptSpan(ctx context.Context, j job, traceparent string) (context.Context, trace.Span) {
	ctx, span := telemetry.Start(ctx, "webhook.deliver", attemptSpanOptions...)
	if !span.IsRecording() {
		return ctx, span
	}
	span.SetAttributes(
		telemetry.Attr("giving.endpoint_id", j.Endpoint), telemetry.Attr("giving.event_id", j.EventID),
		telemetry.Attr("giving.event_type", j.EventType), attribute.Int("giving.attempt", j.Attempt),
	)
	if link, ok := telemetry.LinkTo(traceparent); ok {
		span.AddLink(link)
	}
	return ctx, span
}

func endAttemptSpan(span trace.Span, res result) {
	if span.IsRecording() {
		span.SetAttributes(telemetry.Attr("giving.outcome", string(res.outcome)))
		if res.status != 0 {
			span.SetAttributes(attribute.Int("http.response.status_code", res.status))
		}
	}
	var err error
	if res.outcome != domain.DeliverySucceeded {
		err = errors.New(res.err)
	}
	telemetry.End(span, err)
}

func newAttempt(endpoint, eventID, eventType string, n int, at time.Time, res result) domain.DeliveryAttempt {
	return domain.DeliveryAttempt{
		ID: domain.NewSortedID(domain.PrefixAttempt, endpoint), EndpointID: endpoint, EventID: eventID, EventType: eventType,
		Attempt: n, Outcome: res.outcome, StatusCode: res.status, Duration: res.duration,
		AttemptedAt: at.UTC(), Error: res.err, Response: res.response,
	}
}

// Resend queues one new delivery of one of the partner's public events
// (ledger sequence seq) to the endpoint: a single attempt, made by the
// endpoint's queue worker through attempt, the one delivery path, and
// logged under the returned attempt id. The queue keeps it across restarts.
func (d *Dispatcher) Resend(ctx context.Context, ep projections.WebhookEndpoint, seq uint64, eventID, eventType string) (string, error) {
	j := job{
		Seq: seq, EventID: eventID, EventType: eventType, Partner: ep.PartnerID, Endpoint: ep.ID, Attempt: 1,
		AttemptID: domain.NewSortedID(domain.PrefixAttempt, ep.ID), Once: true,
	}
	data, _ := json.Marshal(j)
	if err := d.queue.Put(ctx, j.Partner, j.Endpoint, data); err != nil {
		return "", fmt.Errorf("resend %s to %s: %w", eventID, ep.ID, err)
	}
	return j.AttemptID, nil
}

// TestDelivery sends a signed webhook_endpoint.test envelope to the endpoint
// at once, through the same signer and client as real deliveries, and logs
// the attempt. The test event is never appended to the ledger.
func (d *Dispatcher) TestDelivery(ctx context.Context, ep projections.WebhookEndpoint) (domain.DeliveryAttempt, error) {
	sign, err := d.signerOf(ep)
	if err != nil {
		return domain.DeliveryAttempt{}, err
	}
	ev := domain.NewEvent(ep.PartnerID, ep.ID, "", time.Now(), &domain.WebhookEndpointTested{WebhookEndpointID: ep.ID})
	body, err := ev.Envelope()
	if err != nil {
		return domain.DeliveryAttempt{}, err
	}
	at := time.Now()
	res := d.sender.send(ctx, ep.URL, sign, ev.ID, 1, body)
	d.counts.Add(ep.PartnerID, at, string(res.outcome))
	attempt := newAttempt(ep.ID, ev.ID, ev.Type, 1, at, res)
	attempt.FailingSince = d.failingSince(ctx, ep.PartnerID, ep.ID, res.outcome, at)
	d.record(ctx, ep.PartnerID, attempt)
	return attempt, nil
}

// signerOf opens an endpoint's secrets and makes its signer: the current
// secret, its ed25519 key for an ed25519 endpoint, and a rotated-out
// secret (and key) that signs beside them until it expires.
func (d *Dispatcher) signerOf(ep projections.WebhookEndpoint) (domain.WebhookSigner, error) {
	sign, err := d.openSigner(ep.ID, ep.SealedSecret, ep.SigningKey)
	if err != nil || ep.Previous == nil || !time.Now().Before(ep.Previous.ExpiresAt) {
		return sign, err
	}
	previous, err := d.openSigner(ep.ID, ep.Previous.SealedSecret, ep.Previous.SigningKey)
	if err != nil {
		return sign, err
	}
	return sign.WithPrevious(previous, ep.Previous.ExpiresAt), nil
}

// openSigner opens one generation of an endpoint's keys.
func (d *Dispatcher) openSigner(id string, sealed []byte, key *domain.SealedSigningKey) (domain.WebhookSigner, error) {
	secret, err := d.seal.Open(sealed, []byte(id))
	if err != nil {
		return domain.WebhookSigner{}, fmt.Errorf("open the secret of endpoint %s: %w", id, err)
	}
	sign := domain.NewWebhookSigner(string(secret))
	if key == nil {
		return sign, nil
	}
	private, err := d.seal.Open(key.Sealed, []byte(id))
	if err != nil {
		return sign, fmt.Errorf("open the signing key of endpoint %s: %w", id, err)
	}
	k, err := domain.ParseSigningKey(string(private))
	if err != nil {
		return sign, fmt.Errorf("signing key of endpoint %s: %w", id, err)
	}
	return sign.WithSigningKey(k), nil
}
