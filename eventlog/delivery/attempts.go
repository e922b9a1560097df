package delivery

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/partnergiving/giving/domain"
	"github.com/partnergiving/giving/eventlog"
)

// AttemptsListed is how many delivery attempts are kept, and listed, per
// webhook endpoint.
const AttemptsListed = 50

// AttemptLog keeps webhook delivery attempts in their own JetStream stream,
// one subject per endpoint holding at most AttemptsListed messages, so the
// server itself drops the oldest. A message holds one attempt, or the
// attempts of one endpoint that RecordAsync sent together; Last lists the
// newest AttemptsListed. Attempts are high-volume operational
// records, not facts of the ledger: on a single node the stream persists
// asynchronously (acknowledged before the disk sync, as the architecture
// allows for such records), on a cluster it relies on replication.
type AttemptLog struct {
	l      *eventlog.Ledger
	name   string
	prefix string
	stream jetstream.Stream
	async  asyncRecords
}

// OpenAttemptLog opens (creating as needed) the attempt log of the ledger's
// environment.
func OpenAttemptLog(ctx context.Context, l *eventlog.Ledger) (*AttemptLog, error) {
	env := string(l.Env())
	a := &AttemptLog{l: l, name: "WEBHOOK_ATTEMPTS_" + strings.ToUpper(env), prefix: "webhook_attempts." + env + "."}
	cfg := jetstream.StreamConfig{
		Name:              a.name,
		Description:       "Webhook delivery attempts (" + env + "): the last " + fmt.Sprint(AttemptsListed) + " per endpoint.",
		Subjects:          []string{a.prefix + ">"},
		Storage:           jetstream.FileStorage,
		Retention:         jetstream.LimitsPolicy,
		Discard:           jetstream.DiscardOld,
		MaxMsgsPerSubject: AttemptsListed,
		Replicas:          l.Replicas(),
		AllowDirect:       true,
	}
	if cfg.Replicas == 1 {
		cfg.PersistMode = jetstream.AsyncPersistMode
	}
	st, err := eventlog.SetUp(ctx, "open attempt log "+a.name, func(ctx context.Context) (jetstream.Stream, error) {
		return l.JetStream().CreateOrUpdateStream(ctx, cfg)
	})
	if err != nil {
		return nil, err
	}
	a.stream = st
	return a, nil
}

func (a *AttemptLog) subject(partner, endpoint string) (string, error) {
	if !eventlog.SafeToken(partner) || !eventlog.SafeToken(endpoint) {
		return "", fmt.Errorf("attempt log: unsafe partner %q or endpoint %q", partner, endpoint)
	}
	return a.prefix + partner + "." + endpoint, nil
}

// encode returns the bytes attempts recorded together are logged as: one
// attempt as its object, more as an array of them, oldest first, in one
// message (decodeAttempts reads both).
func encodeAttempts(ats []domain.DeliveryAttempt) ([]byte, error) {
	var data []byte
	var err error
	if len(ats) == 1 {
		data, err = json.Marshal(ats[0])
	} else {
		data, err = json.Marshal(ats)
	}
	if err != nil {
		return nil, eventlog.NATSErr("attempt log", err)
	}
	return data, nil
}

// decodeAttempts reads a message of the log: one attempt, or an array of
// attempts recorded together, oldest first.
func decodeAttempts(data []byte) ([]domain.DeliveryAttempt, error) {
	if b := bytes.TrimSpace(data); len(b) > 0 && b[0] == '[' {
		var ats []domain.DeliveryAttempt
		err := json.Unmarshal(b, &ats)
		return ats, err
	}
	var at domain.DeliveryAttempt
	if err := json.Unmarshal(data, &at); err != nil {
		return nil, err
	}
	return []domain.DeliveryAttempt{at}, nil
}

// Record appends one attempt to its endpoint's log and waits for the server
// to store it. The endpoint's attempts RecordAsync still holds go first, so
// the log keeps the order in which attempts were recorded.
func (a *AttemptLog) Record(ctx context.Context, partner string, at domain.DeliveryAttempt) error {
	subject, err := a.subject(partner, at.EndpointID)
	if err != nil {
		return err
	}
	data, err := encodeAttempts([]domain.DeliveryAttempt{at})
	if err != nil {
		return err
	}
	q := &a.async
	q.pub.Lock()
	q.mu.Lock()
	earlier := q.pending[subject]
	delete(q.pending, subject)
	q.n -= len(earlier)
	q.mu.Unlock()
	sent := a.publish(subject, earlier)
	f, err := a.l.JetStream().PublishAsync(subject, data, jetstream.WithExpectStream(a.name))
	q.pub.Unlock()
	if len(sent) > 0 {
		go a.await(sent)
	}
	if err != nil {
		return eventlog.NATSErr(fmt.Sprintf("attempt log %s", subject), err)
	}
	select {
	case <-f.Ok():
		return nil
	case err := <-f.Err():
		return eventlog.NATSErr(fmt.Sprintf("attempt log %s", subject), err)
	case <-ctx.Done():
		return eventlog.NATSErr(fmt.Sprintf("attempt log %s", subject), ctx.Err())
	}
}

