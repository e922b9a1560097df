package eventlog

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/partnergiving/giving/domain"
)

// History is what a command sees of its aggregate before deciding.
type History struct {
	// Events are the aggregate's events, oldest first. Empty when the
	// command asked for LastOnly.
	Events []domain.Event
	// Last is the sequence of the aggregate's newest event, 0 if none. The
	// append is conditional on it.
	Last uint64
}

// Command is one state change: which aggregate it touches and how it decides.
// Every entry point (the API, the vendor edge, the CLI) runs commands through
// Execute, so every write gets the same concurrency and dedup guarantees.
// Its append is sent before the context given to Execute ends, or never
// (one waiting to share a batch is dropped then): a command that must have
// stored its event by a time, as the holder of a reservation must, gives
// Execute that deadline.
type Command struct {
	Partner   string
	Aggregate string
	// MsgID is the dedup id. Commands that carry an Idempotency-Key derive it
	// from the key, so a retry can never append twice.
	MsgID string
	// Request is the fingerprint of the partner request the command runs
	// for, stored with the event, so that a retry whose Idempotency-Key
	// record was lost can still tell its own request from another one.
	Request string
	// LastOnly skips loading the events: the aggregate is long and Decide
	// reads the projections instead, after they reach History.Last. Once a
	// command of the aggregate appended in this process, the next one
	// starts from the sequence it appended instead of asking the ledger:
	// another writer's append since then fails the append's expectation,
	// the command decides again from the ledger's answer, and the
	// aggregate's commands ask the ledger for a while (sharedFor); a
	// refusal or a decision to append nothing is made again from the
	// ledger's answer (see Execute).
	LastOnly bool
	// New says the aggregate's id was minted for this command, so it has no
	// history: the first attempt decides from an empty one without reading
	// the ledger. The append still expects the aggregate to be empty, so an
	// id that did exist conflicts and the next attempt loads it.
	New bool
	// Unordered says no rule of the aggregate depends on the order of its
	// events: each command's event stands on its own (a church imported
	// without an external id, a bank credit whose trace its dedup id keeps
	// unique). The command takes no turn, loads nothing, decides from an
	// empty history and appends without expecting the aggregate's last
	// sequence, so its commands, on this instance or any other, neither
	// wait for nor conflict with one another. Its dedup id still stores
	// it at most once.
	Unordered bool
	// Decide returns the event to append, or nil when nothing changes.
	Decide func(ctx context.Context, h History) (*domain.Event, error)
}

// Outcome is what a command did.
type Outcome struct {
	// Record is the stored event, or nil when Decide returned nil.
	Record *Record
	// Replayed is true when the event was appended by an earlier run of the
	// same command (same MsgID) and nothing new was stored. (A caller that
	// found the earlier run's event itself, before executing, reports it
	// the same way.)
	Replayed bool
}

// maxAttempts bounds the reload-and-decide loop under contention.
const maxAttempts = 25

// Execute loads the aggregate, decides, and appends with the expectation that
// nobody wrote to the aggregate in between. On a conflict it reloads and
// decides again.
func (l *Ledger) Execute(ctx context.Context, cmd Command) (Outcome, error) {
	if cmd.Unordered {
		return l.executeUnordered(ctx, cmd)
	}
	tu, release, err := l.turns.take(ctx, l.subjects.Aggregate(cmd.Partner, cmd.Aggregate))
	if err != nil {
		return Outcome{}, fmt.Errorf("command %s/%s: %w", cmd.Partner, cmd.Aggregate, err)
	}
	defer release()
	for attempt := 1; ; attempt++ {
		var h History
		// The last holder's append, when it left one: a long aggregate's
		// commands then cost no read of the ledger (a partner's imports
		// or deposits, one at a time). It is forgotten until an append succeeds again.
		noted := cmd.LastOnly && tu.note.usable(turnClock())
		switch {
		case noted:
			h = History{Last: tu.note.last}
		case !cmd.New || attempt > 1:
			if h, err = l.history(ctx, cmd); err != nil {
				return Outcome{}, err
			}
		}
		tu.note.last = 0
		ev, refusal := cmd.Decide(ctx, h)
		if refusal != nil || ev == nil {
			// A refusal, or nothing to append: no conditional append can
			// tell a stale history from a current one. One decided from
			// this process's note may have missed another writer's
			// append: decide again from the ledger's answer. On a cluster
			// the history may have come from a lagging replica (a partner
			// created a moment ago would be "not found"): decide again
			// unless the leader agrees the history was whole.
			if noted {
				continue
			}
			fresh, err := l.historyCurrent(ctx, cmd, h)
			if err != nil && refusal == nil {
				return Outcome{}, err
			}
			if err != nil || fresh {
				return Outcome{}, refusal
			}
			if err := again(ctx, attempt, fmt.Errorf("command %s/%s: the history read stayed behind the stream's leader", cmd.Partner, cmd.Aggregate)); err != nil {
				return Outcome{}, err
			}
			continue
		}
		app, err := l.append(ctx, *ev, cmd.MsgID, appendGuard{expect: h.Last, on: true}, cmd.Request)
		if err == nil {
			if !app.Duplicate {
				tu.note.last = app.Record.Seq
			}
			return Outcome{Record: &app.Record, Replayed: app.Duplicate}, nil
		}
		if !errors.Is(err, ErrConflict) {
			return Outcome{}, err
		}
		if noted {
			// Another writer came between: read the ledger, at once, and
			// before the next commands of the aggregate for a while.
			tu.note.shared = turnClock().Add(sharedFor)
			continue
		}
		if err := again(ctx, attempt, err); err != nil {
			return Outcome{}, err
		}
	}
}

