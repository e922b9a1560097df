package eventlog

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/partnergiving/giving/domain"
	"github.com/partnergiving/giving/telemetry"
)

// Record is one stored event with its place in the ledger.
type Record struct {
	Seq       uint64
	Subject   string
	Stored    time.Time
	MsgID     string
	Partner   string
	Aggregate string
	Type      string
	Public    bool
	// Data is the event's envelope exactly as stored: the bytes the feed and
	// webhooks send.
	Data []byte
	// Request is the fingerprint of the partner request that appended the
	// event under an Idempotency-Key, if any (see Command.Request).
	Request string
	// Trace is the W3C traceparent of the span that appended the event
	// (empty when tracing was off). It is a message header, never part of
	// the envelope partners see.
	Trace string
	// Internal is the stored form of the internal fact the event carries
	// (domain.Event.Internal), if any. It is a message header, never part of
	// the envelope partners see.
	Internal []byte
}

// requestHeader carries Command.Request on a ledger message: a keyed hash of
// the request, never its content.
const requestHeader = "Giving-Request"

// internalHeader carries the internal fact an event carries
// (domain.Event.InternalData): beside the envelope the feed and webhooks
// send, never in it.
const internalHeader = "Giving-Internal"

// Event decodes the record's envelope.
func (r Record) Event() (domain.Event, error) {
	ev, err := domain.DecodeStoredAs(r.Partner, r.Aggregate, r.Type, r.Public, r.Data)
	if err == nil && r.Internal != nil {
		err = domain.DecodeInternal(&ev, r.Internal)
	}
	if err != nil {
		return domain.Event{}, fmt.Errorf("record %d: %w", r.Seq, err)
	}
	return ev, nil
}

// Appended is the outcome of an append.
type Appended struct {
	Record Record
	// Duplicate is true when the dedup id was already in the ledger; Record
	// is then the earlier event, not the one offered.
	Duplicate bool
}

// Append stores one event. msgID is the dedup id (Nats-Msg-Id): a second
// append with the same id inside the dedup window stores nothing and returns
// the first. expect is the sequence of the aggregate's last event as the
// caller saw it (0 for a new aggregate); if the aggregate moved on since,
// Append returns ErrConflict.
func (l *Ledger) Append(ctx context.Context, ev domain.Event, msgID string, expect uint64) (Appended, error) {
	return l.append(ctx, ev, msgID, appendGuard{expect: expect, on: true}, "")
}

// appendGuard is an append's condition on its aggregate: when on, the
// aggregate's last sequence must be expect.
type appendGuard struct {
	expect uint64
	on     bool
}

// append is Append under guard g, recording request, the fingerprint of
// the partner request the event answers.
func (l *Ledger) append(ctx context.Context, ev domain.Event, msgID string, g appendGuard, request string) (Appended, error) {
	msg, err := l.eventMessage(ev)
	if err != nil {
		return Appended{}, err
	}
	subject, data, internal := msg.Subject, msg.Data, msg.Header.Get(internalHeader)
	if size := len(data) + len(internal); size > MaxEventSize {
		l.cfg.Metrics.LedgerAppend(telemetry.AppendRejected, 0)
		return Appended{}, domain.ProblemPayloadTooLarge.New("The request would record %d bytes; at most %d fit in one event. Send less at once.", size, MaxEventSize)
	}
	if err := l.Writable(); err != nil {
		// The store refuses writes until it is opened again: fail now
		// rather than time out.
		l.cfg.Metrics.LedgerAppend(telemetry.AppendUnavailable, 0)
		return Appended{}, fmt.Errorf("append %s: %w", subject, err)
	}
	if msgID == "" {
		msgID = ev.ID
	}
	ctx, span := telemetry.Start(ctx, "ledger.append", trace.WithSpanKind(trace.SpanKindProducer),
		trace.WithAttributes(telemetry.Attr("giving.event_type", ev.Type), telemetry.Attr("giving.event_id", ev.ID)))
	if request != "" {
		msg.Header.Set(requestHeader, request)
	}
	tp := telemetry.TraceParent(ctx)
	if tp != "" {
		msg.Header.Set(telemetry.TraceparentHeader, tp)
	}
	msg.Header.Set(jetstream.MsgIDHeader, msgID)
	msg.Header.Set(jetstream.ExpectedStreamHeader, l.name)
	if g.on {
		msg.Header.Set(jetstream.ExpectedLastSubjSeqHeader, strconv.FormatUint(g.expect, 10))
		msg.Header.Set(jetstream.ExpectedLastSubjSeqSubjHeader, l.subjects.Aggregate(ev.PartnerID, ev.AggregateID))
	}
	start := time.Now()
	pctx, release := l.whileUp(ctx)
	ack, err := l.commit.publish(pctx, msg)
	if err != nil && errors.Is(context.Cause(pctx), errStoreStopped) {
		err = fmt.Errorf("%w: %w", domain.ErrUnavailable, errStoreStopped)
	}
	release()
	result := appendResult(ack, err)
	l.cfg.Metrics.LedgerAppend(result, time.Since(start))
	span.SetAttributes(telemetry.Attr("giving.result", result))
	switch result {
	case telemetry.AppendOK:
		span.SetAttributes(attribute.Int64("giving.seq", int64(ack.Sequence)))
		span.End()
	case telemetry.AppendUnavailable:
		telemetry.End(span, err)
	default: // a duplicate or a conflict is an expected race, not a failure
		span.End()
	}
	if err != nil {
		if isConflict(err) {
			return Appended{}, fmt.Errorf("append %s: %w", subject, ErrConflict)
		}
		return Appended{}, NATSErr(fmt.Sprintf("append %s", subject), err)
	}
	if ack.Duplicate {
		rec, err := l.Get(ctx, ack.Sequence)
		if err != nil {
			return Appended{}, NATSErr(fmt.Sprintf("append %s: load duplicate", subject), err)
		}
		return Appended{Record: rec, Duplicate: true}, nil
	}
	p, _ := l.subjects.parse(subject)
	rec := Record{
		Seq: ack.Sequence, Subject: subject, Stored: ev.OccurredAt, MsgID: msgID,
		Partner: p.Partner, Aggregate: p.Aggregate, Type: p.Type, Public: p.Public, Data: data, Request: request, Trace: tp,
	}
	if internal != "" {
		rec.Internal = []byte(internal)
	}
	return Appended{Record: rec}, nil
}

