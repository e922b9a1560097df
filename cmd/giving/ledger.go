package main

import (
	"context"
	"fmt"
	"net/url"

	"github.com/partnergiving/giving/eventlog"
)

// openLedgerCLI reaches the ledger for an operator command: the configured
// cluster; else, when an instance has the data directory open (its lock is
// held), that instance's embedded server at the address it recorded there,
// with the directory's token; else the data directory itself (starting NATS
// in this process). It never guesses from who answers on a port.
func openLedgerCLI(ctx context.Context, f *ledgerFlags) (*eventlog.Ledger, string, error) {
	cfg, err := f.config()
	if err != nil {
		return nil, "", err
	}
	if cfg.NATSURL != "" {
		l, err := eventlog.Open(ctx, cfg)
		return l, "cluster " + eventlog.RedactURL(cfg.NATSURL), err
	}
	cfg.NATSListen = ""
	inst, err := eventlog.RunningInstance(cfg.DataDir)
	if err != nil {
		return nil, "", err
	}
	if inst == nil {
		l, err := eventlog.Open(ctx, cfg)
		return l, "data directory " + cfg.DataDir, err
	}
	at := fmt.Sprintf("running instance at nats://%s (pid %d, data directory %s)", inst.NATS, inst.PID, cfg.DataDir)
	token, err := eventlog.NATSToken(cfg.DataDir)
	if err != nil {
		return nil, "", fmt.Errorf("%s: %w", at, err)
	}
	cfg.NATSURL = (&url.URL{Scheme: "nats", User: url.User(token), Host: inst.NATS}).String()
	l, err := eventlog.Open(ctx, cfg)
	if err != nil {
		return nil, "", fmt.Errorf("%s: %w", at, err)
	}
	return l, at, nil
}
