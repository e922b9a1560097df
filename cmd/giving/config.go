package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"strings"

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
	fs.StringVar(&f.memory, "memory", "512MiB", "memory the process may use (Go runtime soft limit, embedded NATS memory store); 0 for no limit")
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
	return eventlog.Config{Env: env, DataDir: f.data, NATSURL: f.natsURL, NATSListen: f.natsListen, Replicas: f.replicas, Memory: memory}, nil
}

// parseMemory reads a --memory setting.
func parseMemory(s string) (int64, error) {
	memory, err := humanize.ParseBytes(s)
	if err != nil || (memory != 0 && memory < 64<<20) {
		return 0, usageError{"--memory must be a size of at least 64MiB, such as 512MiB or 2GiB, or 0 for no limit"}
	}
	return int64(memory), nil
}

// limitMemory sets the Go runtime's soft memory limit to the configured
// memory: the garbage collector works harder as the process nears it, so
// memory is bounded by the setting, not by the ledger's length.
func limitMemory(cfg eventlog.Config) {
	if cfg.Memory > 0 {
		debug.SetMemoryLimit(cfg.Memory)
	}
}

// parseFlags parses args, taking any flag not given on the command line from
// its GIVING_* environment variable (--nats-url from GIVING_NATS_URL).
func parseFlags(fs *flag.FlagSet, args []string, stderr io.Writer) error {
	fs.SetOutput(stderr)
	var envErr error
	fs.VisitAll(func(fl *flag.Flag) {
		name := "GIVING_" + strings.ToUpper(strings.ReplaceAll(fl.Name, "-", "_"))
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
