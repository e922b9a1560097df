package app

import (
	"context"
	"fmt"
	"math"
	"sort"
	"sync"
	"time"

	"github.com/partnergiving/giving/domain"
	"github.com/partnergiving/giving/eventlog"
)

// The event feed reads a partner's public events straight from the ledger,
// oldest first. A position is the stream sequence of the last event a page
// held, so it stays valid across restarts, projection rebuilds and
// instances. Partner and type are filtered on ledger subjects, which the
// JetStream server indexes, and each item is the event's stored envelope,
// byte for byte what a webhook carries.

// FeedQuery asks for one page of the feed.
type FeedQuery struct {
	// Types are the requested event types, sorted; empty means every public
	// type.
	Types []string
	// After is the position to read after (0: from the first event).
	After uint64
	Limit int
	// Wait is how long to wait for an event when none is there yet.
	Wait time.Duration
}

// FeedPage is one page of the feed.
type FeedPage struct {
	// Events are the stored envelopes, oldest first.
	Events [][]byte
	// Next is the position after the page (After when it is empty).
	Next uint64
	More bool
}

// ErrFeedPosition means a position past the end of the ledger: only a
// ledger wiped and recreated under the same master key can produce one, and
// a poller holding it would otherwise wait forever.
var ErrFeedPosition = domain.ProblemInvalidCursor.New("since_cursor was not issued by this service to this partner, or was altered. Pass a next_cursor exactly as returned, or omit since_cursor to start from the first event.")

// ReadFeed reads a page. With a wait, an empty page is read again each time
// the local projections apply a batch (the projector follows the whole
// ledger, so it hears writes made by any instance), until a matching event
// exists or the wait is over.
func (s *Service) ReadFeed(ctx context.Context, partner string, q FeedQuery) (FeedPage, error) {
	var timeout <-chan time.Time
	if q.Wait > 0 {
		t := time.NewTimer(q.Wait)
		defer t.Stop()
		timeout = t.C
	}
	for first := true; ; first = false {
		// Take the channel before reading, so an event applied between the
		// read and the wait still wakes this request.
		changed := s.store.Changed()
		start := time.Now()
		recs, more, err := s.readFeed(ctx, partner, q)
		s.cfg.Metrics.FeedPage(time.Since(start))
		if err != nil {
			return FeedPage{}, err
		}
		if len(recs) > 0 {
			page := FeedPage{Events: make([][]byte, len(recs)), Next: recs[len(recs)-1].Seq, More: more}
			for i, r := range recs {
				page.Events[i] = r.Data
			}
			return page, nil
		}
		if first && q.After > 0 {
			if err := s.checkFeedPosition(ctx, q.After); err != nil {
				return FeedPage{}, err
			}
		}
		empty := FeedPage{Next: q.After}
		if timeout == nil {
			return empty, nil
		}
		select {
		case <-changed:
		case <-timeout:
			return empty, nil
		case <-s.polls.ended():
			return empty, nil
		case <-ctx.Done():
			return FeedPage{}, ctx.Err()
		}
	}
}

func (s *Service) checkFeedPosition(ctx context.Context, after uint64) error {
	last, err := s.ledger.LastSeq(ctx)
	if err != nil {
		return err
	}
	if after > last {
		return ErrFeedPosition
	}
	return nil
}

// readFeed returns up to q.Limit of the partner's public events after
// q.After, oldest first, and whether more exist. Several types are read one
// subject filter each, limit+1 events apiece, and merged by sequence, so the
// cost follows the page whatever the other types hold.
func (s *Service) readFeed(ctx context.Context, partner string, q FeedQuery) ([]eventlog.Record, bool, error) {
	subjects := s.ledger.Subjects()
	filters := []string{subjects.Public(partner, "")}
	if len(q.Types) > 0 {
		filters = filters[:0]
		for _, t := range q.Types {
			filters = append(filters, subjects.Public(partner, t))
		}
	}
	var recs []eventlog.Record
	more := false
	// bound is the highest sequence up to which every filter's answer is
	// complete. A filter whose answer stopped short (the page was full, or
	// the server capped the batch's size) knows nothing beyond its last
	// event, and merging past that point could skip one of its events.
	bound := uint64(math.MaxUint64)
	for _, f := range filters {
		page, pending, err := s.ledger.Read(ctx, f, q.After, q.Limit+1)
		if err != nil {
			return nil, false, fmt.Errorf("feed %s after %d: %w", f, q.After, err)
		}
		recs = append(recs, page...)
		if pending > 0 || len(page) > q.Limit {
			more = true
			last := q.After
			if len(page) > 0 {
				last = page[len(page)-1].Seq
			}
			bound = min(bound, last)
		}
	}
	if len(filters) > 1 {
		sort.Slice(recs, func(i, j int) bool { return recs[i].Seq < recs[j].Seq })
	}
	n := sort.Search(len(recs), func(i int) bool { return recs[i].Seq > bound })
	if n > q.Limit {
		n, more = q.Limit, true
	}
	recs = recs[:n]
	for _, rec := range recs {
		// The subject filter guarantees this; a breach must fail loudly
		// rather than show one partner another's or an internal event.
		if rec.Partner != partner || !rec.Public {
			return nil, false, fmt.Errorf("feed of %s: filter matched %s", partner, rec.Subject)
		}
	}
	return recs, more, nil
}

// longPolls lets a shutdown end waiting feed requests at once, instead of
// holding the shutdown for up to the longest wait.
type longPolls struct {
	mu   sync.Mutex
	done chan struct{}
	over bool
}

func (p *longPolls) ended() <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.channel()
}

func (p *longPolls) end() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.over {
		close(p.channel())
		p.over = true
	}
}

// channel makes the channel on first use; p.mu is held.
func (p *longPolls) channel() chan struct{} {
	if p.done == nil {
		p.done = make(chan struct{})
	}
	return p.done
}

// EndLongPolls answers every waiting feed read at once with what it has (an
// empty page), and makes later ones answer without waiting. Call it when the
// instance starts shutting down.
func (s *Service) EndLongPolls() { s.polls.end() }
