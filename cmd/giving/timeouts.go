package main

import (
	"flag"
	"time"

	"github.com/partnergiving/giving/eventlog"
	"github.com/partnergiving/giving/internal/stack"
)

// timeoutFlags bound the HTTP server's waits for clients and the time a
// request may hold its Idempotency-Key.
type timeoutFlags struct {
	http  stack.Timeouts
	lease time.Duration
}

func (f *timeoutFlags) register(fs *flag.FlagSet) {
	d := stack.DefaultTimeouts
	fs.DurationVar(&f.http.ReadHeader, "http-read-header-timeout", d.ReadHeader, "time limit for a client to send a request's headers")
	fs.DurationVar(&f.http.Read, "http-read-timeout", d.Read, "time limit for a client to send a whole request, body included")
	fs.DurationVar(&f.http.Write, "http-write-timeout", d.Write, "time limit from a request's headers to the end of its answer; must exceed the feed's longest wait (30s) and --request-lease plus 10s")
	fs.DurationVar(&f.http.Idle, "http-idle-timeout", d.Idle, "how long a kept-alive connection may wait for its next request")
	fs.DurationVar(&f.lease, "request-lease", eventlog.DefaultLease, "longest a POST may run holding its Idempotency-Key; one running longer is cancelled, its key released, and answered 503 outcome-unknown")
}

func (f *timeoutFlags) check() error {
	if f.lease <= 0 {
		return usageError{"--request-lease must be positive"}
	}
	if err := f.http.Check(f.lease); err != nil {
		return usageError{err.Error()}
	}
	return nil
}
