package main

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/rs/zerolog"

	"github.com/partnergiving/giving/domain"
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

	sub *nats.Subscription
	mu  sync.Mutex // one rebuild at a time

	// ctx ends when the instance stops, abandoning a rebuild; stop waits
	// for the rebuilds before the stack closes the projection file and the
	// ledger under them.
	ctx      context.Context
	cancel   context.CancelFunc
	runMu    sync.Mutex // orders rebuilds.Add before stop's Wait
	stopped  bool
	rebuilds sync.WaitGroup
}

func replaySubject(env domain.Environment) string { return "giving.control." + string(env) + ".replay" }

// replayReport is one progress message of a rebuild.
type replayReport struct {
	Instance string `json:"instance"`
	Applied  uint64 `json:"applied"`
	Total    uint64 `json:"total"`
	Done     bool   `json:"done"`
	Error    string `json:"error,omitempty"`
}

func (c *control) listen() error {
	c.ctx, c.cancel = context.WithCancel(context.Background())
	sub, err := c.ledger.Conn().Subscribe(replaySubject(c.ledger.Env()), c.replay)
	if err != nil {
		return fmt.Errorf("control: %w", err)
	}
	c.sub = sub
	return nil
}

// stop takes no more requests, abandons a rebuild under way and waits
// until it has let go of the files.
func (c *control) stop() {
	if c.sub != nil {
		_ = c.sub.Unsubscribe()
	}
	c.runMu.Lock()
	c.stopped = true
	c.runMu.Unlock()
	if c.cancel != nil {
		c.cancel()
	}
	c.rebuilds.Wait()
}

func (c *control) replay(msg *nats.Msg) {
	if msg.Reply == "" {
		return
	}
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
		send := func(r replayReport) {
			r.Instance = c.instance
			data, _ := json.Marshal(r)
			_ = c.ledger.Conn().Publish(msg.Reply, data)
		}
		var last time.Time
		var final replayReport
		err := c.projector.Rebuild(c.ctx, func(applied, total uint64) {
			final.Applied, final.Total = applied, total
			if time.Since(last) > 200*time.Millisecond {
				last = time.Now()
				send(replayReport{Applied: applied, Total: total})
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
