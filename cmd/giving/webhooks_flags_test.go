package main

import (
	"errors"
	"flag"
	"io"
	"slices"
	"testing"
	"time"
)

func TestWebhookFlags(t *testing.T) {
	parse := func(args ...string) (webhookFlags, error) {
		fs := flag.NewFlagSet("serve", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		var f webhookFlags
		f.register(fs)
		return f, fs.Parse(args)
	}
	f, err := parse("--webhook-timeout", "3s", "--webhook-retry-schedule", "1s, 2m", "--webhook-concurrency", "2", "--webhook-disable-after", "90s")
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := f.config()
	if err != nil || cfg.Timeout != 3*time.Second || cfg.Concurrency != 2 || cfg.DisableAfter != 90*time.Second || !slices.Equal(cfg.Schedule, []time.Duration{time.Second, 2 * time.Minute}) {
		t.Fatalf("config %+v (%v)", cfg, err)
	}
	for _, args := range [][]string{
		{"--webhook-retry-schedule", "soon"},
		{"--webhook-retry-schedule", ""},
		{"--webhook-timeout", "0s"},
		{"--webhook-concurrency", "0"},
		{"--webhook-disable-after", "0s"},
	} {
		f, err := parse(args...)
		if err == nil {
			_, err = f.config()
		}
		var u usageError
		if !errors.As(err, &u) {
			t.Errorf("%v: want a usage error, got %v", args, err)
		}
	}
}
