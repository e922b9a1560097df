package eventlog

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/partnergiving/giving/domain"
)

// Every claimed request asks for the ledger's last sequence before it runs
// (the recall catches the projections up to it), so under load the stream
// info requests are a steady share of the server's and the client's work.
// lastSeqs shares them: a caller joins the next request to be sent, never
// one already on its way, so every answer it gets was read after it asked,
// as its own request's would be; while one request is out, the callers
// arriving meanwhile gather for the next.
type lastSeqs struct {
	// rounds sends the waiting request, then the one gathered meanwhile,
	// until none waits; its lock guards next.
	rounds batcher[*lastSeqCall]
	// next is the request the callers arriving now wait for.
	next *lastSeqCall
}

// take hands over the request the callers so far wait for.
func (q *lastSeqs) take() (*lastSeqCall, bool) {
	c := q.next
	q.next = nil
	return c, c != nil
}

type lastSeqCall struct {
	done chan struct{}
	seq  uint64
	err  error
}

// lastSeqTimeout bounds one shared request; a caller's own context may end
// its wait sooner.
const lastSeqTimeout = 10 * time.Second

// LastSeq is the stream's last sequence: the position of the newest event,
// read after the call began.
func (l *Ledger) LastSeq(ctx context.Context) (uint64, error) {
	if err := ctx.Err(); err != nil {
		return 0, NATSErr("ledger last sequence", err)
	}
	q := &l.lastSeqs
	var c *lastSeqCall
	q.rounds.queue(func() {
		if q.next == nil {
			q.next = &lastSeqCall{done: make(chan struct{})}
		}
		c = q.next
	})
	select {
	case <-c.done:
		return c.seq, c.err
	case <-ctx.Done():
		return 0, NATSErr("ledger last sequence", ctx.Err())
	}
}

// sendLastSeq sends one shared request and hands its answer to the
// callers waiting for it.
func (l *Ledger) sendLastSeq(c *lastSeqCall) {
	c.seq, c.err = l.streamLastSeq()
	close(c.done)
}

// streamLastSeq asks the server for the stream's info and reads only its
// last sequence (the client library's Info decodes the whole configuration
// too).
func (l *Ledger) streamLastSeq() (uint64, error) {
	ctx, cancel := context.WithTimeout(context.Background(), lastSeqTimeout)
	defer cancel()
	msg, err := l.nc.RequestWithContext(ctx, "$JS.API.STREAM.INFO."+l.name, nil)
	if err != nil {
		return 0, NATSErr("ledger last sequence", err)
	}
	var resp struct {
		Error *jetstream.APIError `json:"error"`
		State struct {
			LastSeq uint64 `json:"last_seq"`
		} `json:"state"`
	}
	if err := json.Unmarshal(msg.Data, &resp); err != nil {
		return 0, fmt.Errorf("ledger last sequence: %w", err)
	}
	if resp.Error != nil && resp.Error.Code == 503 {
		// No leader for the moment (an election under way).
		return 0, fmt.Errorf("ledger last sequence: %w: %w", domain.ErrUnavailable, resp.Error)
	}
	if resp.Error != nil {
		return 0, fmt.Errorf("ledger last sequence: %w", resp.Error)
	}
	return resp.State.LastSeq, nil
}