// eventMessage is the message an event is stored as: under its subject, its
// envelope as the data (the bytes partners get), the internal fact it
// carries, if any, in a header beside it.
func (l *Ledger) eventMessage(ev domain.Event) (*nats.Msg, error) {
	subject, err := l.subjects.Event(ev)
	if err != nil {
		return nil, err
	}
	data, err := ev.Envelope()
	if err != nil {
		return nil, err
	}
	internal, err := ev.InternalData()
	if err != nil {
		return nil, err
	}
	msg := nats.NewMsg(subject)
	msg.Data = data
	if internal != nil {
		msg.Header.Set(internalHeader, string(internal))
	}
	return msg, nil
}

// appendResult names an append's result for the metrics.
func appendResult(ack *jetstream.PubAck, err error) string {
	switch {
	case err == nil && ack.Duplicate:
		return telemetry.AppendDuplicate
	case err == nil:
		return telemetry.AppendOK
	case isConflict(err):
		return telemetry.AppendConflict
	}
	return telemetry.AppendUnavailable
}

// isConflict recognises both codes JetStream uses for a failed
// expected-last-sequence check: 10071 on a single server, 10164 on replicated
// streams and atomic batches.
func isConflict(err error) bool {
	var apiErr *jetstream.APIError
	if !errors.As(err, &apiErr) {
		return false
	}
	return apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence ||
		apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequenceConstant
}

// directGetRequest is JetStream's direct get API, batched.
type directGetRequest struct {
	Seq     uint64 `json:"seq,omitempty"`
	NextFor string `json:"next_by_subj,omitempty"`
	LastFor string `json:"last_by_subj,omitempty"`
	Batch   int    `json:"batch,omitempty"`
	UpToSeq uint64 `json:"up_to_seq,omitempty"`
	// StartTime starts a batch at the first message stored at or after it
	// (instead of Seq).
	StartTime *time.Time `json:"start_time,omitempty"`
}

// ErrNotFound means no stored event matched.
var ErrNotFound = errors.New("ledger: no such event")

// Read returns up to max events matching filter with sequences above after,
// oldest first, and how many more matching events exist beyond them. The
// server filters by subject from its index, so the cost follows the page, not
// the stream.
func (l *Ledger) Read(ctx context.Context, filter string, after uint64, max int) ([]Record, uint64, error) {
	return l.readPage(ctx, directGetRequest{Seq: after + 1, NextFor: filter}, max)
}

// Scan is Read for a filter that spans partners or aggregates (an event
// type of every partner's: Subjects.OfType). The server walks its whole
// subject index to answer it, tens of milliseconds once the ledger holds
// many aggregates, so it goes over a connection of its own (Ledger.scans)
// and holds up no request's writes.
func (l *Ledger) Scan(ctx context.Context, filter string, after uint64, max int) ([]Record, uint64, error) {
	return l.readPageOn(ctx, l.scans, directGetRequest{Seq: after + 1, NextFor: filter}, max)
}

