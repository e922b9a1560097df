package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/partnergiving/giving/eventlog"
	"github.com/partnergiving/giving/internal/bench"
	"github.com/partnergiving/giving/internal/cpuprofile"
)

// runBench measures the service against the disk's raw synced publish rate
// in one run (package bench); BENCHMARKS.md's "Current figures" are its output.
func runBench(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("giving bench", flag.ContinueOnError)
	var o bench.Options
	fs.StringVar(&o.Dir, "dir", "", "where to make the run's fresh data directories (default: the system's temporary directory)")
	fs.DurationVar(&o.Duration, "duration", 10*time.Second, "how long each measurement runs")
	fs.IntVar(&o.Clients, "clients", 16, "concurrent clients, and raw publishers")
	fs.IntVar(&o.Size, "size", 500, "raw limit message size in bytes")
	fs.StringVar(&o.Only, "only", "", "measure only one side: write or read (default both)")
	fs.IntVar(&o.Events, "events", 1_000_000, "read side: public events at the large ledger size (the small one is 10000, or a tenth)")
	fs.IntVar(&o.Partners, "partners", 1000, "read side: partners sharing the events")
	memory := fs.String("memory", "auto", "memory the service may use, as serve's --memory (Go runtime soft limit of the whole bench process and of the serve child the read side measures, embedded NATS memory store): a size, auto or 0 for no limit")
	asJSON := fs.Bool("json", false, "print the report as JSON instead of tables")
	fs.StringVar(&o.HeapProfile, "heapprofile", "", "read side: write heap profiles at each ledger size to this path, suffixed with the size: the bench's process's, and serve's own (.serve.<size>)")
	fs.IntVar(&o.Burst, "burst", bench.DefaultBurst, "read side: webhook deliveries the dispatch burst measures")
	fs.IntVar(&o.Rounds, "rounds", bench.DefaultRounds, "read side: dispatch rounds at each ledger size (a burst, its bare loop and its fed loop, each burst on a service started afresh); the figures are their medians")
	fs.StringVar(&o.BurstProfile, "burstprofile", "", "read side: write a CPU profile of each dispatch burst to this path, suffixed with the ledger size (and .r<round> with more than one round), and of its bare and fed loops (.bare, .fed)")
	fs.StringVar(&o.ReplayProfile, "replayprofile", "", "read side: write a CPU profile of each replay to this path, suffixed with the ledger size, and of the raw read it is compared with (.<size>.raw)")
	fs.Float64Var(&o.WriteRate, "write-rate", 0, "write side: pace the clients to this many requests a second in all, to compare builds by CPU per request at one load (default: each client sends as soon as answered)")
	fs.Float64Var(&o.PacedRate, "paced", 0, "write side: also drive each workload on one key at this many requests a second, as an open loop (each request due at its own time), for --paced-duration, and report its p50 and p99")
	fs.DurationVar(&o.PacedDuration, "paced-duration", 30*time.Second, "write side: how long each --paced workload runs")
	cluster := fs.Bool("cluster", false, "write side: also measure the workloads on a 3-node JetStream cluster in this process (3 replicas, every write synced), through one instance and through --instances, on one key and on one key each: req/s, p50/p99, CPU a request, append conflicts a request")
	fs.IntVar(&o.ClusterInstances, "instances", 3, "write side: how many instances --cluster measures beside one")
	fs.StringVar(&o.WriteProfile, "writeprofile", "", "write side: write a CPU, a block and a mutex profile of each measurement to this path, suffixed with the workload, its clients and keys, and the kind (.cpu, .block, .mutex)")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of the whole run to this file (go tool pprof reads it)")
	if err := parseFlags(fs, args, stderr); err != nil {
		return err
	}
	if o.Duration <= 0 || o.Clients <= 0 || o.Size <= 0 || o.Rounds <= 0 || o.Events < 10 || o.Partners < 2 {
		return usageError{"--duration, --clients, --size and --rounds must be positive, --events at least 10 and --partners at least 2"}
	}
	if o.Only != "" && o.Only != "write" && o.Only != "read" {
		return usageError{"--only must be write or read"}
	}
	if o.PacedRate < 0 || o.PacedDuration <= 0 || o.ClusterInstances < 1 {
		return usageError{"--paced must not be negative, --paced-duration and --instances must be positive"}
	}
	if !*cluster {
		o.ClusterInstances = 0
	}
	profiles := 0
	for _, p := range []string{*cpuProfile, o.BurstProfile, o.ReplayProfile, o.WriteProfile} {
		if p != "" {
			profiles++
		}
	}
	if profiles > 1 {
		return usageError{"--cpuprofile, --burstprofile, --replayprofile and --writeprofile cannot be used together: the runtime takes one CPU profile at a time"}
	}
	var err error
	if o.Memory, err = parseMemory(*memory); err != nil {
		return err
	}
	limitMemory(eventlog.Config{Memory: o.Memory})
	o.Progress = stderr
	// The read side measures serve's own memory by running this binary's
	// serve in a child process.
	if o.Serve, err = os.Executable(); err != nil {
		return err
	}
	stopProfile, err := cpuprofile.Start(*cpuProfile, "")
	if err != nil {
		return err
	}
	r, err := bench.Run(ctx, o)
	if profileErr := stopProfile(); err == nil {
		err = profileErr
	}
	if err != nil {
		return fmt.Errorf("bench: %w", err)
	}
	if *asJSON {
		return r.WriteJSON(stdout)
	}
	return r.WriteTable(stdout)
}