// executeUnordered runs an Unordered command: decide, append.
func (l *Ledger) executeUnordered(ctx context.Context, cmd Command) (Outcome, error) {
	ev, err := cmd.Decide(ctx, History{})
	if err != nil || ev == nil {
		return Outcome{}, err
	}
	app, err := l.append(ctx, *ev, cmd.MsgID, appendGuard{}, cmd.Request)
	if err != nil {
		return Outcome{}, err
	}
	return Outcome{Record: &app.Record, Replayed: app.Duplicate}, nil
}

// again waits before the next attempt to load and decide, or, once every
// attempt was spent (losing the race for the aggregate, or reading a
// history behind the leader's), gives up with cause as unavailable: retry
// later.
func again(ctx context.Context, attempt int, cause error) error {
	if attempt == maxAttempts {
		return fmt.Errorf("%w: %w", domain.ErrUnavailable, cause)
	}
	return Backoff(ctx, attempt)
}

// History loads an aggregate's events, as a command sees them before
// deciding.
func (l *Ledger) History(ctx context.Context, partner, aggregate string) (History, error) {
	return l.history(ctx, Command{Partner: partner, Aggregate: aggregate})
}

// historyCurrent reports whether h holds the aggregate's newest event. On
// one server every read is current; on a cluster the stream's leader says.
func (l *Ledger) historyCurrent(ctx context.Context, cmd Command, h History) (bool, error) {
	if l.cfg.Replicas <= 1 {
		return true, nil
	}
	last, err := l.leaderLastOf(ctx, l.subjects.Aggregate(cmd.Partner, cmd.Aggregate))
	if err != nil {
		return false, fmt.Errorf("command %s/%s: %w", cmd.Partner, cmd.Aggregate, err)
	}
	return last <= h.Last, nil
}

func (l *Ledger) history(ctx context.Context, cmd Command) (History, error) {
	filter := l.subjects.Aggregate(cmd.Partner, cmd.Aggregate)
	if cmd.LastOnly {
		last, err := l.LastOf(ctx, filter)
		if err != nil {
			return History{}, fmt.Errorf("load %s/%s: %w", cmd.Partner, cmd.Aggregate, err)
		}
		return History{Last: last}, nil
	}
	var h History
	for {
		recs, pending, err := l.Read(ctx, filter, h.Last, 256)
		if err != nil {
			return History{}, fmt.Errorf("load %s/%s: %w", cmd.Partner, cmd.Aggregate, err)
		}
		for _, r := range recs {
			ev, err := r.Event()
			if err != nil {
				return History{}, err
			}
			h.Events = append(h.Events, ev)
			h.Last = r.Seq
		}
		if pending == 0 || len(recs) == 0 {
			return h, nil
		}
	}
}

// Backoff waits a short, jittered, growing time so that contending commands
// (on other instances: this one's take turns) spread out instead of
// colliding again. It doubles from 1 ms up to 128 ms.
func Backoff(ctx context.Context, attempt int) error {
	d := time.Millisecond << min(attempt-1, 7)
	d += time.Duration(rand.Int64N(int64(d) + 1))
	return Sleep(ctx, d)
}

// Sleep waits for d, or until ctx ends (its error then). It is the one
// such wait of the ledger, its sibling packages and the dispatcher.
func Sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
