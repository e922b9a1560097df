package main

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"time"

	"github.com/partnergiving/giving/domain"
	"github.com/partnergiving/giving/eventlog"
)

// Operator commands. They go straight to the ledger through the command
// helper, loading each aggregate from the ledger itself, so they work the
// same whether a server is running (reached over NATS) or not (the CLI runs
// the embedded server on the data directory itself).

func loadPartner(h eventlog.History) domain.Partner {
	var p domain.Partner
	for _, e := range h.Events {
		p.Apply(e)
	}
	return p
}

// createPartner onboards a partner and issues its first key.
func createPartner(ctx context.Context, l *eventlog.Ledger, name string, origins []string) (string, domain.NewKey, error) {
	id := domain.NewID(domain.PrefixPartner)
	_, err := l.Execute(ctx, eventlog.Command{
		Partner: id, Aggregate: id,
		Decide: func(_ context.Context, h eventlog.History) (*domain.Event, error) {
			p := loadPartner(h)
			ev, err := domain.CreatePartner(&p, id, name, l.Env(), origins, time.Now())
			return &ev, err
		},
	})
	if err != nil {
		return "", domain.NewKey{}, err
	}
	key, err := issueKey(ctx, l, id)
	return id, key, err
}

// issueKey adds a key to an existing partner of this stack.
func issueKey(ctx context.Context, l *eventlog.Ledger, partnerID string) (domain.NewKey, error) {
	if !domain.ValidID(domain.PrefixPartner, partnerID) {
		return domain.NewKey{}, domain.NotFound("partner", partnerID)
	}
	key := domain.GenerateKey(l.Env())
	_, err := l.Execute(ctx, eventlog.Command{
		Partner: partnerID, Aggregate: partnerID,
		Decide: func(_ context.Context, h eventlog.History) (*domain.Event, error) {
			p := loadPartner(h)
			if !p.Exists() {
				return nil, domain.NotFound("partner", partnerID)
			}
			ev, err := domain.IssueKey(&p, key, time.Now())
			return &ev, err
		},
	})
	return key, err
}

// revokeKey finds the key shown as prefix and revokes it.
func revokeKey(ctx context.Context, l *eventlog.Ledger, prefix string) (string, error) {
	partnerID, keyID, err := findKey(ctx, l, prefix)
	if err != nil {
		return "", err
	}
	_, err = l.Execute(ctx, eventlog.Command{
		Partner: partnerID, Aggregate: partnerID,
		Decide: func(_ context.Context, h eventlog.History) (*domain.Event, error) {
			p := loadPartner(h)
			ev, err := domain.RevokeKey(&p, keyID, time.Now())
			return &ev, err
		},
	})
	return partnerID, err
}

// findKey scans the ledger's key issuances for prefix. Only key events are
// read: the filter is applied by the server.
func findKey(ctx context.Context, l *eventlog.Ledger, prefix string) (partnerID, keyID string, err error) {
	var after uint64
	for {
		recs, pending, err := l.Read(ctx, l.Subjects().OfType("partner.key_issued"), after, 1000)
		if err != nil {
			return "", "", err
		}
		for _, r := range recs {
			ev, err := r.Event()
			if err != nil {
				return "", "", err
			}
			if k := ev.Payload.(*domain.KeyIssued); k.Prefix == prefix {
				return ev.PartnerID, k.KeyID, nil
			}
			after = r.Seq
		}
		if pending == 0 || len(recs) == 0 {
			return "", "", domain.Errorf(domain.KindNotFound, "not-found", "No key with prefix %q on the %s stack.", prefix, l.Env())
		}
	}
}

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
