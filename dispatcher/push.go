package dispatcher

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/partnergiving/giving/eventlog"
)

// First attempts are pushed: the fan-out hands each event's jobs straight to
// the endpoints' pushers in this instance, which attempt them at once with
// the event's bytes in hand. A first attempt that succeeds costs an HTTP
// request, an attempt-log record (asynchronous) and the acknowledgement of
// the ledger event; nothing is written synchronously and nothing is polled.
// The ledger event stays unacknowledged until every one of its jobs is
// settled, so a crash loses nothing: the shared fan-out reader hands the
// event out again (delivery is at least once).
//
// Each endpoint's pusher runs Concurrency attempts at once and holds at most
// pushBacklog jobs waiting; a job that finds it full (a slow or hanging
// endpoint) is spilled to the durable delivery queue instead, so such an
// endpoint holds only its own slots and a bounded share of the fan-out's
// unacknowledged events, and never delays another endpoint.

// pushBacklog is how many jobs an endpoint's pusher holds waiting, as a
// multiple of its concurrency.
const pushBacklog = 4

// pushPatience is how long the fan-out waits for room in an endpoint's
// backlog before it calls the endpoint congested and spills. A healthy
// endpoint makes room within milliseconds, so a burst stays in order and
// off the queue; a congested endpoint is not waited for again until its
// pusher has caught up, so it costs the fan-out one patience at most.
const pushPatience = 200 * time.Millisecond

// pushed is a first attempt waiting for a pusher.
type pushed struct {
	j    job
	rec  eventlog.Record
	done func(ok bool)
}

// pusher attempts one endpoint's jobs in this instance. Its slots bound the
// endpoint's attempts at once, pushed or taken from the queue.
type pusher struct {
	jobs      chan pushed
	slots     chan struct{}
	stopped   chan struct{}
	once      sync.Once
	congested atomic.Bool
}

func (p *pusher) stop() { p.once.Do(func() { close(p.stopped) }) }

// pusherOf returns the endpoint's pusher, starting it on first use; nil once
// the dispatcher is closing.
func (d *Dispatcher) pusherOf(ctx context.Context, endpoint string) *pusher {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closing {
		return nil
	}
	pu, ok := d.pushers[endpoint]
	if !ok {
		pu = &pusher{
			jobs:    make(chan pushed, pushBacklog*d.cfg.Concurrency),
			slots:   make(chan struct{}, d.cfg.Concurrency),
			stopped: make(chan struct{}),
		}
		d.pushers[endpoint] = pu
		for range d.cfg.Concurrency {
			d.jobs.Add(1)
			go d.runPusher(ctx, pu)
		}
	}
	return pu
}

// push hands a first attempt to its endpoint's pusher. It reports false
// when the endpoint is congested (the job is then for the queue) or the
// dispatcher is closing.
func (d *Dispatcher) push(ctx context.Context, p pushed) bool {
	pu := d.pusherOf(ctx, p.j.Endpoint)
	if pu == nil {
		return false
	}
	select {
	case pu.jobs <- p:
		pu.settleIfStopped()
		return true
	default:
	}
	if pu.congested.Load() {
		return false
	}
	t := time.NewTimer(pushPatience)
	defer t.Stop()
	select {
	case pu.jobs <- p:
		pu.settleIfStopped()
		return true
	case <-t.C:
		pu.congested.Store(true)
		return false
	case <-pu.stopped:
		return false
	case <-ctx.Done():
		return false
	}
}

func (d *Dispatcher) runPusher(ctx context.Context, pu *pusher) {
	defer d.jobs.Done()
	for {
		select {
		case <-ctx.Done():
			pu.end()
			return
		case <-pu.stopped:
			pu.end()
			return
		case p := <-pu.jobs:
			if !pu.hold(ctx) {
				p.done(false)
				pu.end()
				return
			}
			v, _, _ := d.attempt(ctx, p.j, p.rec)
			pu.release()
			p.done(v == settled)
			if len(pu.jobs) == 0 {
				pu.congested.Store(false)
			}
		}
	}
}

// end stops the pusher and settles the jobs waiting in it: the stop
// first, so that a job pushed meanwhile is settled by its pusher
// (settleIfStopped).
func (p *pusher) end() {
	p.stop()
	p.settleWaiting()
}

// settleWaiting settles the jobs a stopped pusher still holds. Left alone,
// each one's event would stay out, kept alive by the fan-out's reader,
// until its MaxHold ran out (80 s by default), and with it every
// instance's view of the fan-out as caught up. They are failed, so their
// events are handed out again at once and fanned out afresh: to whichever
// instance runs next when the dispatcher stops, to the endpoints that then
// exist when the endpoint was deleted or disabled (or when the pusher was
// stopped on a stale view of them). An endpoint of the event that was
// already delivered gets it again, as it would after the hold: delivery
// is at least once.
func (p *pusher) settleWaiting() {
	for {
		select {
		case w := <-p.jobs:
			w.done(false)
		default:
			return
		}
	}
}

// settleIfStopped settles what waits when the pusher has stopped: a job
// handed to it as it stopped may have come after its goroutines settled
// what waited (they stop it first, then settle).
func (p *pusher) settleIfStopped() {
	select {
	case <-p.stopped:
		p.settleWaiting()
	default:
	}
}

// hold takes one of the endpoint's attempt slots.
func (p *pusher) hold(ctx context.Context) bool {
	select {
	case p.slots <- struct{}{}:
		return true
	case <-ctx.Done():
		return false
	}
}

func (p *pusher) release() { <-p.slots }

// settlement acknowledges a ledger event once every one of its jobs is
// settled, or has it handed out again if any was not.
type settlement struct {
	left   atomic.Int32
	failed atomic.Bool
	ev     eventlog.Delivery
}

func newSettlement(ev eventlog.Delivery, jobs int) *settlement {
	s := &settlement{ev: ev}
	s.left.Store(int32(jobs))
	return s
}

func (s *settlement) done(ok bool) {
	if !ok {
		s.failed.Store(true)
	}
	if s.left.Add(-1) > 0 {
		return
	}
	if s.failed.Load() {
		s.ev.Retry(retryFanOut)
		return
	}
	s.ev.Ack()
}