// ScanSince is Scan from the first event stored at or after since: the
// server finds its place from its index, so the cost follows the page, not
// the history before it.
func (l *Ledger) ScanSince(ctx context.Context, filter string, since time.Time, max int) ([]Record, uint64, error) {
	since = since.UTC()
	return l.readPageOn(ctx, l.scans, directGetRequest{StartTime: &since, NextFor: filter}, max)
}

// readPage runs a batched direct get of up to n events (at least one)
// where req starts it: the events, and how many more match beyond them.
func (l *Ledger) readPage(ctx context.Context, req directGetRequest, n int) ([]Record, uint64, error) {
	return l.readPageOn(ctx, l.nc, req, n)
}

// readPageOn is readPage over the connection nc.
func (l *Ledger) readPageOn(ctx context.Context, nc *nats.Conn, req directGetRequest, n int) ([]Record, uint64, error) {
	req.Batch = max(n, 1)
	recs, pending, err := l.directOn(ctx, nc, req)
	if errors.Is(err, ErrNotFound) {
		return nil, 0, nil
	}
	return recs, pending, err
}

// Get returns the event stored at seq.
func (l *Ledger) Get(ctx context.Context, seq uint64) (Record, error) {
	recs, _, err := l.direct(ctx, directGetRequest{Seq: seq})
	if err != nil {
		return Record{}, NATSErr(fmt.Sprintf("get %d", seq), err)
	}
	return recs[0], nil
}

