package dispatcher

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/partnergiving/giving/eventlog"
	"github.com/partnergiving/giving/projections"
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
}

const (
	// fanOutBatch bounds how many ledger events one round fans out.
	fanOutBatch = 256
	// projectionWait bounds how long the fan-out waits for the local
	// projections to know an event's endpoints before it lets the event be
	// redelivered.
	projectionWait = 30 * time.Second
	// enqueueWait bounds the wait for the queue to store a round's jobs.
	enqueueWait = 10 * time.Second
)

// runFanOut follows the shared fan-out consumer until ctx ends, restarting
// after errors; the consumer's acknowledgements are the checkpoint.
func (d *Dispatcher) runFanOut(ctx context.Context) {
	for ctx.Err() == nil {
		if err := d.fanOutOnce(ctx); err != nil && ctx.Err() == nil {
			d.log.Error().Err(err).Msg("webhook fan-out stopped; restarting")
			pause(ctx, time.Second)
		}
	}
}

func (d *Dispatcher) fanOutOnce(ctx context.Context) error {
	err := d.fanout.Consume(ctx, fanOutBatch, func(batch []eventlog.Delivery) {
		d.fanOutRound(ctx, batch)
	})
	if ctx.Err() != nil {
		return nil
	}
	return fmt.Errorf("fan-out: %w", err)
}

// fanOutRound enqueues the jobs of a batch of events, waits until the queue
// has stored them all, then acknowledges the events. If any job was not
// stored, the whole batch is redelivered; the jobs' dedup ids make the
// second round store only what the first did not.
func (d *Dispatcher) fanOutRound(ctx context.Context, batch []eventlog.Delivery) {
	var jobs []eventlog.Enqueued
	var failed error
	known := map[string][]projections.WebhookEndpoint{}
	for _, m := range batch {
		js, err := d.enqueue(ctx, m.Record, known)
		jobs = append(jobs, js...)
		if err != nil {
			failed = err
			break
		}
	}
	if failed == nil {
		failed = eventlog.Stored(ctx, jobs, enqueueWait)
	}
	for _, m := range batch {
		if failed != nil {
			m.Retry(time.Second)
			continue
		}
		m.Ack()
	}
	if failed != nil && ctx.Err() == nil {
		d.log.Error().Err(failed).Msg("webhook fan-out failed; will retry")
	}
}

// enqueue publishes one job per endpoint of the event's partner that
// subscribes to its type and existed before it.
func (d *Dispatcher) enqueue(ctx context.Context, rec eventlog.Record, known map[string][]projections.WebhookEndpoint) ([]eventlog.Enqueued, error) {
	endpoints, ok := known[rec.Partner]
	if !ok {
		var err error
		if endpoints, err = d.endpointsAt(ctx, rec); err != nil {
			return nil, err
		}
		known[rec.Partner] = endpoints
	}
	var eventID string
	var jobs []eventlog.Enqueued
	for _, ep := range endpoints {
		if ep.Seq >= rec.Seq || !ep.Subscribes(rec.Type) {
			continue
		}
		if eventID == "" {
			ev, err := rec.Event()
			if err != nil {
				return jobs, err
			}
			eventID = ev.ID
		}
		data, _ := json.Marshal(job{Seq: rec.Seq, EventID: eventID, EventType: rec.Type, Partner: rec.Partner, Endpoint: ep.ID, Attempt: 1})
		j, err := d.queue.Enqueue(rec.Partner, ep.ID, eventID+"/"+ep.ID, data)
		if err != nil {
			return jobs, fmt.Errorf("enqueue %s for %s: %w", eventID, ep.ID, err)
		}
		jobs = append(jobs, j)
	}
	return jobs, nil
}

// endpointsAt lists the partner's endpoints as they stood at the event. The
// local projections must have applied the partner's endpoint changes up to
// the event; usually they are long past the last one, so there is no wait,
// and a burst of events is never held up by the projector.
func (d *Dispatcher) endpointsAt(ctx context.Context, rec eventlog.Record) ([]projections.WebhookEndpoint, error) {
	lastChange, err := d.ledger.LastOf(ctx, d.ledger.Subjects().Noun(rec.Partner, "webhook_endpoint"))
	if err != nil {
		return nil, err
	}
	if need := min(lastChange, rec.Seq); need > d.store.Applied() {
		wctx, cancel := context.WithTimeout(ctx, projectionWait)
		defer cancel()
		if err := d.store.WaitFor(wctx, need); err != nil {
			return nil, err
		}
	}
	endpoints, _, _, err := d.store.WebhookEndpoints(rec.Partner, nil, 0)
	return endpoints, err
}
