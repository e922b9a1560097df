package bench

import (
	"bytes"
	"context"
	"math"
	"strings"
	"testing"
	"time"
)

// The write side gives every workload and the floor, on one key and on one
// key each, each with a rate, latencies, synced writes and CPU a request
// and its ratios to the limit, and the table shows them. Not a timed test.
func TestWritePathReportsEveryFigure(t *testing.T) {
	if testing.Short() {
		t.Skip("starts the service and a scratch ledger and drives both")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var progress bytes.Buffer
	const clients = 3
	r, err := Run(ctx, Options{
		Dir: t.TempDir(), Only: "write", Duration: 300 * time.Millisecond, Clients: clients, Size: 100,
		Memory: 256 << 20, Progress: &progress,
	})
	if err != nil {
		t.Fatalf("%v\n%s", err, progress.String())
	}
	if r.Read != nil {
		t.Errorf("--only write measured the read side too")
	}
	if len(r.Service) != 2*len(workloads) || len(r.Floor) != 2 {
		t.Fatalf("%d service rows and %d floor rows, want %d and 2\n%s", len(r.Service), len(r.Floor), 2*len(workloads), progress.String())
	}
	// The raw limit's CPU a message, and the cores it kept busy at its rate.
	if l := r.Limit; !(l.CPUMicros > 0) || math.Abs(l.Cores-l.CPUMicros*l.Rate/1e6) > 1e-9 {
		t.Errorf("raw limit: %v µs of CPU a message, %v cores at %v/s", l.CPUMicros, l.Cores, l.Rate)
	}
	for _, w := range append(append([]Workload{}, r.Service...), r.Floor...) {
		if w.Errors != 0 || !(w.Rate > 0) || !(w.P50 > 0) || !(w.P99 >= w.P50) || !(w.CPUMicros > 0) || !(w.SyncedWrites > 0) {
			t.Errorf("%s on %d keys: %+v", w.Name, w.Keys, w)
		}
		if math.Abs(w.Ratio-w.Rate/r.Limit.Rate) > 1e-9 || math.Abs(w.P99Ratio-w.P99/r.Limit.P99) > 1e-9 {
			t.Errorf("%s on %d keys: ratios %v, %v against the limit's %v, %v", w.Name, w.Keys, w.Ratio, w.P99Ratio, r.Limit.Rate, r.Limit.P99)
		}
	}
	// The floor appends each import's event, and nothing else, on one key
	// and on one key each.
	for i, keys := range []int{1, clients} {
		if f := r.Floor[i]; f.Name != floorWorkload || f.Keys != keys || f.SyncedWrites > 1.0001 {
			t.Errorf("floor row %d: %s on %d keys, %.3f synced writes a request; want %d keys, at most one write", i, f.Name, f.Keys, f.SyncedWrites, keys)
		}
	}
	var table bytes.Buffer
	if err := r.WriteTable(&table); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(table.String(), "µs of CPU a message") {
		t.Errorf("the table does not show the raw limit's CPU:\n%s", table.String())
	}
	if got := strings.Count(table.String(), floorWorkload); got != 2 {
		t.Errorf("the table shows the floor %d times, want 2:\n%s", got, table.String())
	}
}
