package main

import (
	"context"
	"errors"
	"io"
	"testing"
)

// Wrong bench flags are usage errors, refused before anything is measured.
func TestBenchFlagMistakes(t *testing.T) {
	for _, args := range [][]string{
		{"--only", "both"},
		{"--events", "5"},
		{"--partners", "1"},
		{"--memory", "10MiB"},
		{"--duration", "0s"},
		{"--rounds", "0"},
		// One CPU profile at a time.
		{"--cpuprofile", "a", "--burstprofile", "b"},
		{"--cpuprofile", "a", "--replayprofile", "b"},
		{"--burstprofile", "a", "--replayprofile", "b"},
	} {
		err := runBench(context.Background(), args, io.Discard, io.Discard)
		var u usageError
		if !errors.As(err, &u) {
			t.Errorf("%v: want a usage error, got %v", args, err)
		}
	}
}