// recordAckWait bounds how long RecordAsync waits for the server's
// acknowledgement before it reports the attempt lost.
const recordAckWait = 30 * time.Second

// maxAsyncPending bounds the attempts RecordAsync holds before it refuses
// more (the caller then records synchronously).
const maxAsyncPending = 4096

// recordRound is the least time between two rounds of RecordAsync's sends
// while attempts keep coming: a burst's attempts gather ten ms' worth to a
// message, while an attempt that finds no round under way goes at once.
// At a busy endpoint a round gathers more than the log keeps, and only the
// newest AttemptsListed are sent (asyncRecords): at 2 ms, a round at
// 24,000 deliveries a second gathered about 48, none of them left out,
// and the log's encoding and storing cost 3 µs of a delivery's 72
// (measured with giving bench).
const recordRound = 10 * time.Millisecond

// asyncRecords are the attempts RecordAsync was given and has not yet sent.
// One flusher, running while there are any, sends each endpoint's as one
// message, waits for the server to acknowledge the round, and sends what
// gathered meanwhile: at a trickle every attempt is sent at once on its
// own, in a burst the attempts gathered during a round trip share one
// message, one store and one acknowledgement (rounds at most every
// recordRound). An endpoint holds at most AttemptsListed waiting: the log
// keeps and lists the newest AttemptsListed of each endpoint, so an
// attempt with that many newer ones waiting behind it would be pushed out
// of the log by the message that carries them; it is dropped unsent
// instead, neither encoded nor stored (nor reported lost: it is not).
type asyncRecords struct {
	// pub is held while attempts are taken and handed to the connection,
	// so they reach the server in the order they were recorded.
	pub     sync.Mutex
	mu      sync.Mutex
	pending map[string][]pendingAttempt // by subject, oldest first
	n       int
	running bool
	// settled are closed once a round that started after they were added
	// has been acknowledged (Settle).
	settled []chan struct{}
}

type pendingAttempt struct {
	at   domain.DeliveryAttempt
	lost func(error)
}

// sentAttempts are attempts sent as one message and waiting for the
// server's acknowledgement.
type sentAttempts struct {
	subject string
	f       jetstream.PubAckFuture
	ats     []pendingAttempt
}

// RecordAsync appends one attempt without waiting for the server: when it
// returns the attempt will be sent, in order with this process's other
// records, unless AttemptsListed newer attempts of its endpoint come before
// it is (asyncRecords). lost hears, on another goroutine, of an attempt the
// server did not acknowledge. An error (too many records already waiting,
// or an unsafe subject) means it will not be sent.
func (a *AttemptLog) RecordAsync(partner string, at domain.DeliveryAttempt, lost func(error)) error {
	subject, err := a.subject(partner, at.EndpointID)
	if err != nil {
		return err
	}
	q := &a.async
	q.mu.Lock()
	waiting := q.pending[subject]
	switch {
	case len(waiting) == AttemptsListed:
		// The oldest waiting now has AttemptsListed newer ones: it goes.
		q.pending[subject] = append(waiting[1:], pendingAttempt{at: at, lost: lost})
	case q.n >= maxAsyncPending:
		q.mu.Unlock()
		return fmt.Errorf("attempt log %s: %d attempts already waiting to be sent", subject, maxAsyncPending)
	default:
		if q.pending == nil {
			q.pending = map[string][]pendingAttempt{}
		}
		q.pending[subject] = append(waiting, pendingAttempt{at: at, lost: lost})
		q.n++
	}
	start := !q.running
	q.running = true
	q.mu.Unlock()
	if start {
		go a.flush()
	}
	return nil
}

// flush sends the waiting attempts round after round until none are left.
func (a *AttemptLog) flush() {
	q := &a.async
	for {
		q.pub.Lock()
		q.mu.Lock()
		pending, settled := q.pending, q.settled
		q.pending, q.settled, q.n = nil, nil, 0
		if len(pending) == 0 {
			q.running = false
		}
		q.mu.Unlock()
		var sent []sentAttempts
		for subject, ats := range pending {
			sent = append(sent, a.publish(subject, ats)...)
		}
		q.pub.Unlock()
		a.await(sent)
		for _, c := range settled {
			close(c)
		}
		if len(pending) == 0 {
			return
		}
		// Busy: let the next round gather a little more.
		time.Sleep(recordRound)
	}
}

