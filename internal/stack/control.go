package stack

import (
	"context"
	"encoding/json"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/partnergiving/giving/app"
	"github.com/partnergiving/giving/eventlog/control"
	"github.com/partnergiving/giving/projections"
)

// controller answers operator requests that must run inside a serving instance
// because it holds the projection file. "replay": every instance listens,
// so one request rebuilds every instance sharing the ledger, and each
// streams its progress back to the requester. The donor-sessions question
// (app.DonorSessionsTopic): one instance answers it from its projections.
type controller struct {
	instance  string
	plane     *control.Plane
	projector *projections.Projector
	log       zerolog.Logger
	// sessionsOfDonor answers app.DonorSessionsTopic.
	sessionsOfDonor func(ctx context.Context, donor string) ([]projections.DonorSession, error)

	stopListening, stopAnswering func()
	// taken counts the requests taken, for tests that must know one arrived.
	taken atomic.Int64
	mu    sync.Mutex // one rebuild at a time

	// ctx ends when the instance stops, abandoning a rebuild or an answer;
	// stop waits for them (running) before the stack closes the projection
	// file and the ledger under them.
	ctx     context.Context
	cancel  context.CancelFunc
	runMu   sync.Mutex // orders running.Add before stop's Wait
	stopped bool
	running sync.WaitGroup
}

// answerWait bounds an answer's wait for the projections to catch up; the
// asker waits about as long (app's askWait) before it reads the ledger
// itself.
const answerWait = 25 * time.Second

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

func (c *controller) listen() error {
	c.ctx, c.cancel = context.WithCancel(context.Background())
	stop, err := c.plane.Listen(ReplayTopic, c.replay)
	if err != nil {
		return err
	}
	c.stopListening = stop
	if c.stopAnswering, err = c.plane.Answer(app.DonorSessionsTopic, c.donorSessions); err != nil {
		return err
	}
	return nil
}

// stop takes no more requests, abandons a rebuild under way and waits
// until it has let go of the files.
func (c *controller) stop() {
	for _, stop := range []func(){c.stopListening, c.stopAnswering} {
		if stop != nil {
			stop()
		}
	}
	c.runMu.Lock()
	c.stopped = true
	c.runMu.Unlock()
	if c.cancel != nil {
		c.cancel()
	}
	c.running.Wait()
}

// start runs work off the connection's goroutine unless the instance is
// stopping, and lets stop wait for it.
func (c *controller) start(work func()) {
	c.runMu.Lock()
	defer c.runMu.Unlock()
	if c.stopped {
		return
	}
	c.running.Add(1)
	go func() {
		defer c.running.Done()
		work()
	}()
}

// donorSessions answers the donor-sessions question from this instance's
// projections.
func (c *controller) donorSessions(donor []byte, answer func([]byte)) {
	c.start(func() {
		ctx, cancel := context.WithTimeout(c.ctx, answerWait)
		defer cancel()
		a := app.DonorSessionsAnswer{Instance: c.instance}
		sessions, err := c.sessionsOfDonor(ctx, string(donor))
		if err != nil {
			a.Error = err.Error()
		} else {
			a.Sessions = sessions
		}
		data, _ := json.Marshal(a)
		answer(data)
	})
}

func (c *controller) replay(reply func([]byte)) {
	c.taken.Add(1)
	c.start(func() {
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
	})
}
