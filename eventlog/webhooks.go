package eventlog

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/partnergiving/giving/domain"
)

// WebhookSecretPurpose names the sealer of webhook endpoint secrets: the API
// seals a new secret before it reaches the ledger, the dispatcher opens it to
// sign deliveries. The endpoint id is the associated data, so a sealed secret
// cannot be moved to another endpoint.
const WebhookSecretPurpose = "webhook-secret"

// AttemptsListed is how many delivery attempts are kept, and listed, per
// webhook endpoint.
const AttemptsListed = 50

// AttemptLog keeps webhook delivery attempts in their own JetStream stream,
// one subject per endpoint holding at most AttemptsListed messages, so the
// server itself drops the oldest. Attempts are high-volume operational
// records, not facts of the ledger: on a single node the stream persists
// asynchronously (acknowledged before the disk sync, as the architecture
// allows for such records), on a cluster it relies on replication.
type AttemptLog struct {
	l      *Ledger
	name   string
	prefix string
	stream jetstream.Stream
}

// OpenAttemptLog opens (creating as needed) the attempt log of the ledger's
// environment.
func (l *Ledger) OpenAttemptLog(ctx context.Context) (*AttemptLog, error) {
	env := string(l.cfg.Env)
	a := &AttemptLog{l: l, name: "WEBHOOK_ATTEMPTS_" + strings.ToUpper(env), prefix: "webhook_attempts." + env + "."}
	cfg := jetstream.StreamConfig{
		Name:              a.name,
		Description:       "Webhook delivery attempts (" + env + "): the last " + fmt.Sprint(AttemptsListed) + " per endpoint.",
		Subjects:          []string{a.prefix + ">"},
		Storage:           jetstream.FileStorage,
		Retention:         jetstream.LimitsPolicy,
		Discard:           jetstream.DiscardOld,
		MaxMsgsPerSubject: AttemptsListed,
		Replicas:          l.cfg.Replicas,
		AllowDirect:       true,
	}
	if cfg.Replicas == 1 {
		cfg.PersistMode = jetstream.AsyncPersistMode
	}
	st, err := setUp(ctx, "open attempt log "+a.name, func(ctx context.Context) (jetstream.Stream, error) {
		return l.js.CreateOrUpdateStream(ctx, cfg)
	})
	if err != nil {
		return nil, err
	}
	a.stream = st
	return a, nil
}

func (a *AttemptLog) subject(partner, endpoint string) (string, error) {
	if !safeToken(partner) || !safeToken(endpoint) {
		return "", fmt.Errorf("attempt log: unsafe partner %q or endpoint %q", partner, endpoint)
	}
	return a.prefix + partner + "." + endpoint, nil
}

// encode returns the subject and the bytes an attempt is logged as.
func (a *AttemptLog) encode(partner string, at domain.DeliveryAttempt) (string, []byte, error) {
	subject, err := a.subject(partner, at.EndpointID)
	if err != nil {
		return "", nil, err
	}
	data, err := json.Marshal(at)
	if err != nil {
		return "", nil, natsErr("attempt log", err)
	}
	return subject, data, nil
}

// Record appends one attempt to its endpoint's log.
func (a *AttemptLog) Record(ctx context.Context, partner string, at domain.DeliveryAttempt) error {
	subject, data, err := a.encode(partner, at)
	if err != nil {
		return err
	}
	if _, err := a.l.js.Publish(ctx, subject, data, jetstream.WithExpectStream(a.name)); err != nil {
		return natsErr(fmt.Sprintf("attempt log %s", subject), err)
	}
	return nil
}

// recordAckWait bounds how long RecordAsync waits for the server's
// acknowledgement before it reports the attempt lost.
const recordAckWait = 30 * time.Second

// RecordAsync appends one attempt without waiting for the server: when it
// returns the attempt is on its way, in order with this process's other
// records. lost hears, on a goroutine of its own, of an attempt the server
// did not acknowledge. An error (too many records already on their way, or
// an unsafe subject) means it was not sent.
func (a *AttemptLog) RecordAsync(partner string, at domain.DeliveryAttempt, lost func(error)) error {
	subject, data, err := a.encode(partner, at)
	if err != nil {
		return err
	}
	f, err := a.l.js.PublishAsync(subject, data, jetstream.WithExpectStream(a.name))
	if err != nil {
		return natsErr(fmt.Sprintf("attempt log %s", subject), err)
	}
	go func() {
		t := time.NewTimer(recordAckWait)
		defer t.Stop()
		select {
		case <-f.Ok():
		case err := <-f.Err():
			lost(natsErr(fmt.Sprintf("attempt log %s", subject), err))
		case <-t.C:
			lost(fmt.Errorf("attempt log %s: not acknowledged within %s", subject, recordAckWait))
		}
	}()
	return nil
}

// Settle waits until the server has acknowledged every attempt RecordAsync
// sent, or ctx ends.
func (a *AttemptLog) Settle(ctx context.Context) {
	select {
	case <-a.l.js.PublishAsyncComplete():
	case <-ctx.Done():
	}
}

// Last returns the endpoint's kept attempts, newest first.
func (a *AttemptLog) Last(ctx context.Context, partner, endpoint string) ([]domain.DeliveryAttempt, error) {
	subject, err := a.subject(partner, endpoint)
	if err != nil {
		return nil, err
	}
	msgs, _, err := a.l.directMsgs(ctx, a.name, directGetRequest{Seq: 1, NextFor: subject, Batch: AttemptsListed})
	if errors.Is(err, ErrNotFound) {
		return []domain.DeliveryAttempt{}, nil
	}
	if err != nil {
		return nil, natsErr(fmt.Sprintf("attempt log %s", subject), err)
	}
	out := make([]domain.DeliveryAttempt, 0, len(msgs))
	for _, m := range msgs {
		var at domain.DeliveryAttempt
		if err := json.Unmarshal(m.Data, &at); err != nil {
			return nil, natsErr(fmt.Sprintf("attempt log %s", subject), err)
		}
		out = append(out, at)
	}
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
		return nil, natsErr(fmt.Sprintf("attempt log %s", subject), err)
	}
	var at domain.DeliveryAttempt
	if err := json.Unmarshal(m.Data, &at); err != nil {
		return nil, natsErr(fmt.Sprintf("attempt log %s", subject), err)
	}
	return &at, nil
}

// Forget drops an endpoint's attempts, once the endpoint is deleted.
func (a *AttemptLog) Forget(ctx context.Context, partner, endpoint string) error {
	subject, err := a.subject(partner, endpoint)
	if err != nil {
		return err
	}
	st, err := a.l.js.Stream(ctx, a.name)
	if err != nil {
		return natsErr("attempt log", err)
	}
	if err := st.Purge(ctx, jetstream.WithPurgeSubject(subject)); err != nil {
		return natsErr(fmt.Sprintf("attempt log purge %s", subject), err)
	}
	return nil
}
