package main

import (
	"errors"
	"testing"

	"github.com/KimMachineGun/automemlimit/memlimit"
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
	want := int64(minAutoMemory)
	if total, err := memlimit.ApplyFallback(memlimit.FromCgroup, memlimit.FromSystem)(); err == nil {
		want = max(int64(total/2), minAutoMemory)
	}
	if got != want || got < minAutoMemory {
		t.Errorf("auto = %d, want %d (at least %d)", got, want, minAutoMemory)
	}
}
