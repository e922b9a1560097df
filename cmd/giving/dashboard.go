package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/partnergiving/giving/sandbox"
)

// runDashboard asks a running service for a sign-in link to the partner's
// dashboard (POST /v1/dashboard_sessions) and prints it, for operators and
// partners who prefer the command line to an API call.
func runDashboard(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("giving dashboard", flag.ContinueOnError)
	base := fs.String("base-url", "http://127.0.0.1:8080", "the service's base URL")
	key := fs.String("api-key", "", "the partner's API key, sk_test_... or sk_live_... (required); the dashboard acts as this key")
	if err := parseFlags(fs, args, stderr); err != nil {
		return err
	}
	if !strings.HasPrefix(*key, "sk_test_") && !strings.HasPrefix(*key, "sk_live_") {
		return usageError{"--api-key must be the partner's API key (sk_test_... or sk_live_...)"}
	}
	api, err := sandbox.NewClient(*base, *key)
	if err != nil {
		return usageError{"--base-url: " + err.Error()}
	}
	var link struct {
		URL       string `json:"url"`
		ExpiresAt string `json:"expires_at"`
	}
	if err := api.CallJSON(ctx, http.MethodPost, "/v1/dashboard_sessions", struct{}{}, http.StatusCreated, &link); err != nil {
		return err
	}
	fmt.Fprintln(stdout, link.URL)
	fmt.Fprintf(stderr, "Open it in a browser before %s (once); the session lasts 8 hours, or until the key is revoked.\n", link.ExpiresAt)
	return nil
}
