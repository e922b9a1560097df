package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"github.com/partnergiving/giving/domain"
	"github.com/partnergiving/giving/eventlog"
	"github.com/partnergiving/giving/httpapi"
	"github.com/partnergiving/giving/internal/stack"
)

// serveFlags configure "giving serve".
type serveFlags struct {
	ledger    ledgerFlags
	addr      string
	publicURL string
	demo      bool
	rate      int
	burst     int
	logLevel  string
	tlsCert   string
	tlsKey    string
	increase  increaseFlags
	twilio    twilioFlags
	truv      truvFlags
	stripe    stripeFlags
	webhooks  webhookFlags
	telemetry telemetryFlags
	timeouts  timeoutFlags
	// frameAncestors is who may frame the partner dashboard.
	frameAncestors string
}

func (f *serveFlags) register(fs *flag.FlagSet) {
	f.ledger.register(fs)
	fs.StringVar(&f.ledger.natsListen, "nats-listen", defaultNATSListen, "loopback address the embedded NATS also listens on for operator commands, recorded in the data directory (empty: none)")
	fs.StringVar(&f.addr, "addr", "127.0.0.1:8080", "HTTP listen address")
	fs.StringVar(&f.publicURL, "public-url", "", "address partners and donors reach the service at (default http://<addr>)")
	fs.BoolVar(&f.demo, "demo", false, "sandbox only: create a demo partner once and print a fresh key and a dashboard sign-in link for it")
	fs.IntVar(&f.rate, "rate-limit", 25, "requests per second per API key (token refill rate)")
	fs.IntVar(&f.burst, "rate-burst", 50, "requests an API key may send at once (bucket size)")
	fs.StringVar(&f.logLevel, "log-level", "info", "log level: debug, info, warn, error")
	fs.StringVar(&f.tlsCert, "tls-cert", "", "serve https with this PEM certificate (with --tls-key)")
	fs.StringVar(&f.tlsKey, "tls-key", "", "PEM private key for --tls-cert")
	fs.StringVar(&f.frameAncestors, "dashboard-frame-ancestors", httpapi.DefaultFrameAncestors,
		"who may show the partner dashboard in a frame: a CSP frame-ancestors source list, such as 'self' or https://admin.partner.example")
	f.twilio.register(fs)
	f.truv.register(fs)
	f.stripe.register(fs)
	f.increase.register(fs)
	f.webhooks.register(fs)
	f.telemetry.register(fs)
	f.timeouts.register(fs)
}

// missingForProduction lists every production setting that is not set,
// each as its flag and its variable, so that one start names them all.
// The sandbox needs none of them: it sends no text message, and its vendor
// secrets are derived from the master key.
func (f *serveFlags) missingForProduction() []string {
	var missing []string
	need := func(flag, value string) {
		switch {
		case strings.TrimSpace(value) == "":
			missing = append(missing, "--"+flag+" ("+envName(flag)+")")
		case strings.Contains(value, "CHANGE-ME"):
			missing = append(missing, "--"+flag+" ("+envName(flag)+", still the example's CHANGE-ME)")
		}
	}
	need("public-url", f.publicURL)
	if u := f.publicURL; u != "" && !strings.HasPrefix(u, "https://") {
		// Donors' browsers, Stripe's return and every vendor's webhook
		// reach the service there.
		missing = append(missing, "--public-url ("+envName("public-url")+", must be https)")
	}
	need("twilio-account-sid", f.twilio.cfg.AccountSID)
	need("twilio-auth-token", f.twilio.cfg.AuthToken)
	need("twilio-service-sid", f.twilio.cfg.ServiceSID)
	need("truv-client-id", f.truv.cfg.ClientID)
	need("truv-secret", f.truv.cfg.Secret)
	need("stripe-secret-key", f.stripe.cfg.SecretKey)
	if key := f.stripe.cfg.SecretKey; strings.HasPrefix(key, "sk_test_") || strings.HasPrefix(key, "rk_test_") {
		// A test-mode key passes every donor who shows Stripe's test
		// documents: production verifies real people or nobody.
		missing = append(missing, "--stripe-secret-key ("+envName("stripe-secret-key")+", a test-mode key: production needs sk_live_ or rk_live_)")
	}
	need("stripe-webhook-secret", f.stripe.webhookSecret)
	f.increase.need(need)
	if f.ledger.natsURL != "" {
		// Instances on a cluster share one master key: one generated into
		// each data directory would seal what the others cannot open.
		need("master-key", f.ledger.masterKey)
	}
	return missing
}

// tls loads the certificate pair, and the pool the simulators use to trust
// it, when https is configured.
func (f *serveFlags) tls() (bool, *x509.CertPool, error) {
	if f.tlsCert == "" && f.tlsKey == "" {
		return false, nil, nil
	}
	if f.tlsCert == "" || f.tlsKey == "" {
		return false, nil, usageError{"--tls-cert and --tls-key go together"}
	}
	if _, err := tls.LoadX509KeyPair(f.tlsCert, f.tlsKey); err != nil {
		return false, nil, fmt.Errorf("tls: %w", err)
	}
	pem, err := os.ReadFile(f.tlsCert)
	if err != nil {
		return false, nil, fmt.Errorf("tls: %w", err)
	}
	roots, err := x509.SystemCertPool()
	if err != nil {
		roots = x509.NewCertPool()
	}
	roots.AppendCertsFromPEM(pem)
	return true, roots, nil
}

