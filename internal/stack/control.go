package stack

import (
	"context"
	"encoding/json"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/partnergiving/giving/eventlog"
	"github.com/partnergiving/giving/projections"
)

// control answers operator requests that must run inside a serving instance
// because it holds the projection file: today, "replay". Every instance
// listens, so one request rebuilds every instance sharing the ledger, and
// each streams its progress back to the requester.
type control struct {
	instance  string
	ledger    *eventlog.Ledger
	projector *projections.Projector
	log       zerolog.Logger

	stopListening func()
	// taken counts the requests taken, for tests that must know one arrived.
	taken atomic.Int64
	mu    sync.Mutex // one rebuild at a time

	// ctx ends when the instance stops, abandoning a rebuild; stop waits
	// for the rebuilds before the stack closes the projection file and the
	// ledger under them.
	ctx      context.Context
	cancel   context.CancelFunc
	runMu    sync.Mutex // orders rebuilds.Add before stop's Wait
	stopped  bool
	rebuilds sync.WaitGroup
}

// ReplayTopic is the control-plane topic of "giving replay".
const ReplayTopic = "replay"

// ReplayReport is one progress message of an instance's rebuild.
type ReplayReport struct {
	Instance string `json:"instance"`
	Applied  uint64 `json:"applied"`
	Total    uint64 `json:"total"`
	Done     bool   `json:"done"`
	Error    string `json:"error,omitempty"`
}

func (c *control) listen() error {
	c.ctx, c.cancel = context.WithCancel(context.Background())
	stop, err := c.ledger.Listen(ReplayTopic, c.replay)
	if err != nil {
		return err
	}
	c.stopListening = stop
	return nil
}

// stop takes no more requests, abandons a rebuild under way and waits
// until it has let go of the files.
func (c *control) stop() {
	if c.stopListening != nil {
		c.stopListening()
	}
	c.runMu.Lock()
	c.stopped = true
	c.runMu.Unlock()
	if c.cancel != nil {
		c.cancel()
	}
	c.rebuilds.Wait()
}

func (c *control) replay(reply func([]byte)) {
	c.taken.Add(1)
	c.runMu.Lock()
	defer c.runMu.Unlock()
	if c.stopped {
		return
	}
	c.rebuilds.Add(1)
	go func() {
		defer c.rebuilds.Done()
		c.mu.Lock()
		defer c.mu.Unlock()
		send := func(r ReplayReport) {
			r.Instance = c.instance
			data, _ := json.Marshal(r)
			reply(data)
		}
		var last time.Time
		var final ReplayReport
		err := c.projector.Rebuild(c.ctx, func(applied, total uint64) {
			final.Applied, final.Total = applied, total
			if time.Since(last) > 200*time.Millisecond {
				last = time.Now()
				send(ReplayReport{Applied: applied, Total: total})
			}
		})
		final.Done = true
		switch {
		case err != nil && c.ctx.Err() != nil:
			c.log.Warn().Err(err).Msg("replay abandoned: the instance is stopping")
			final.Error = "the instance stopped before the rebuild finished; its projection file is unchanged"
		case err != nil:
			c.log.Error().Err(err).Msg("replay failed")
			final.Error = err.Error()
		}
		send(final)
	}()
}
