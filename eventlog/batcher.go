package eventlog

import "sync"

// batcher runs rounds of work on a goroutine of its own while there is
// work, the shape both group commit and the shared last-sequence lookups
// take: the caller that queues work while no round runs starts one; each
// round takes, under the batcher's lock, all that was queued meanwhile
// (so callers arriving during a round gather for the next) and does it
// outside the lock; the goroutine ends when a round finds nothing. The
// owner keeps its queue, guarded by the batcher's lock: queue changes it,
// take empties it.
type batcher[B any] struct {
	// take returns a round's work, called with mu held; false when there
	// is none.
	take func() (B, bool)
	// do does a round's work.
	do func(B)

	mu      sync.Mutex
	running bool
}

// queue runs add under the lock, then starts the rounds if none runs.
func (b *batcher[B]) queue(add func()) {
	b.mu.Lock()
	add()
	start := !b.running
	b.running = true
	b.mu.Unlock()
	if start {
		go b.run()
	}
}

func (b *batcher[B]) run() {
	for {
		b.mu.Lock()
		work, ok := b.take()
		if !ok {
			b.running = false
			b.mu.Unlock()
			return
		}
		b.mu.Unlock()
		b.do(work)
	}
}
