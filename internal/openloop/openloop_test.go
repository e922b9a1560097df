package openloop

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Every call is made once, in its own goroutine, no earlier than it is due.
func TestRunCallsEachOnceNoEarlierThanDue(t *testing.T) {
	const n, rate = 50, 1000.0
	var mu sync.Mutex
	at := map[int]time.Time{}
	start := time.Now()
	skipped, elapsed := Run(context.Background(), n, rate, n, func(i int) {
		mu.Lock()
		defer mu.Unlock()
		if _, ok := at[i]; ok {
			t.Errorf("call %d made twice", i)
		}
		at[i] = time.Now()
	})
	if skipped != 0 || len(at) != n {
		t.Fatalf("skipped %d, made %d of %d", skipped, len(at), n)
	}
	for i, when := range at {
		if due := start.Add(time.Duration(i) * time.Millisecond); when.Before(due) {
			t.Errorf("call %d made %s before it was due", i, due.Sub(when))
		}
	}
	if min := time.Duration(n-1) * time.Millisecond; elapsed < min {
		t.Errorf("elapsed %s, less than the last call's due time %s", elapsed, min)
	}
}

// A call due while every slot is taken is skipped, not queued.
func TestRunSkipsWhatFindsNoSlot(t *testing.T) {
	release := make(chan struct{})
	var made atomic.Int64
	done := make(chan struct{})
	var skipped int
	go func() {
		defer close(done)
		// A million a second: every call is due within 5 µs of the start.
		skipped, _ = Run(context.Background(), 5, 1e6, 2, func(int) {
			made.Add(1)
			<-release
		})
	}()
	// The first two calls take the two slots and hold them. Nothing tells
	// when the loop has passed the other three (it skips them without a
	// trace), so after the two are in, the slots stay held for 200 ms,
	// forty thousand times the last call's due time.
	for made.Load() < 2 {
		time.Sleep(time.Millisecond)
	}
	time.Sleep(200 * time.Millisecond)
	close(release)
	<-done
	if made.Load() != 2 || skipped != 3 {
		t.Fatalf("made %d, skipped %d; want 2 and 3", made.Load(), skipped)
	}
}

// Once ctx ends no call starts.
func TestRunStopsWhenTheContextEnds(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var made atomic.Int64
	Run(ctx, 10, 1000, 10, func(int) { made.Add(1) })
	if made.Load() != 0 {
		t.Fatalf("made %d calls after the context ended", made.Load())
	}
}
