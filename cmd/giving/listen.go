package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net/url"
	"strings"
	"time"

	"github.com/partnergiving/giving/domain"
	"github.com/partnergiving/giving/listen"
)

// runListen forwards the partner's events to a local receiver, signed like
// real deliveries, from the pull feed (package listen): webhooks on a
// developer's machine without a tunnel.
func runListen(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("giving listen", flag.ContinueOnError)
	var cfg listen.Config
	fs.StringVar(&cfg.BaseURL, "base-url", "", "the service's base URL, e.g. http://127.0.0.1:8080 (required)")
	fs.StringVar(&cfg.APIKey, "api-key", "", "the partner's API key (required)")
	fs.StringVar(&cfg.ForwardTo, "forward-to", "", "local address to POST each event to, e.g. http://localhost:3000/hooks (required)")
	events := fs.String("events", "", "event types to forward, comma-separated (default: every type)")
	fs.StringVar(&cfg.StateDir, "state-dir", listen.DefaultStateDir(), "directory of the state files (the local secret and feed position, per API key and base URL)")
	fs.BoolVar(&cfg.FromStart, "from-start", false, "forward the whole feed from its first event, instead of the events after this start")
	rotate := fs.Int("rotate-secret", -1, "replace the local signing secret with a new one at start; the previous one signs beside it for this many seconds (0 to 604800), as an endpoint's does after POST /v1/webhook_endpoints/{id}/rotate_secret")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: giving listen --base-url URL --api-key sk_test_... --forward-to http://localhost:3000/hooks [flags]")
		fs.PrintDefaults()
	}
	if err := parseFlags(fs, args, stderr); err != nil {
		return err
	}
	for name, v := range map[string]string{"--base-url": cfg.BaseURL, "--forward-to": cfg.ForwardTo} {
		if u, err := url.Parse(v); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return usageError{name + " must be an absolute http(s) URL"}
		}
	}
	if *rotate < -1 || *rotate > int(domain.MaxOverlap/time.Second) {
		return usageError{"--rotate-secret must be 0 to 604800 seconds"}
	}
	cfg.RotateSecret, cfg.Overlap = *rotate >= 0, time.Duration(*rotate)*time.Second
	if !strings.HasPrefix(cfg.APIKey, "sk_") {
		return usageError{"--api-key must be the partner's API key (sk_test_... or sk_live_...)"}
	}
	if *events != "" {
		for _, t := range strings.Split(*events, ",") {
			cfg.Events = append(cfg.Events, strings.TrimSpace(t))
		}
	}
	cfg.Out = stdout
	return listen.Run(ctx, cfg)
}
