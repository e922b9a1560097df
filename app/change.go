package app

import (
	"context"
	"fmt"

	"github.com/partnergiving/giving/domain"
	"github.com/partnergiving/giving/eventlog"
)

// changed is an aggregate as one command of a request left it: what the
// request answers with.
type changed[T any] struct {
	// Record is the event the command appended, or that an earlier run of
	// the same request appended; nil when the decision changed nothing.
	Record *eventlog.Record
	// State is the aggregate folded through Record, or as the decision saw
	// it when it changed nothing.
	State T
	// Seen is the ledger position State is at: the answer waits until the
	// local projections reach it, so reads that follow see it.
	Seen uint64
}

// change runs decide on one of the partner's aggregates, folded from the
// ledger, and returns the aggregate as the command left it. A request's
// answer is built from that, never from the projections' newest state:
// when a retry finds the event an earlier run of the request appended (its
// stored answer lost in a crash), the aggregate is folded through that
// event, so the retry answers what the first run answered, not what later
// requests made of the aggregate.
func change[T any, PT interface {
	*T
	Apply(domain.Event)
}](ctx context.Context, s *Service, partner, id string, decide func(PT) (*domain.Event, error)) (changed[T], error) {
	var out changed[T]
	res, err := s.run(ctx, eventlog.Command{
		Partner: partner, Aggregate: id,
		Decide: func(_ context.Context, h eventlog.History) (*domain.Event, error) {
			state := domain.Fold[T, PT](h.Events)
			out.Seen, out.State = h.Last, state
			ev, err := decide(&state)
			if err == nil && ev != nil {
				out.State = domain.Fold[T, PT](append(h.Events[:len(h.Events):len(h.Events)], *ev))
			}
			return ev, err
		},
	})
	if err != nil || res.Record == nil {
		return out, err
	}
	out.Record, out.Seen = res.Record, max(out.Seen, res.Record.Seq)
	if res.Replayed {
		out.State, err = foldThrough[T, PT](ctx, s, partner, id, *res.Record)
	}
	return out, err
}

// foldThrough is the aggregate as the ledger's event rec left it.
func foldThrough[T any, PT interface {
	*T
	Apply(domain.Event)
}](ctx context.Context, s *Service, partner, id string, rec eventlog.Record) (T, error) {
	var zero T
	ev, err := rec.Event()
	if err != nil {
		return zero, err
	}
	h, err := s.ledger.History(ctx, partner, id)
	if err != nil {
		return zero, err
	}
	state, ok := domain.FoldThrough[T, PT](h.Events, ev.ID)
	if !ok {
		return zero, fmt.Errorf("%s/%s: event %s is not in the aggregate's history", partner, id, ev.ID)
	}
	return state, nil
}
