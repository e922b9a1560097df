package projections

import (
	"math"
	"runtime/debug"
	"testing"
)

// A rebuild raises the collector's target only under a memory limit, and
// the target comes back when the last of overlapping rebuilds ends.
func TestRelaxGC(t *testing.T) {
	before := debug.SetGCPercent(100)
	limit := debug.SetMemoryLimit(math.MaxInt64)
	t.Cleanup(func() {
		debug.SetGCPercent(before)
		debug.SetMemoryLimit(limit)
	})

	relaxGC()()
	if got := debug.SetGCPercent(100); got != 100 {
		t.Fatalf("without a memory limit the target became %d", got)
	}

	debug.SetMemoryLimit(1 << 30)
	first := relaxGC()
	second := relaxGC()
	if got := debug.SetGCPercent(rebuildGCPercent); got != rebuildGCPercent {
		t.Fatalf("under a memory limit the target is %d, want %d", got, rebuildGCPercent)
	}
	first()
	if got := debug.SetGCPercent(rebuildGCPercent); got != rebuildGCPercent {
		t.Fatalf("with a rebuild still running the target is %d", got)
	}
	second()
	if got := debug.SetGCPercent(100); got != 100 {
		t.Fatalf("after the rebuilds the target is %d, want 100", got)
	}

	debug.SetGCPercent(-1)
	relaxGC()()
	if got := debug.SetGCPercent(100); got != -1 {
		t.Fatalf("GOGC=off became %d", got)
	}
}
