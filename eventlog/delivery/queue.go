package delivery

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/partnergiving/giving/domain"
	"github.com/partnergiving/giving/eventlog"
	"github.com/partnergiving/giving/telemetry"
)

// Queue holds webhook delivery jobs in a JetStream work queue shared
// by every instance: one subject per endpoint, consumed by one durable
// consumer per endpoint whose pending limit is the endpoint's concurrency,
// so a slow endpoint holds only its own slots. Retries wait as scheduled
// messages that the server moves back onto the endpoint's subject when they
// are due, so they survive restarts and hold no memory meanwhile. Jobs are
// re-derivable work-queue state: on a single node they are persisted
// asynchronously, off the synced path.
type Queue struct {
	l      *eventlog.Ledger
	stream jetstream.Stream
	name   string
	prefix string // deliveries.<env>.
}

// OpenQueue opens (creating as needed) the environment's delivery
// queue. maxAge is a backstop for jobs nobody will consume (an endpoint
// deleted while they were enqueued).
func OpenQueue(ctx context.Context, l *eventlog.Ledger, maxAge time.Duration) (*Queue, error) {
	env := string(l.Env())
	q := &Queue{l: l, name: "DELIVERIES_" + strings.ToUpper(env), prefix: "deliveries." + env + "."}
	cfg := jetstream.StreamConfig{
		Name:              q.name,
		Description:       "Webhook delivery jobs and their scheduled retries.",
		Subjects:          []string{q.prefix + "job.>", q.prefix + "retry.>"},
		Retention:         jetstream.WorkQueuePolicy,
		Storage:           jetstream.FileStorage,
		Replicas:          l.Replicas(),
		Discard:           jetstream.DiscardOld,
		MaxAge:            maxAge,
		Duplicates:        2 * time.Minute,
		AllowMsgSchedules: true,
	}
	if cfg.Replicas <= 1 {
		cfg.PersistMode = jetstream.AsyncPersistMode
	}
	var err error
	if q.stream, err = eventlog.SetUp(ctx, "delivery queue", func(ctx context.Context) (jetstream.Stream, error) {
		return l.JetStream().CreateOrUpdateStream(ctx, cfg)
	}); err != nil {
		return nil, err
	}
	return q, nil
}

func (q *Queue) jobSubject(partner, endpoint string) string {
	return q.prefix + "job." + partner + "." + endpoint
}

func (q *Queue) retrySubject(partner, endpoint, key string) string {
	return q.prefix + "retry." + partner + "." + endpoint + "." + key
}

// Enqueued is a job on its way to the queue; Stored tells when it is.
type Enqueued struct{ f jetstream.PubAckFuture }

// Enqueue sends a job for an endpoint without waiting for the queue to
// store it. dedupID makes a second enqueue of the same job store nothing.
func (q *Queue) Enqueue(partner, endpoint, dedupID string, data []byte) (Enqueued, error) {
	if !eventlog.SafeToken(partner) || !eventlog.SafeToken(endpoint) {
		return Enqueued{}, fmt.Errorf("enqueue: unsafe partner %q or endpoint %q", partner, endpoint)
	}
	msg := nats.NewMsg(q.jobSubject(partner, endpoint))
	msg.Data = data
	f, err := q.l.JetStream().PublishMsgAsync(msg, jetstream.WithMsgID(dedupID), jetstream.WithExpectStream(q.name))
	if err != nil {
		return Enqueued{}, eventlog.NATSErr("enqueue", err)
	}
	return Enqueued{f: f}, nil
}

