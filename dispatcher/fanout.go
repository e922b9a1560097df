package dispatcher

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/partnergiving/giving/domain"
	"github.com/partnergiving/giving/eventlog"
	"github.com/partnergiving/giving/eventlog/delivery"
	"github.com/partnergiving/giving/telemetry"
)

// job is one delivery of one event to one endpoint, at one attempt. The
// event's bytes stay in the ledger; the job points at them.
type job struct {
	Seq       uint64 `json:"seq"`
	EventID   string `json:"event_id"`
	EventType string `json:"event_type"`
	Partner   string `json:"partner"`
	Endpoint  string `json:"endpoint"`
	Attempt   int    `json:"attempt"`
	// AttemptID, when set, names the attempt in the attempt log: a resend
	// answers with it before the attempt is made.
	AttemptID string `json:"attempt_id,omitempty"`
	// Once marks a resend or a recovery: one attempt, never retried; the
	// partner sees how it went in the attempt log and can ask again.
	Once bool `json:"once,omitempty"`
}

// FanOutBatch bounds how many ledger events one round of the webhook
// fan-out reads and fans out (the bench's fed loop reads as many).
const FanOutBatch = 256

const (
	// readyWait bounds how long the fan-out waits for the projections to
	// reach an event before it lets the event be redelivered.
	readyWait = 30 * time.Second
	// enqueueWait bounds the wait for the queue to store a round's jobs.
	enqueueWait = 10 * time.Second
)

// runFanOut follows the shared fan-out consumer until ctx ends, restarting
// after errors; the consumer's acknowledgements are the checkpoint.
func (d *Dispatcher) runFanOut(ctx context.Context) {
	for ctx.Err() == nil {
		if err := d.fanOutOnce(ctx); err != nil && ctx.Err() == nil {
			d.log.Error().Err(err).Msg("webhook fan-out stopped; restarting")
			_ = eventlog.Sleep(ctx, time.Second)
		}
	}
}

func (d *Dispatcher) fanOutOnce(ctx context.Context) error {
	err := d.fanout.Consume(ctx, FanOutBatch, func(batch []eventlog.Delivery) {
		d.fanOutRound(ctx, batch)
	})
	if ctx.Err() != nil {
		return nil
	}
	return fmt.Errorf("fan-out: %w", err)
}

// retryFanOut is how soon an event whose jobs could not all be settled is
// handed out again.
const retryFanOut = time.Second

// fanOutRound turns a batch of events into first attempts. It first waits
// until this instance's projections have applied the batch, so a partner who
// reads the event or its resource here on receiving the webhook finds it,
// and brings the endpoint table up to them, so it knows every endpoint
// created or deleted before each event (no lookup in the ledger, no read of
// the projections per event). Then it pushes each job
// to its endpoint's pusher, or spills it to the delivery queue when the
// pusher is full. It never waits for an attempt: each event is acknowledged
// by its settlement once all its jobs are settled.
func (d *Dispatcher) fanOutRound(ctx context.Context, batch []eventlog.Delivery) {
	seq := batch[len(batch)-1].Record.Seq
	read := time.Now()
	wctx, cancel := context.WithTimeout(ctx, readyWait)
	err := d.store.WaitFor(wctx, seq)
	cancel()
	applied := time.Now()
	if err == nil {
		err = d.endpoints.sync(d.store)
	}
	if err != nil {
		if ctx.Err() == nil {
			d.log.Error().Err(err).Msg("webhook fan-out: the projections lag or the endpoint table is unreadable; will retry")
		}
		for _, m := range batch {
			m.Retry(retryFanOut)
		}
		return
	}
	var spills []spill
	for _, m := range batch {
		jobs, err := d.jobsOf(m.Record)
		if err != nil {
			d.log.Error().Err(err).Uint64("seq", m.Record.Seq).Msg("webhook fan-out: event unreadable; dropped")
			m.Drop()
			continue
		}
		if len(jobs) == 0 {
			m.Ack()
			continue
		}
		d.cfg.Metrics.DispatchLag(telemetry.LagRead, m.Record.Stored, read)
		d.cfg.Metrics.DispatchLag(telemetry.LagApplied, m.Record.Stored, applied)
		s := newSettlement(m, len(jobs))
		for _, j := range jobs {
			if d.push(ctx, pushed{j: j, rec: m.Record, done: s.done}) {
				continue
			}
			sp, err := d.enqueue(j)
			if err != nil {
				d.log.Error().Err(err).Str("endpoint_id", j.Endpoint).Msg("webhook fan-out: not enqueued; will retry")
				s.done(false)
				continue
			}
			sp.done = s.done
			spills = append(spills, sp)
		}
	}
	if len(spills) > 0 {
		d.spills.Go(func() { d.settleSpills(ctx, spills) })
	}
}

// spill is a first attempt stored in the delivery queue instead of pushed.
type spill struct {
	stored delivery.Enqueued
	done   func(ok bool)
}

func (d *Dispatcher) settleSpills(ctx context.Context, spills []spill) {
	for _, sp := range spills {
		sp.done(delivery.Stored(ctx, []delivery.Enqueued{sp.stored}, enqueueWait) == nil)
	}
}

// jobsOf lists the first attempts of an event: one per enabled endpoint of
// its partner that subscribes to its type and existed before it, other than
// the endpoint the event is about (webhook_endpoint.secret_rotated goes to
// the partner's other endpoints). A disabled endpoint gets nothing; the
// event stays on the feed.
func (d *Dispatcher) jobsOf(rec eventlog.Record) ([]job, error) {
	var eventID string
	var jobs []job
	for _, ep := range d.endpoints.ofPartner(rec.Partner) {
		if ep.Seq >= rec.Seq || !ep.Enabled() || !ep.Subscribes(rec.Type) || ep.ID == rec.Aggregate {
			continue
		}
		if eventID == "" {
			id, err := domain.EnvelopeEventID(rec.Data)
			if err != nil {
				return nil, fmt.Errorf("record %d: %w", rec.Seq, err)
			}
			eventID = id
		}
		jobs = append(jobs, job{Seq: rec.Seq, EventID: eventID, EventType: rec.Type, Partner: rec.Partner, Endpoint: ep.ID, Attempt: 1})
	}
	return jobs, nil
}

// enqueue stores a first attempt in the endpoint's delivery queue, without
// waiting; the dedup id makes a second fan-out of the event store nothing.
func (d *Dispatcher) enqueue(j job) (spill, error) {
	data, _ := json.Marshal(j)
	e, err := d.queue.Enqueue(j.Partner, j.Endpoint, j.EventID+"/"+j.Endpoint, data)
	if err != nil {
		return spill{}, fmt.Errorf("enqueue %s for %s: %w", j.EventID, j.Endpoint, err)
	}
	return spill{stored: e}, nil
}
