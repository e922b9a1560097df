// Package openloop drives calls at a steady pace as an open loop: each call
// is due at its own time from the start, whatever the ones before it are
// doing, so a loop that falls behind catches up at once instead of dropping
// ticks, and the pace is the one asked unless the calls cannot take it.
// The bench's paced appends to the service and their raw counterpart
// (probe.MeasureRawPaced) both run on it, so the two are paced alike.
package openloop

import (
	"context"
	"sync"
	"time"
)

// Run calls do(i) for i from 0 to n-1, call i due at i/rate seconds from
// the start, each on its own goroutine, at most slots under way; a call due
// while every slot is taken is skipped. It stops starting calls when ctx
// ends, waits for those under way, and returns how many it skipped and how
// long the calls took from the start.
func Run(ctx context.Context, n int, rate float64, slots int, do func(i int)) (skipped int, elapsed time.Duration) {
	free := make(chan struct{}, slots)
	interval := time.Duration(float64(time.Second) / rate)
	var wg sync.WaitGroup
	start := time.Now()
	for i := range n {
		if ctx.Err() != nil {
			break
		}
		if wait := time.Until(start.Add(time.Duration(i) * interval)); wait > 0 {
			time.Sleep(wait)
		}
		select {
		case free <- struct{}{}:
		default: // the calls cannot keep the pace: this one is skipped
			skipped++
			continue
		}
		wg.Go(func() {
			defer func() { <-free }()
			do(i)
		})
	}
	wg.Wait()
	return skipped, time.Since(start)
}
