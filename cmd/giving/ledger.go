package main

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"time"

	"github.com/partnergiving/giving/eventlog"
)

// openLedgerCLI reaches the ledger for an operator command: the configured
// cluster, else a running instance's embedded server on --nats-listen (with
// the token kept in the data directory it serves), else the data directory
// directly (starting NATS in this process).
func openLedgerCLI(ctx context.Context, f *ledgerFlags) (*eventlog.Ledger, string, error) {
	cfg, err := f.config()
	if err != nil {
		return nil, "", err
	}
	if cfg.NATSURL != "" {
		l, err := eventlog.Open(ctx, cfg)
		return l, "cluster " + eventlog.RedactURL(cfg.NATSURL), err
	}
	if cfg.NATSListen != "" {
		if conn, err := net.DialTimeout("tcp", cfg.NATSListen, 300*time.Millisecond); err == nil {
			conn.Close()
			at := "running instance at nats://" + cfg.NATSListen
			token, err := eventlog.NATSToken(cfg.DataDir)
			if err != nil {
				return nil, "", fmt.Errorf("%s: %w (does it serve --data %s?)", at, err, cfg.DataDir)
			}
			cfg.NATSURL = (&url.URL{Scheme: "nats", User: url.User(token), Host: cfg.NATSListen}).String()
			l, err := eventlog.Open(ctx, cfg)
			if err != nil {
				return nil, "", fmt.Errorf("%s: %w (does it serve --data %s?)", at, err, cfg.DataDir)
			}
			return l, at, nil
		}
	}
	cfg.NATSListen = ""
	l, err := eventlog.Open(ctx, cfg)
	if err != nil {
		return nil, "", fmt.Errorf("%w (is another process using %s?)", err, cfg.DataDir)
	}
	return l, "data directory " + cfg.DataDir, nil
}
