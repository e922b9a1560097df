package main

import (
	"flag"
	"time"

	"github.com/partnergiving/giving/dispatcher"
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
