package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime/pprof"
	"time"

	"github.com/partnergiving/giving/internal/bench"
)

// runBench measures the service against the disk's raw synced publish rate
// in one run (package bench); BENCHMARKS.md quotes its output.
func runBench(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("giving bench", flag.ContinueOnError)
	var o bench.Options
	fs.StringVar(&o.Dir, "dir", "", "where to make the run's fresh data directories (default: the system's temporary directory)")
	fs.DurationVar(&o.Duration, "duration", 10*time.Second, "how long each measurement runs")
	fs.IntVar(&o.Clients, "clients", 16, "concurrent clients, and raw publishers")
	fs.IntVar(&o.Size, "size", 500, "raw limit message size in bytes")
	asJSON := fs.Bool("json", false, "print the report as JSON instead of tables")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of the whole run to this file (go tool pprof reads it)")
	if err := parseFlags(fs, args, stderr); err != nil {
		return err
	}
	if o.Duration <= 0 || o.Clients <= 0 || o.Size <= 0 {
		return usageError{"--duration, --clients and --size must be positive"}
	}
	o.Progress = stderr
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	r, err := bench.Run(ctx, o)
	if err != nil {
		return fmt.Errorf("bench: %w", err)
	}
	if *asJSON {
		return r.WriteJSON(stdout)
	}
	return r.WriteTable(stdout)
}