// LastOf returns the sequence of the newest event matching filter, or 0.
func (l *Ledger) LastOf(ctx context.Context, filter string) (uint64, error) {
	recs, _, err := l.direct(ctx, directGetRequest{LastFor: filter})
	if errors.Is(err, ErrNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	return recs[0].Seq, nil
}

// leaderLastOf is LastOf answered by the stream's leader. A direct get may
// be answered by any replica, and a replica can lag behind the leader (for a
// moment after a node restarts or the leadership moves); the leader knows
// every acknowledged write.
func (l *Ledger) leaderLastOf(ctx context.Context, filter string) (uint64, error) {
	msg, found, err := l.leaderLast(ctx, l.name, filter)
	if err != nil || !found {
		return 0, err
	}
	return msg.Seq, nil
}

// LeaderKV reads key of bucket as the bucket's leader knows it: every
// acknowledged write, where a plain Get may be answered by a replica that
// has not applied the newest one yet. For the reads whose answer must not
// be older than a write another instance was told had landed.
func (l *Ledger) LeaderKV(ctx context.Context, bucket jetstream.KeyValue, key string) (value []byte, revision uint64, found bool, err error) {
	name := bucket.Bucket()
	msg, found, err := l.leaderLast(ctx, "KV_"+name, "$KV."+name+"."+key)
	if err != nil || !found || bytes.Contains(msg.Header, []byte(kvOperationHeader)) {
		return nil, 0, false, err
	}
	return msg.Data, msg.Seq, true, nil
}

// kvOperationHeader marks a KV entry that deletes or purges its key.
const kvOperationHeader = "KV-Operation"

type leaderMsg struct {
	Seq    uint64 `json:"seq"`
	Header []byte `json:"hdrs"`
	Data   []byte `json:"data"`
}

// leaderLast asks stream's leader for the newest message on subject.
func (l *Ledger) leaderLast(ctx context.Context, stream, subject string) (leaderMsg, bool, error) {
	body, err := json.Marshal(directGetRequest{LastFor: subject})
	if err != nil {
		return leaderMsg{}, false, err
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
	}
	msg, err := l.nc.RequestWithContext(ctx, "$JS.API.STREAM.MSG.GET."+stream, body)
	if err != nil {
		return leaderMsg{}, false, NATSErr("last of "+subject, err)
	}
	var resp struct {
		Error   *jetstream.APIError `json:"error"`
		Message leaderMsg           `json:"message"`
	}
	if err := json.Unmarshal(msg.Data, &resp); err != nil {
		return leaderMsg{}, false, fmt.Errorf("last of %s: %w", subject, err)
	}
	switch {
	case resp.Error == nil:
		return resp.Message, true, nil
	case resp.Error.ErrorCode == jetstream.JSErrCodeMessageNotFound:
		return leaderMsg{}, false, nil
	}
	// No leader (an election under way) or another refusal: the caller
	// cannot know the state now, so it retries later.
	return leaderMsg{}, false, fmt.Errorf("last of %s: %w: %w", subject, domain.ErrUnavailable, resp.Error)
}

func (l *Ledger) direct(ctx context.Context, req directGetRequest) ([]Record, uint64, error) {
	return l.directOn(ctx, l.nc, req)
}

// directOn is direct over the connection nc.
func (l *Ledger) directOn(ctx context.Context, nc *nats.Conn, req directGetRequest) ([]Record, uint64, error) {
	msgs, pending, err := directMsgs(ctx, nc, l.name, req)
	if err != nil {
		return nil, 0, err
	}
	out := make([]Record, 0, len(msgs))
	for _, msg := range msgs {
		rec, err := l.recordOf(msg)
		if err != nil {
			return nil, 0, err
		}
		out = append(out, rec)
	}
	return out, pending, nil
}

// directMsgs runs a direct get, single or batched, on one of the
// environment's streams and returns the stored messages and, for a batch, how
// many more match. A get nobody answers (503: on a cluster, no replica
// serves the stream's direct gets yet, as right after the stream is
// created or a node restarts) is asked again, a few times over under a
// second, before it fails.
func directMsgs(ctx context.Context, nc *nats.Conn, stream string, req directGetRequest) ([]*nats.Msg, uint64, error) {
	for attempt := 1; ; attempt++ {
		msgs, pending, err := directOnce(ctx, nc, stream, req)
		if !errors.Is(err, nats.ErrNoResponders) {
			return msgs, pending, err
		}
		if attempt == directAttempts {
			return nil, 0, NATSErr("direct get: status 503", err)
		}
		if err := Backoff(ctx, attempt); err != nil {
			return nil, 0, NATSErr("direct get", err)
		}
	}
}

// directAttempts bounds directMsgs' tries while nobody answers: with
// backoff's doubling, jittered waits, 0.4 to 0.8 s.
const directAttempts = 10

func directOnce(ctx context.Context, nc *nats.Conn, stream string, req directGetRequest) ([]*nats.Msg, uint64, error) {
	body, err := json.Marshal(req)
	if err != nil {
		return nil, 0, err
	}
	inbox := nc.NewRespInbox()
	// The answer is at most the batch and its end marker. A channel of that
	// size, rather than SubscribeSync's 64k-slot one, keeps a small read
	// from allocating half a megabyte.
	msgs := make(chan *nats.Msg, max(req.Batch, 1)+1)
	sub, err := nc.ChanSubscribe(inbox, msgs)
	if err != nil {
		return nil, 0, NATSErr("direct get", err)
	}
	defer sub.Unsubscribe()
	if err := nc.PublishRequest("$JS.API.DIRECT.GET."+stream, inbox, body); err != nil {
		return nil, 0, NATSErr("direct get", err)
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
	}
	var out []*nats.Msg
	for {
		var msg *nats.Msg
		select {
		case msg = <-msgs:
		case <-ctx.Done():
			return nil, 0, NATSErr("direct get", ctx.Err())
		}
		switch msg.Header.Get("Status") {
		case "":
		case "204": // end of batch
			pending, _ := strconv.ParseUint(msg.Header.Get("Nats-Num-Pending"), 10, 64)
			return out, pending, nil
		case "404":
			if len(out) > 0 {
				return out, 0, nil
			}
			return nil, 0, ErrNotFound
		case "503": // no responders
			return nil, 0, nats.ErrNoResponders
		default:
			return nil, 0, fmt.Errorf("direct get: status %s %s", msg.Header.Get("Status"), msg.Header.Get("Description"))
		}
		out = append(out, msg)
		if req.Batch == 0 {
			return out, 0, nil
		}
	}
}

func (l *Ledger) recordOf(msg *nats.Msg) (Record, error) {
	subject := msg.Header.Get("Nats-Subject")
	seq, err := strconv.ParseUint(msg.Header.Get("Nats-Sequence"), 10, 64)
	if err != nil {
		return Record{}, fmt.Errorf("direct get: bad sequence header: %w", err)
	}
	stored, _ := time.Parse(time.RFC3339Nano, msg.Header.Get("Nats-Time-Stamp"))
	return l.record(seq, subject, stored, msg.Header, msg.Data)
}

func (l *Ledger) record(seq uint64, subject string, stored time.Time, h nats.Header, data []byte) (Record, error) {
	p, err := l.subjects.parse(subject)
	if err != nil {
		return Record{}, err
	}
	rec := Record{
		Seq: seq, Subject: subject, Stored: stored, MsgID: h.Get(jetstream.MsgIDHeader), Request: h.Get(requestHeader), Trace: h.Get(telemetry.TraceparentHeader),
		Partner: p.Partner, Aggregate: p.Aggregate, Type: p.Type, Public: p.Public, Data: data,
	}
	if internal := h.Get(internalHeader); internal != "" {
		rec.Internal = []byte(internal)
	}
	return rec, nil
}
