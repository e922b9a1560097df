package eventlog

import (
	"errors"
	"time"

	"github.com/nats-io/nats.go"
)

// The control plane: an operator's request on a topic reaches every instance
// sharing the ledger at once (core NATS, nothing stored), and each instance
// streams its own replies back to the requester. "replay" uses it to rebuild
// every instance's projection file.

func (l *Ledger) controlSubject(topic string) string {
	return "giving.control." + string(l.cfg.Env) + "." + topic
}

// Listen answers requests on topic until stop is called. handle runs once
// per request, on the connection's goroutine, and gets the function that
// sends a reply to the requester; it should hand long work off.
func (l *Ledger) Listen(topic string, handle func(reply func([]byte))) (stop func(), err error) {
	sub, err := l.nc.Subscribe(l.controlSubject(topic), func(msg *nats.Msg) {
		if msg.Reply == "" {
			return
		}
		handle(func(data []byte) { _ = l.nc.Publish(msg.Reply, data) })
	})
	if err != nil {
		return nil, natsErr("control listen "+topic, err)
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
		return nil, natsErr("control request "+topic, err)
	}
	if err := l.nc.PublishRequest(l.controlSubject(topic), inbox, nil); err != nil {
		_ = sub.Unsubscribe()
		return nil, natsErr("control request "+topic, err)
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