// publish sends an endpoint's waiting attempts, at most AttemptsListed to a
// message. An attempt that cannot be sent is reported lost at once.
func (a *AttemptLog) publish(subject string, pending []pendingAttempt) []sentAttempts {
	var sent []sentAttempts
	for chunk := range slices.Chunk(pending, AttemptsListed) {
		ats := make([]domain.DeliveryAttempt, len(chunk))
		for i, p := range chunk {
			ats[i] = p.at
		}
		data, err := encodeAttempts(ats)
		var f jetstream.PubAckFuture
		if err == nil {
			f, err = a.l.JetStream().PublishAsync(subject, data, jetstream.WithExpectStream(a.name))
		}
		if err != nil {
			reportLost(chunk, eventlog.NATSErr(fmt.Sprintf("attempt log %s", subject), err))
			continue
		}
		sent = append(sent, sentAttempts{subject: subject, f: f, ats: chunk})
	}
	return sent
}

// await waits for the server to acknowledge sent attempts, at most
// recordAckWait in all, and reports those it did not acknowledge lost.
func (a *AttemptLog) await(sent []sentAttempts) {
	if len(sent) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), recordAckWait)
	defer cancel()
	for _, s := range sent {
		var err error
		select {
		case <-s.f.Ok():
			continue
		case err = <-s.f.Err():
		case <-ctx.Done():
			select { // past the deadline, an answer already in still counts
			case <-s.f.Ok():
				continue
			case err = <-s.f.Err():
			default:
			}
		}
		if err != nil {
			reportLost(s.ats, eventlog.NATSErr(fmt.Sprintf("attempt log %s", s.subject), err))
		} else {
			reportLost(s.ats, fmt.Errorf("attempt log %s: not acknowledged within %s", s.subject, recordAckWait))
		}
	}
}

func reportLost(ats []pendingAttempt, err error) {
	for _, p := range ats {
		p.lost(err)
	}
}

// Settle waits until the server has acknowledged every attempt sent so far,
// RecordAsync's waiting ones included, or ctx ends.
func (a *AttemptLog) Settle(ctx context.Context) {
	q := &a.async
	q.mu.Lock()
	var done chan struct{}
	if q.running {
		done = make(chan struct{})
		q.settled = append(q.settled, done)
	}
	q.mu.Unlock()
	if done != nil {
		select {
		case <-done:
		case <-ctx.Done():
			return
		}
	}
	select {
	case <-a.l.JetStream().PublishAsyncComplete():
	case <-ctx.Done():
	}
}

// Last returns the endpoint's kept attempts, newest first.
func (a *AttemptLog) Last(ctx context.Context, partner, endpoint string) ([]domain.DeliveryAttempt, error) {
	subject, err := a.subject(partner, endpoint)
	if err != nil {
		return nil, err
	}
	msgs, err := a.l.DirectRead(ctx, a.name, subject, AttemptsListed)
	if errors.Is(err, eventlog.ErrNotFound) {
		return []domain.DeliveryAttempt{}, nil
	}
	if err != nil {
		return nil, eventlog.NATSErr(fmt.Sprintf("attempt log %s", subject), err)
	}
	out := make([]domain.DeliveryAttempt, 0, len(msgs))
	for _, m := range msgs {
		ats, err := decodeAttempts(m.Data)
		if err != nil {
			return nil, eventlog.NATSErr(fmt.Sprintf("attempt log %s", subject), err)
		}
		out = append(out, ats...)
	}
	// Messages holding several attempts keep more than AttemptsListed.
	out = out[max(len(out)-AttemptsListed, 0):]
	slices.Reverse(out)
	return out, nil
}

// Newest returns the endpoint's newest attempt, or nil when it has none.
func (a *AttemptLog) Newest(ctx context.Context, partner, endpoint string) (*domain.DeliveryAttempt, error) {
	subject, err := a.subject(partner, endpoint)
	if err != nil {
		return nil, err
	}
	m, err := a.stream.GetLastMsgForSubject(ctx, subject)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, eventlog.NATSErr(fmt.Sprintf("attempt log %s", subject), err)
	}
	ats, err := decodeAttempts(m.Data)
	if err == nil && len(ats) == 0 {
		err = errors.New("the newest message holds no attempt")
	}
	if err != nil {
		return nil, eventlog.NATSErr(fmt.Sprintf("attempt log %s", subject), err)
	}
	return &ats[len(ats)-1], nil
}

// Forget drops an endpoint's attempts, once the endpoint is deleted.
func (a *AttemptLog) Forget(ctx context.Context, partner, endpoint string) error {
	subject, err := a.subject(partner, endpoint)
	if err != nil {
		return err
	}
	st, err := a.l.JetStream().Stream(ctx, a.name)
	if err != nil {
		return eventlog.NATSErr("attempt log", err)
	}
	if err := st.Purge(ctx, jetstream.WithPurgeSubject(subject)); err != nil {
		return eventlog.NATSErr(fmt.Sprintf("attempt log purge %s", subject), err)
	}
	return nil
}
