package main

import (
	"errors"
	"os"
	"runtime/debug"
	"testing"

	"github.com/KimMachineGun/automemlimit/memlimit"

	"github.com/partnergiving/giving/eventlog"
)

func TestParseMemory(t *testing.T) {
	for _, tt := range []struct {
		in   string
		want int64
	}{
		{"0", 0},
		{"64MiB", 64 << 20},
		{"2GiB", 2 << 30},
		{"512MB", 512_000_000},
	} {
		got, err := parseMemory(tt.in)
		if err != nil || got != tt.want {
			t.Errorf("parseMemory(%q) = %d, %v; want %d", tt.in, got, err, tt.want)
		}
	}
	for _, bad := range []string{"", "10MiB", "lots", "-1GiB", "Auto"} {
		var u usageError
		if _, err := parseMemory(bad); !errors.As(err, &u) {
			t.Errorf("parseMemory(%q) = %v, want a usage error", bad, err)
		}
	}
}

// auto is half of what the cgroup or the machine gives, never under 512MiB.
func TestParseMemoryAuto(t *testing.T) {
	got, err := parseMemory("auto")
	if err != nil {
		t.Fatal(err)
	}
	if got < minAutoMemory {
		t.Errorf("auto = %d, under the floor %d", got, minAutoMemory)
	}
	total, err := memlimit.ApplyFallback(memlimit.FromCgroup, memlimit.FromSystem)()
	switch {
	case err != nil && got != minAutoMemory:
		t.Errorf("auto = %d with no memory figure known, want the floor %d", got, minAutoMemory)
	case err == nil && got > minAutoMemory && (got > int64(total)/2+1 || got < int64(total)/2-1):
		t.Errorf("auto = %d above the floor, want half of %d", got, total)
	}
}

// Under a memory limit the collector's target is gcPercent, unless GOGC
// says otherwise; without a limit it stays as the runtime had it.
func TestLimitMemorySetsTheCollectorsTarget(t *testing.T) {
	before, limit := debug.SetGCPercent(100), debug.SetMemoryLimit(-1)
	t.Cleanup(func() {
		debug.SetGCPercent(before)
		debug.SetMemoryLimit(limit)
	})
	if _, set := os.LookupEnv("GOGC"); set {
		t.Skip("GOGC is set in this environment")
	}
	limitMemory(eventlog.Config{})
	if got := debug.SetGCPercent(100); got != 100 {
		t.Errorf("without a memory limit the target became %d, want it left at 100", got)
	}
	limitMemory(eventlog.Config{Memory: 1 << 30})
	if got := debug.SetGCPercent(100); got != gcPercent {
		t.Errorf("under a memory limit the target is %d, want %d", got, gcPercent)
	}
	if got := debug.SetMemoryLimit(-1); got != 1<<30 {
		t.Errorf("memory limit %d, want %d", got, 1<<30)
	}
	t.Setenv("GOGC", "150")
	limitMemory(eventlog.Config{Memory: 1 << 30})
	if got := debug.SetGCPercent(100); got != 100 {
		t.Errorf("with GOGC set the target became %d, want it left at 100", got)
	}
}
