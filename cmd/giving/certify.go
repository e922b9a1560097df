package main

import (
	"context"
	"errors"
	"flag"
	"io"
	"time"

	"github.com/partnergiving/giving/certify"
)

// runCertify runs the spec's certification sequence against a sandbox
// (package certify) and exits non-zero when a step fails.
func runCertify(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("giving certify", flag.ContinueOnError)
	var o certify.Options
	fs.StringVar(&o.BaseURL, "base-url", "", "the sandbox's base URL (required)")
	fs.StringVar(&o.APIKey, "api-key", "", "a sandbox API key, sk_test_... (required)")
	fs.StringVar(&o.WebhookListen, "webhook-listen", "127.0.0.1:0", "address the local webhook receiver listens on")
	fs.StringVar(&o.WebhookURL, "webhook-url", "", "URL the sandbox reaches the receiver at (default http://<webhook-listen>/webhooks)")
	fs.StringVar(&o.RedirectURL, "redirect-url", "https://localhost/certified", "redirect_url for the donor session; must be on the partner's allowlisted origins")
	fs.DurationVar(&o.Timeout, "timeout", 60*time.Second, "how long to wait for each webhook")
	if err := parseFlags(fs, args, stderr); err != nil {
		return err
	}
	if err := o.Check(); err != nil {
		return usageError{err.Error()}
	}
	passed, err := certify.Run(ctx, o, stdout)
	if err != nil {
		return err
	}
	if !passed {
		return errors.New("certification failed")
	}
	return nil
}
