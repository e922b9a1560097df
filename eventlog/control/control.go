// Package control is the control plane: an operator's request on a topic
// reaches every instance sharing the ledger at once (core NATS, nothing
// stored), and each instance streams its own replies back to the
// requester. "replay" uses it to rebuild every instance's projection file.
// A question (Answer, Ask) goes to one instance instead, whichever the
// server picks, and has one answer: what any instance's projections can
// tell ("donor_sessions"). It rides the ledger's connection: whoever can
// reach the ledger can reach it.
package control

import (
	"context"
	"errors"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/partnergiving/giving/eventlog"
)

// Plane is the control plane of one environment's ledger.
type Plane struct {
	nc     *nats.Conn
	prefix string
}

// New returns the control plane of l's environment, on l's connection.
func New(l *eventlog.Ledger) *Plane {
	return &Plane{nc: l.Conn(), prefix: "giving.control." + string(l.Env()) + "."}
}

func (p *Plane) subject(topic string) string { return p.prefix + topic }

// Listen answers requests on topic until stop is called. handle runs once
// per request, on the connection's goroutine, and gets the function that
// sends a reply to the requester; it should hand long work off.
func (p *Plane) Listen(topic string, handle func(reply func([]byte))) (stop func(), err error) {
	return p.serve(topic, "", func(_ []byte, reply func([]byte)) { handle(reply) })
}

// serve runs handle for each request on topic that asks for a reply, in
// the queue group queue (none: every subscriber gets each request), until
// stop is called.
func (p *Plane) serve(topic, queue string, handle func(data []byte, reply func([]byte))) (stop func(), err error) {
	sub, err := p.nc.QueueSubscribe(p.subject(topic), queue, func(msg *nats.Msg) {
		if msg.Reply == "" {
			return
		}
		handle(msg.Data, func(data []byte) { _ = p.nc.Publish(msg.Reply, data) })
	})
	if err != nil {
		return nil, eventlog.NATSErr("control "+topic, err)
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
func (p *Plane) Request(topic string) (*Replies, error) {
	inbox := p.nc.NewRespInbox()
	msgs := make(chan *nats.Msg, 1024)
	sub, err := p.nc.ChanSubscribe(inbox, msgs)
	if err != nil {
		return nil, eventlog.NATSErr("control request "+topic, err)
	}
	if err := p.nc.PublishRequest(p.subject(topic), inbox, nil); err != nil {
		_ = sub.Unsubscribe()
		return nil, eventlog.NATSErr("control request "+topic, err)
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
func (p *Plane) Answer(topic string, handle func(data []byte, answer func([]byte))) (stop func(), err error) {
	return p.serve(topic, answerers, handle)
}

// ErrNoAnswerer means no instance answers questions on the topic: none is
// running, or none of this build.
var ErrNoAnswerer = errors.New("no instance answers")

// Ask puts a question on topic to one answering instance and waits, within
// ctx, for its answer; ErrNoAnswerer at once when none answers the topic.
func (p *Plane) Ask(ctx context.Context, topic string, data []byte) ([]byte, error) {
	msg, err := p.nc.RequestWithContext(ctx, p.subject(topic), data)
	if errors.Is(err, nats.ErrNoResponders) {
		return nil, ErrNoAnswerer
	}
	if err != nil {
		return nil, eventlog.NATSErr("control ask "+topic, err)
	}
	return msg.Data, nil
}