// Stored waits until every job in jobs is stored, at most timeout.
func Stored(ctx context.Context, jobs []Enqueued, timeout time.Duration) error {
	t := time.NewTimer(timeout)
	defer t.Stop()
	for _, j := range jobs {
		select {
		case <-j.f.Ok():
		case err := <-j.f.Err():
			return eventlog.NATSErr("enqueue", err)
		case <-t.C:
			return fmt.Errorf("enqueue: %w: not stored within %s", domain.ErrUnavailable, timeout)
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// Put stores a job for an endpoint, ready at once.
func (q *Queue) Put(ctx context.Context, partner, endpoint string, data []byte) error {
	if _, err := q.l.JetStream().Publish(ctx, q.jobSubject(partner, endpoint), data, jetstream.WithExpectStream(q.name)); err != nil {
		return eventlog.NATSErr("queue put", err)
	}
	return nil
}

// Schedule stores a job that the server moves onto the endpoint's queue at
// at. key names what is scheduled (one event's next attempt): a second
// schedule under the same key replaces the first.
func (q *Queue) Schedule(ctx context.Context, partner, endpoint, key string, at time.Time, data []byte) error {
	if !eventlog.SafeToken(key) {
		return fmt.Errorf("schedule: unsafe key %q", key)
	}
	msg := nats.NewMsg(q.retrySubject(partner, endpoint, key))
	msg.Data = data
	msg.Header.Set("Nats-Schedule", "@at "+at.UTC().Format(time.RFC3339Nano))
	msg.Header.Set("Nats-Schedule-Target", q.jobSubject(partner, endpoint))
	if _, err := q.l.JetStream().PublishMsg(ctx, msg, jetstream.WithExpectStream(q.name)); err != nil {
		return eventlog.NATSErr("schedule", err)
	}
	return nil
}

// Job is one job handed to an endpoint's consumer. It must be settled once:
// Ack when done, Retry to have it handed out again after a delay, Drop when
// it can never be run; while stopping, AckConfirmed and Release do what Ack
// and Retry do and wait for the server to take it in. InProgress tells the
// queue it is still being worked on, so it is not handed to another
// instance meanwhile.
type Job struct {
	msg jetstream.Msg
	nc  *nats.Conn
}

// Data is the job as enqueued.
func (j Job) Data() []byte { return j.msg.Data() }

// Subject names where the job came from, for logs.
func (j Job) Subject() string { return j.msg.Subject() }

// Ack settles the job as done.
func (j Job) Ack() { _ = j.msg.Ack() }

// AckConfirmed settles the job as done and waits until the server has taken
// the acknowledgement in. An Ack is taken in behind the client's back: one
// sent just before the server stops with the service is lost, and the job
// stays held as handed out after the restart, with the endpoint's slot,
// until the hold runs out. Settlements made while stopping use this.
func (j Job) AckConfirmed(ctx context.Context) error {
	if err := j.msg.DoubleAck(ctx); err != nil {
		return eventlog.NATSErr("delivery queue: ack", err)
	}
	return nil
}

// Release hands the job back, to be handed out again after delay (here or
// on another instance; a restarted server keeps the delay), and waits until
// the server has taken that in: the nak is sent as a request, which the
// server answers once it has. An instance that stops releases its jobs
// this way, with a delay longer than its stop takes: handed back at once,
// a job would come straight back to the consumer being stopped, and one
// arriving as it stops is held, with the endpoint's slot, for a whole ack
// wait after the restart.
func (j Job) Release(ctx context.Context, delay time.Duration) error {
	nak := fmt.Appendf(nil, "-NAK {\"delay\": %d}", delay.Nanoseconds())
	if _, err := j.nc.RequestWithContext(ctx, j.msg.Reply(), nak); err != nil {
		return eventlog.NATSErr("delivery queue: release", err)
	}
	return nil
}

// Retry has the job handed out again after delay (at once for 0, as eventlog.HandBack
// does: also after a restart of the server).
func (j Job) Retry(delay time.Duration) {
	if delay <= 0 {
		eventlog.HandBack(j.msg)
		return
	}
	_ = j.msg.NakWithDelay(delay)
}

// Drop settles a job that can never be run.
func (j Job) Drop() { _ = j.msg.Term() }

// InProgress extends the job's hold.
func (j Job) InProgress() { _ = j.msg.InProgress() }

// Consumption is an endpoint's consumer running in this instance.
type Consumption struct{ cc jetstream.ConsumeContext }

// Stop stops taking jobs; jobs already handed out stay with their handlers.
func (c *Consumption) Stop() { c.cc.Stop() }

// Drain hands the jobs already buffered to the handler, then stops.
func (c *Consumption) Drain() { c.cc.Drain() }

// Closed is closed once the consumption has stopped, on request or on its
// own.
func (c *Consumption) Closed() <-chan struct{} { return c.cc.Closed() }

// Consume runs the endpoint's shared consumer in this instance: at most
// concurrency of its jobs are out at once across every instance, and a job
// not settled within hold goes to another. handle runs on the consumer's
// goroutine and should hand the job off quickly. failed hears consumer
// errors.
func (q *Queue) Consume(ctx context.Context, partner, endpoint string, concurrency int, hold time.Duration, handle func(Job), failed func(error)) (*Consumption, error) {
	cons, err := eventlog.SetUp(ctx, "endpoint consumer", func(ctx context.Context) (jetstream.Consumer, error) {
		return q.stream.CreateOrUpdateConsumer(ctx, jetstream.ConsumerConfig{
			Durable:       consumerName(endpoint),
			Description:   "Deliveries to one webhook endpoint.",
			FilterSubject: q.jobSubject(partner, endpoint),
			AckPolicy:     jetstream.AckExplicitPolicy,
			AckWait:       hold,
			MaxAckPending: concurrency,
			MaxDeliver:    -1,
			DeliverPolicy: jetstream.DeliverAllPolicy,
			Metadata:      map[string]string{"partner_id": partner, "endpoint_id": endpoint},
		})
	})
	if err != nil {
		return nil, err
	}
	// The watchdog stops a consumer that receives nothing while jobs wait
	// for it and there is room to hand them out; the dispatcher then
	// starts it again (eventlog's watchdog.go).
	w := q.l.NewWatchdog(telemetry.ConsumerDeliveryQueue, true, func(ctx context.Context) (bool, error) {
		info, err := cons.Info(ctx)
		if err != nil {
			return false, err
		}
		return info.NumPending > 0 && info.NumAckPending < info.Config.MaxAckPending, nil
	})
	cc, err := cons.Consume(func(m jetstream.Msg) {
		w.Arrived()
		handle(Job{msg: m, nc: q.l.Conn()})
	},
		jetstream.PullMaxMessages(concurrency),
		jetstream.ConsumeErrHandler(func(_ jetstream.ConsumeContext, err error) { failed(err) }))
	if err != nil {
		return nil, eventlog.NATSErr("endpoint consumer", err)
	}
	wctx, stop := context.WithCancelCause(context.WithoutCancel(ctx))
	go func() {
		<-cc.Closed()
		stop(nil)
	}()
	go func() {
		w.Watch(wctx, stop)
		if errors.Is(context.Cause(wctx), eventlog.ErrStalled) {
			failed(fmt.Errorf("endpoint consumer %s: %w", endpoint, eventlog.ErrStalled))
			cc.Stop()
		}
	}()
	return &Consumption{cc: cc}, nil
}

// consumerName is the durable name of an endpoint's consumer, shared by
// every instance.
func consumerName(endpoint string) string { return "deliver_" + endpoint }

// QueuedEndpoint is an endpoint that has a consumer on the queue.
type QueuedEndpoint struct{ Partner, Endpoint string }

// Endpoints lists the endpoints that have a consumer on the queue.
func (q *Queue) Endpoints(ctx context.Context) ([]QueuedEndpoint, error) {
	lister := q.stream.ListConsumers(ctx)
	var out []QueuedEndpoint
	for info := range lister.Info() {
		p, e := info.Config.Metadata["partner_id"], info.Config.Metadata["endpoint_id"]
		if p != "" && e != "" {
			out = append(out, QueuedEndpoint{Partner: p, Endpoint: e})
		}
	}
	if err := lister.Err(); err != nil {
		return nil, eventlog.NATSErr("list endpoint consumers", err)
	}
	return out, nil
}

// Drop removes an endpoint's consumer, queued jobs and scheduled retries.
// Dropping what is already gone succeeds.
func (q *Queue) Drop(ctx context.Context, partner, endpoint string) error {
	var errs []error
	if err := q.stream.DeleteConsumer(ctx, consumerName(endpoint)); err != nil && !isGone(err) {
		errs = append(errs, eventlog.NATSErr("delete consumer", err))
	}
	for _, subject := range []string{q.jobSubject(partner, endpoint), q.retrySubject(partner, endpoint, ">")} {
		if err := q.stream.Purge(ctx, jetstream.WithPurgeSubject(subject)); err != nil {
			errs = append(errs, eventlog.NATSErr("purge "+subject, err))
		}
	}
	return errors.Join(errs...)
}

// Holding is what the queue holds for one endpoint.
type Holding struct {
	// Consumer tells whether the endpoint's consumer exists.
	Consumer bool
	// Messages counts the endpoint's stored jobs and scheduled retries.
	Messages uint64
}

// Holds reports what the queue holds for an endpoint: its consumer, and how
// many of its jobs and scheduled retries are stored. After Drop it holds
// nothing.
func (q *Queue) Holds(ctx context.Context, partner, endpoint string) (Holding, error) {
	var h Holding
	_, err := q.stream.Consumer(ctx, consumerName(endpoint))
	switch {
	case err == nil:
		h.Consumer = true
	case !isGone(err):
		return h, eventlog.NATSErr("endpoint consumer", err)
	}
	for _, subject := range []string{q.jobSubject(partner, endpoint), q.retrySubject(partner, endpoint, ">")} {
		info, err := q.stream.Info(ctx, jetstream.WithSubjectFilter(subject))
		if err != nil {
			return h, eventlog.NATSErr("delivery queue "+subject, err)
		}
		for _, n := range info.State.Subjects {
			h.Messages += n
		}
	}
	return h, nil
}

// isGone recognises a consumer or stream that no longer exists.
func isGone(err error) bool {
	return errors.Is(err, jetstream.ErrConsumerNotFound) || errors.Is(err, jetstream.ErrConsumerDeleted) ||
		errors.Is(err, jetstream.ErrStreamNotFound)
}

// Backlog reports what waits in the queue, for every endpoint and instance
// together: the stored jobs and scheduled retries, and when the oldest job
// ready for an attempt was queued. It reads the stream's state and one
// message, whatever the backlog's size.
func (q *Queue) Backlog(ctx context.Context) (telemetry.Backlog, error) {
	info, err := q.stream.Info(ctx)
	if err != nil {
		return telemetry.Backlog{}, eventlog.NATSErr("delivery queue backlog", err)
	}
	b := telemetry.Backlog{Waiting: info.State.Msgs}
	if b.Waiting == 0 {
		return b, nil
	}
	oldest, err := q.stream.GetMsg(ctx, info.State.FirstSeq, jetstream.WithGetMsgSubject(q.prefix+"job.>"))
	switch {
	case errors.Is(err, jetstream.ErrMsgNotFound):
		return b, nil
	case err != nil:
		return b, eventlog.NATSErr("delivery queue backlog", err)
	}
	b.OldestReady = oldest.Time
	return b, nil
}