func runServe(ctx context.Context, args []string, stdout, stderr io.Writer) (err error) {
	fs := flag.NewFlagSet("giving serve", flag.ContinueOnError)
	var f serveFlags
	f.register(fs)
	if err := parseFlags(fs, args, stderr); err != nil {
		return err
	}
	level, err := zerolog.ParseLevel(f.logLevel)
	if err != nil {
		return usageError{"--log-level: " + err.Error()}
	}
	log := zerolog.New(stderr).Level(level).With().Timestamp().Logger()
	lcfg, err := f.ledger.config()
	if err != nil {
		return err
	}
	limitMemory(lcfg)
	hooks, err := f.webhooks.config()
	if err != nil {
		return err
	}
	if err := f.timeouts.check(); err != nil {
		return err
	}
	if err := httpapi.CheckFrameAncestors(f.frameAncestors); err != nil {
		return usageError{"--dashboard-frame-ancestors: " + err.Error()}
	}
	if f.demo && lcfg.Env != domain.Sandbox {
		return usageError{"--demo works only on the sandbox stack"}
	}
	if lcfg.Env == domain.Production {
		if missing := f.missingForProduction(); len(missing) > 0 {
			return usageError{"the production stack needs these settings, which are not set: " + strings.Join(missing, ", ") +
				" (each as a flag or its GIVING_* variable; deploy/systemd/giving.env.example names them all)"}
		}
	}
	useTLS, roots, err := f.tls()
	if err != nil {
		return err
	}
	verifier, err := f.twilio.verifier(lcfg.Env)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", f.addr)
	if err != nil {
		return fmt.Errorf("listen %s: %w", f.addr, err)
	}
	defer ln.Close()
	metricsLn, err := f.telemetry.listen()
	if err != nil {
		return err
	}
	scheme := "http://"
	if useTLS {
		scheme = "https://"
	}
	listening := scheme + ln.Addr().String()
	public := f.publicURL
	if public == "" {
		public = listening
	}
	scfg := stack.Config{
		Ledger: lcfg, MasterKey: f.ledger.masterKey, PublicURL: public,
		RateLimit: httpapi.RateLimit{PerSecond: f.rate, Burst: f.burst}, Log: log, TLSRoots: roots, SMS: verifier,
		Vendors: httpapi.VendorSecrets{Bank: []byte(f.increase.webhookSecret), KYC: []byte(f.stripe.webhookSecret)},
		Truv:    f.truv.cfg, Increase: f.increase.cfg, Stripe: f.stripe.cfg,
		Webhooks: hooks, RequestLease: f.timeouts.lease, FrameAncestors: f.frameAncestors,
	}
	flushTraces, err := startTracing(ctx, string(lcfg.Env), stack.InstanceName(scfg), log)
	if err != nil {
		return err
	}
	defer flushTraces()
	st, err := stack.Open(ctx, scfg)
	if err != nil {
		return err
	}
	// Metrics are up while the projections catch up, so the lag shows.
	defer f.telemetry.serveMetrics(metricsLn, st.Metrics, stdout, log)()
	// The stack closes once, whichever way serving ends: after HTTP has
	// drained, before the metrics listener stops.
	defer func() { err = errors.Join(err, st.Close()) }()
	if err := st.Start(ctx); err != nil {
		return err
	}
	srv := stack.HTTPServer(st.API.Handler(), f.timeouts.http)
	srv.RegisterOnShutdown(st.API.EndLongPolls)
	errc := make(chan error, 1)
	go func() {
		if useTLS {
			errc <- srv.ServeTLS(ln, f.tlsCert, f.tlsKey)
			return
		}
		errc <- srv.Serve(st.API.Listener(ln))
	}()

	fmt.Fprintf(stdout, "Partner Giving %s stack listening on %s\n", lcfg.Env, listening)
	if public != listening {
		fmt.Fprintf(stdout, "public URL (donors, partners and vendors reach it there): %s\n", public)
	}
	if url := st.Ledger.ClientURL(); st.Ledger.Embedded() && url != "" {
		fmt.Fprintf(stdout, "embedded NATS for operator commands: %s (token in %s)\n",
			eventlog.RedactURL(url), filepath.Join(f.ledger.data, eventlog.NATSTokenFile))
	}
	if f.demo {
		if err := printDemo(ctx, st, f.ledger.data, public, stdout); err != nil {
			return err
		}
	}
	log.Info().Str("env", string(lcfg.Env)).Str("addr", ln.Addr().String()).Msg("serving")

	select {
	case err := <-errc:
		return fmt.Errorf("http: %w", err)
	case <-ctx.Done():
	}
	// Drain HTTP first, then stop the projector and NATS (stack.Close,
	// deferred above).
	log.Info().Msg("shutting down")
	shutCtx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutCtx); err != nil && !errors.Is(err, http.ErrServerClosed) {
		log.Error().Err(err).Msg("http shutdown")
	}
	return nil
}
