package delivery

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/partnergiving/giving/eventlog"
)

// Counts keeps how many webhook delivery attempts of each partner ended
// each way in each hour, for the dashboard's chart of the last 24 hours:
// the attempt log keeps only the newest attempts of each endpoint, so it
// cannot say how many there were in a day. It is a JetStream counter
// stream, one subject per partner, hour and outcome: each attempt publishes
// an increment and the server keeps the sum, so no instance reads before
// it writes and every instance adds to the same figures. Like the attempt
// log it is an operational record: on a single node it persists
// asynchronously, and a crash may lose the last increments.
type Counts struct {
	l      *eventlog.Ledger
	name   string
	prefix string
}

// countsKept is how long an hour's figures stay: the chart shows 24 hours.
const countsKept = 48 * time.Hour

// OpenCounts opens (creating as needed) the delivery counts of the
// ledger's environment.
func OpenCounts(ctx context.Context, l *eventlog.Ledger) (*Counts, error) {
	env := string(l.Env())
	c := &Counts{l: l, name: "WEBHOOK_COUNTS_" + strings.ToUpper(env), prefix: "webhook_counts." + env + "."}
	cfg := jetstream.StreamConfig{
		Name:        c.name,
		Description: "Webhook delivery attempts (" + env + ") counted by partner, hour and outcome.",
		Subjects:    []string{c.prefix + ">"},
		Storage:     jetstream.FileStorage,
		Retention:   jetstream.LimitsPolicy,
		Discard:     jetstream.DiscardOld,
		// The server adds each increment to the subject's last value:
		// that one message is all a subject needs.
		AllowMsgCounter:   true,
		MaxMsgsPerSubject: 1,
		MaxAge:            countsKept,
		Replicas:          l.Replicas(),
		AllowDirect:       true,
	}
	if cfg.Replicas == 1 {
		cfg.PersistMode = jetstream.AsyncPersistMode
	}
	if _, err := eventlog.SetUp(ctx, "open delivery counts "+c.name, func(ctx context.Context) (jetstream.Stream, error) {
		return l.JetStream().CreateOrUpdateStream(ctx, cfg)
	}); err != nil {
		return nil, err
	}
	return c, nil
}

// hourOf is the hour that at falls in, as a subject token.
func hourOf(at time.Time) string { return strconv.FormatInt(at.Unix()/3600, 10) }

// Add counts one attempt of the partner's that ended with outcome at at. It
// waits for nothing: a count that could not be sent is lost, as an
// operational record may be. A nil Counts counts nothing.
func (c *Counts) Add(partner string, at time.Time, outcome string) {
	if c == nil || !eventlog.SafeToken(partner) || !eventlog.SafeToken(outcome) {
		return
	}
	msg := nats.NewMsg(c.prefix + partner + "." + hourOf(at) + "." + outcome)
	msg.Header.Set("Nats-Incr", "1")
	_, _ = c.l.JetStream().PublishMsgAsync(msg)
}

// HourCount is how many of a partner's attempts ended one way in one hour.
type HourCount struct {
	// Hour is when the hour began.
	Hour    time.Time
	Outcome string
	N       int64
}

// Since lists the partner's counts of the hours since since's, oldest hour
// first.
func (c *Counts) Since(ctx context.Context, partner string, since time.Time) ([]HourCount, error) {
	if !eventlog.SafeToken(partner) {
		return nil, fmt.Errorf("delivery counts: unsafe partner %q", partner)
	}
	// Each hour has at most one subject per outcome, and the stream keeps
	// 48 hours: a partner has at most a few hundred subjects.
	msgs, err := c.l.DirectRead(ctx, c.name, c.prefix+partner+".>", 1000)
	if errors.Is(err, eventlog.ErrNotFound) {
		return nil, nil // no attempt counted in the last two days
	}
	if err != nil {
		return nil, eventlog.NATSErr("delivery counts", err)
	}
	first := since.Unix() / 3600
	var out []HourCount
	for _, m := range msgs {
		// A direct get's answer names the stored message's subject in a
		// header (its own subject is the request's inbox).
		subject := m.Header.Get(jetstream.SubjectHeader)
		tokens := strings.Split(strings.TrimPrefix(subject, c.prefix+partner+"."), ".")
		if len(tokens) != 2 {
			continue
		}
		hour, err := strconv.ParseInt(tokens[0], 10, 64)
		if err != nil || hour < first {
			continue
		}
		var v struct {
			Val string `json:"val"`
		}
		if err := json.Unmarshal(m.Data, &v); err != nil {
			return nil, fmt.Errorf("delivery counts %s: %w", subject, err)
		}
		n, err := strconv.ParseInt(v.Val, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("delivery counts %s: %w", subject, err)
		}
		out = append(out, HourCount{Hour: time.Unix(hour*3600, 0).UTC(), Outcome: tokens[1], N: n})
	}
	slices.SortStableFunc(out, func(a, b HourCount) int { return a.Hour.Compare(b.Hour) })
	return out, nil
}
