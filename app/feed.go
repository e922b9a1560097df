package app

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/partnergiving/giving/domain"
)

// The event feed reads a partner's public events, oldest first, from the
// projections' feed table (projections.Store.Feed), so a page costs what it
// returns however long the ledger is. A position is the ledger sequence of
// the last event a page held, so it stays valid across restarts, projection
// rebuilds and instances, and each item is the event's stored envelope, byte
// for byte what a webhook carries. The feed shows an event once this
// instance's projector has applied it: a read first waits (briefly; the
// projector trails appends by milliseconds) until the projections hold
// everything the ledger held when the read began, so a page is as complete
// as a read of the ledger itself, whichever instance made the writes.

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
	if _, err := s.checkFeedPosition(ctx, q.After); err != nil {
		return FeedPage{}, err
	}
	for {
		// Take the channel before reading, so an event applied between the
		// read and the wait still wakes this request.
		changed := s.store.Changed()
		start := time.Now()
		items, more, err := s.store.Feed(partner, q.Types, q.After, q.Limit)
		s.cfg.Metrics.FeedPage(time.Since(start))
		if err != nil {
			return FeedPage{}, fmt.Errorf("feed of %s after %d: %w", partner, q.After, err)
		}
		if len(items) > 0 {
			page := FeedPage{Events: make([][]byte, len(items)), Next: items[len(items)-1].Seq, More: more}
			for i, it := range items {
				page.Events[i] = it.Data
			}
			return page, nil
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

// checkFeedPosition refuses a position past the end of the ledger, and
// waits until the projections hold everything the ledger holds now, which
// it returns.
func (s *Service) checkFeedPosition(ctx context.Context, after uint64) (uint64, error) {
	last, err := s.ledger.LastSeq(ctx)
	if err != nil {
		return 0, err
	}
	if after > last {
		return 0, ErrFeedPosition
	}
	return last, s.waitApplied(ctx, last)
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

// Event returns one of the partner's public events: its stored envelope,
// byte for byte the feed item and the webhook body for the same event. An
// id of another partner's event, or of an internal one, is not found.
func (s *Service) Event(ctx context.Context, partner, id string) ([]byte, error) {
	_, data, err := s.publicEvent(ctx, partner, id)
	return data, err
}

// publicEvent finds one of the partner's public events: its ledger sequence
// and its stored envelope.
func (s *Service) publicEvent(ctx context.Context, partner, id string) (uint64, []byte, error) {
	if !domain.ValidID(domain.PrefixEvent, id) {
		return 0, nil, domain.NotFound("event", id)
	}
	// Like a feed page, as complete as the ledger when the read began.
	if _, err := s.checkFeedPosition(ctx, 0); err != nil {
		return 0, nil, err
	}
	seq, ok, err := s.store.PublicEventSeq(partner, id)
	if err != nil {
		return 0, nil, err
	}
	if !ok {
		return 0, nil, domain.NotFound("event", id)
	}
	// The partner's own feed table holds the envelope: another partner's
	// or an internal event cannot be found there.
	data, ok, err := s.store.FeedItem(partner, seq)
	if err != nil {
		return 0, nil, fmt.Errorf("event %s at %d: %w", id, seq, err)
	}
	if !ok {
		return 0, nil, fmt.Errorf("event %s of %s: indexed at %d but not in the feed", id, partner, seq)
	}
	return seq, data, nil
}
