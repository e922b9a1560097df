package eventlog

import (
	"context"
	"errors"
	"time"

	"github.com/nats-io/nats.go"
)

// The control plane: an operator's request on a topic reaches every instance
// sharing the ledger at once (core NATS, nothing stored), and each instance
// streams its own replies back to the requester. "replay" uses it to rebuild
// every instance's projection file. A question (Answer, Ask) goes to one
// instance instead, whichever the server picks, and has one answer: what
// any instance's projections can tell ("donor_sessions").

func (l *Ledger) controlSubject(topic string) string {
	return "giving.control." + string(l.cfg.Env) + "." + topic
}

// Listen answers requests on topic until stop is called. handle runs once
// per request, on the connection's goroutine, and gets the function that
// sends a reply to the requester; it should hand long work off.
func (l *Ledger) Listen(topic string, handle func(reply func([]byte))) (stop func(), err error) {
	return l.serve(topic, "", func(_ []byte, reply func([]byte)) { handle(reply) })
}

// serve runs handle for each request on topic that asks for a reply, in
// the queue group queue (none: every subscriber gets each request), until
// stop is called.
func (l *Ledger) serve(topic, queue string, handle func(data []byte, reply func([]byte))) (stop func(), err error) {
	sub, err := l.nc.QueueSubscribe(l.controlSubject(topic), queue, func(msg *nats.Msg) {
		if msg.Reply == "" {
			return
		}
		handle(msg.Data, func(data []byte) { _ = l.nc.Publish(msg.Reply, data) })
	})
	if err != nil {
		return nil, NATSErr("control "+topic, err)
	}
	return func() { _ = sub.Unsubscribe() }, nil
}

// ErrNoReply means no reply came within the wait.
var ErrNoReply = errors.New("no reply")

// Replies are the answers of every instance to one request. Replies that
// arrived stay readable after the connection closes.
type Replies struct {
	sub  *nats.Subscription
	msgs chan *nats.Msg
}

// Request sends a request on topic to every listening instance.
func (l *Ledger) Request(topic string) (*Replies, error) {
	inbox := l.nc.NewRespInbox()
	msgs := make(chan *nats.Msg, 1024)
	sub, err := l.nc.ChanSubscribe(inbox, msgs)
	if err != nil {
		return nil, NATSErr("control request "+topic, err)
	}
	if err := l.nc.PublishRequest(l.controlSubject(topic), inbox, nil); err != nil {
		_ = sub.Unsubscribe()
		return nil, NATSErr("control request "+topic, err)
	}
	return &Replies{sub: sub, msgs: msgs}, nil
}

// Next waits up to wait for the next reply; ErrNoReply when none came.
func (r *Replies) Next(wait time.Duration) ([]byte, error) {
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case msg := <-r.msgs:
		return msg.Data, nil
	case <-t.C:
		return nil, ErrNoReply
	}
}

// Close stops listening for replies.
func (r *Replies) Close() { _ = r.sub.Unsubscribe() }

// answerers is the queue group of the instances answering questions: the
// server hands each question to one of them.
const answerers = "answerers"

// Answer answers questions on topic, this instance among the others that
// do, until stop is called. handle runs once per question, on the
// connection's goroutine, with the question's data and the function that
// sends the answer; it should hand long work off.
func (l *Ledger) Answer(topic string, handle func(data []byte, answer func([]byte))) (stop func(), err error) {
	return l.serve(topic, answerers, handle)
}

// ErrNoAnswerer means no instance answers questions on the topic: none is
// running, or none of this build.
var ErrNoAnswerer = errors.New("no instance answers")

// Ask puts a question on topic to one answering instance and waits, within
// ctx, for its answer; ErrNoAnswerer at once when none answers the topic.
func (l *Ledger) Ask(ctx context.Context, topic string, data []byte) ([]byte, error) {
	msg, err := l.nc.RequestWithContext(ctx, l.controlSubject(topic), data)
	if errors.Is(err, nats.ErrNoResponders) {
		return nil, ErrNoAnswerer
	}
	if err != nil {
		return nil, NATSErr("control ask "+topic, err)
	}
	return msg.Data, nil
}
