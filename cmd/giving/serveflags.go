package main

// The flag groups of "giving serve" that configure one part each: the
// webhook dispatcher, and the HTTP server's waits with the request lease.

import (
	"flag"
	"time"

	"github.com/partnergiving/giving/dispatcher"
	"github.com/partnergiving/giving/eventlog/idempotency"
	"github.com/partnergiving/giving/internal/stack"
)

// webhookFlags configure the dispatcher of "giving serve".
type webhookFlags struct {
	timeout     time.Duration
	schedule    string
	concurrency int
	disable     time.Duration
}

func (f *webhookFlags) register(fs *flag.FlagSet) {
	fs.DurationVar(&f.timeout, "webhook-timeout", 10*time.Second, "time limit of one webhook delivery attempt")
	fs.StringVar(&f.schedule, "webhook-retry-schedule", dispatcher.FormatSchedule(dispatcher.DefaultSchedule),
		"waits between webhook delivery attempts, comma-separated; a delivery gets one attempt more than there are waits (each wait jittered ±20%)")
	fs.IntVar(&f.concurrency, "webhook-concurrency", 8, "webhook attempts one endpoint gets at once on each instance")
	fs.DurationVar(&f.disable, "webhook-disable-after", dispatcher.DefaultDisableAfter, "an endpoint whose every attempt failed for this long is disabled (reason failing)")
}

func (f *webhookFlags) config() (dispatcher.Config, error) {
	if f.timeout <= 0 {
		return dispatcher.Config{}, usageError{"--webhook-timeout must be positive"}
	}
	if f.concurrency <= 0 {
		return dispatcher.Config{}, usageError{"--webhook-concurrency must be positive"}
	}
	if f.disable <= 0 {
		return dispatcher.Config{}, usageError{"--webhook-disable-after must be positive"}
	}
	schedule, err := dispatcher.ParseSchedule(f.schedule)
	if err != nil {
		return dispatcher.Config{}, usageError{"--webhook-retry-schedule: " + err.Error()}
	}
	return dispatcher.Config{Timeout: f.timeout, Schedule: schedule, Concurrency: f.concurrency, DisableAfter: f.disable}, nil
}

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
	fs.DurationVar(&f.lease, "request-lease", idempotency.DefaultLease, "longest a POST or PATCH may run holding its Idempotency-Key; one running longer is cancelled, its key released, and answered 503 outcome-unknown")
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
