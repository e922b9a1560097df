package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"strings"

	"github.com/KimMachineGun/automemlimit/memlimit"
	"github.com/dustin/go-humanize"
	"github.com/partnergiving/giving/domain"
	"github.com/partnergiving/giving/eventlog"
)

// ledgerFlags are the flags every command that opens the ledger shares.
type ledgerFlags struct {
	env        string
	data       string
	natsURL    string
	natsListen string
	replicas   int
	masterKey  string
	memory     string
	groupAt    int
}

// defaultNATSListen is where the embedded server also listens, so the CLI
// can reach a running service. It is loopback-only.
const defaultNATSListen = "127.0.0.1:14222"

// register adds the flags operator commands share with serve. Operator
// commands have no --nats-listen: they learn a running instance's address
// from its data directory (openLedgerCLI).
func (f *ledgerFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.env, "env", "sandbox", "stack: sandbox or production")
	fs.StringVar(&f.data, "data", "./data", "data directory (embedded NATS store, projections, master key)")
	fs.StringVar(&f.natsURL, "nats-url", "", "external NATS server or cluster; empty runs NATS embedded")
	fs.IntVar(&f.replicas, "replicas", 1, "replicas of the stream and buckets on an external cluster")
	fs.StringVar(&f.masterKey, "master-key", "", "master key (64 hex chars); empty keeps a generated one in the data directory")
	fs.StringVar(&f.memory, "memory", "auto", "memory the process may use (Go runtime soft limit, embedded NATS memory store): a size such as 2GiB, auto for half of what the machine or its cgroup gives the process, or 0 for no limit")
	fs.IntVar(&f.groupAt, "group-commit-at", eventlog.DefaultGroupCommitAt, "ledger appends one instance has in flight before the next ones wait to share one synced write (an atomic batch)")
}

func (f *ledgerFlags) environment() (domain.Environment, error) {
	env, err := domain.ParseEnvironment(f.env)
	if err != nil {
		return "", usageError{"--env must be sandbox or production"}
	}
	return env, nil
}

func (f *ledgerFlags) config() (eventlog.Config, error) {
	env, err := f.environment()
	if err != nil {
		return eventlog.Config{}, err
	}
	memory, err := parseMemory(f.memory)
	if err != nil {
		return eventlog.Config{}, err
	}
	if f.groupAt <= 0 {
		return eventlog.Config{}, usageError{"--group-commit-at must be positive"}
	}
	return eventlog.Config{Env: env, DataDir: f.data, NATSURL: f.natsURL, NATSListen: f.natsListen, Replicas: f.replicas, Memory: memory, GroupCommitAt: f.groupAt}, nil
}

// parseMemory reads a --memory setting. "auto" is half of the memory the
// cgroup (or, without one, the machine) gives the process, at least 512MiB:
// a soft limit is the point where the collector starts working harder, and
// one below what the ledger's indexes need keeps it collecting without
// pause (BENCHMARKS.md, "Current figures"), so the default leaves
// room and a smaller machine still gets a bound.
func parseMemory(s string) (int64, error) {
	if s == "auto" {
		total, err := memlimit.ApplyFallback(memlimit.FromCgroup, memlimit.FromSystem)()
		if err != nil {
			return minAutoMemory, nil
		}
		return max(int64(total/2), minAutoMemory), nil
	}
	memory, err := humanize.ParseBytes(s)
	if err != nil || (memory != 0 && memory < 64<<20) {
		return 0, usageError{"--memory must be a size of at least 64MiB, such as 512MiB or 2GiB, auto, or 0 for no limit"}
	}
	return int64(memory), nil
}

// minAutoMemory is the least --memory auto chooses.
const minAutoMemory = 512 << 20

// limitMemory sets the Go runtime's soft memory limit to the configured
// memory: the garbage collector works harder as the process nears it. It
// cannot hold the process below what it keeps live, which grows with the
// number of the ledger's subjects (the embedded server's indexes).
//
// With the limit as the backstop, the collector's target is raised to
// gcPercent, unless the operator set GOGC: the heap may grow to three times
// what is live between collections instead of two. The collector ran at
// about every 30 MB allocated during a webhook burst and took 6-9 µs of a
// delivery's 70. Measured in rounds at a million events, the dispatch
// ratio went from 0.642-0.681x (five runs) to 0.694-0.738x (four), and
// serve's peak there from 111-121 to 139-147 MiB, well under the read
// side's 256 (measured with giving bench).
func limitMemory(cfg eventlog.Config) {
	if cfg.Memory <= 0 {
		return
	}
	debug.SetMemoryLimit(cfg.Memory)
	if _, set := os.LookupEnv("GOGC"); !set {
		debug.SetGCPercent(gcPercent)
	}
}

// gcPercent is the collector's target under a memory limit (limitMemory).
const gcPercent = 200

// envName is a flag's environment variable: --nats-url is GIVING_NATS_URL.
func envName(flagName string) string {
	return "GIVING_" + strings.ToUpper(strings.ReplaceAll(flagName, "-", "_"))
}

// parseFlags parses args, taking any flag not given on the command line from
// its GIVING_* environment variable (--nats-url from GIVING_NATS_URL).
func parseFlags(fs *flag.FlagSet, args []string, stderr io.Writer) error {
	fs.SetOutput(stderr)
	var envErr error
	fs.VisitAll(func(fl *flag.Flag) {
		name := envName(fl.Name)
		if v, ok := os.LookupEnv(name); ok && envErr == nil {
			if err := fs.Set(fl.Name, v); err != nil {
				envErr = usageError{fmt.Sprintf("%s: %v", name, err)}
			}
		}
	})
	if envErr != nil {
		return envErr
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageError{fmt.Sprintf("unexpected arguments: %s", strings.Join(fs.Args(), " "))}
	}
	return nil
}
