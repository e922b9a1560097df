package httpapi

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/gorilla/mux"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/partnergiving/giving/domain"
	"github.com/partnergiving/giving/eventlog"
	"github.com/partnergiving/giving/httpapi/sms"
	"github.com/partnergiving/giving/projections"
	"github.com/partnergiving/giving/simulators"
)

// Config is what the HTTP layer needs to know about its deployment.
type Config struct {
	Env domain.Environment
	// PublicURL is the address partners and donors reach the service at.
	PublicURL string
	RateLimit RateLimit
	// Vendors are the inbound webhook signing secrets (the sandbox stack's
	// own on the sandbox).
	Vendors VendorSecrets
	Log     zerolog.Logger
	// Now is the clock; nil means time.Now. Tests move it forward to
	// expire sessions and codes without waiting.
	Now func() time.Time
}

// Deps are the parts the HTTP layer works with.
type Deps struct {
	Ledger      *eventlog.Ledger
	Store       *projections.Store
	Projector   *projections.Projector
	Idempotency *eventlog.Idempotency
	RateLimits  *eventlog.RateLimits
	Secrets     *eventlog.Secrets
	Vault       *eventlog.Vault
	// VendorEvents remembers the vendor events the edge has handled.
	VendorEvents *eventlog.SeenSet
	// Simulator plays the sandbox vendors; nil on the production stack,
	// where /sandbox is never mounted.
	Simulator *simulators.Simulator
	// SMS verifies donor phones in the hosted flow.
	SMS sms.Verifier
	// Webhooks and Attempts serve the webhook endpoint routes.
	Webhooks Webhooks
	Attempts *eventlog.AttemptLog
}

// Server serves the API.
type Server struct {
	cfg       Config
	log       zerolog.Logger
	ledger    *eventlog.Ledger
	store     *projections.Store
	projector *projections.Projector
	idem      *eventlog.Idempotency
	limiter   *limiter
	cursors   eventlog.Cursors
	vault     *eventlog.Vault
	simulator *simulators.Simulator
	// vendorEvents holds the ids of vendor webhooks fully handled.
	vendorEvents *eventlog.SeenSet
	flowKey      []byte
	csrfKey      []byte
	fpKey        []byte
	sms          sms.Verifier
	router       *mux.Router
	polls        longPolls

	webhooks    Webhooks
	attempts    *eventlog.AttemptLog
	webhookSeal *eventlog.Sealer
}

// New builds the server and its routes.
func New(cfg Config, d Deps) (*Server, error) {
	lim, err := newLimiter(d.RateLimits, cfg.RateLimit)
	if err != nil {
		return nil, err
	}
	cfg.PublicURL = strings.TrimRight(cfg.PublicURL, "/")
	s := &Server{
		cfg: cfg, log: cfg.Log, ledger: d.Ledger, store: d.Store, projector: d.Projector,
		idem: d.Idempotency, limiter: lim, cursors: eventlog.NewCursors(d.Secrets),
		vault: d.Vault, simulator: d.Simulator, vendorEvents: d.VendorEvents, flowKey: d.Secrets.Key("flow-token"),
		csrfKey: d.Secrets.Key("flow-csrf"), fpKey: d.Secrets.Key("idempotency-fingerprint"), sms: d.SMS,
	}
	if s.cfg.Now == nil {
		s.cfg.Now = time.Now
	}
	if s.sms == nil {
		return nil, errors.New("httpapi: no SMS verifier")
	}
	s.webhooks, s.attempts, s.webhookSeal = d.Webhooks, d.Attempts, d.Secrets.Sealer(eventlog.WebhookSecretPurpose)
	s.routes()
	return s, nil
}

// now is the server's clock.
func (s *Server) now() time.Time { return s.cfg.Now() }

// Handler is the root handler.
func (s *Server) Handler() http.Handler { return s.observe(s.router) }

func (s *Server) routes() {
	r := mux.NewRouter()
	r.Use(routeName)
	notFound := http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		writeProblem(w, req, ProblemNotFound, "No route matches "+req.Method+" "+req.URL.EscapedPath()+".", nil)
	})
	r.NotFoundHandler, r.MethodNotAllowedHandler = notFound, http.HandlerFunc(s.methodNotAllowed)

	r.HandleFunc("/healthz", s.healthz).Methods(http.MethodGet)
	r.HandleFunc("/readyz", s.readyz).Methods(http.MethodGet)
	r.HandleFunc("/openapi.yaml", serveOpenAPIYAML).Methods(http.MethodGet)
	r.HandleFunc("/openapi.json", serveOpenAPIJSON).Methods(http.MethodGet)
	r.HandleFunc("/problems", serveProblemIndex).Methods(http.MethodGet)
	r.HandleFunc("/problems/{slug}", serveProblem).Methods(http.MethodGet)

	partner := func(method, path string, h http.HandlerFunc) {
		r.Handle(path, s.partnerChain(method, h)).Methods(method)
	}
	partner(http.MethodPost, "/v1/churches/import", s.importChurches)
	partner(http.MethodGet, "/v1/churches", s.listChurches)
	partner(http.MethodGet, "/v1/churches/{id}", s.getChurch)
	partner(http.MethodGet, "/v1/events", s.listEvents)
	partner(http.MethodPost, "/v1/donor_sessions", s.createSession)
	partner(http.MethodGet, "/v1/donor_sessions/{id}", s.getSession)
	partner(http.MethodGet, "/v1/enrollments", s.listEnrollments)
	partner(http.MethodGet, "/v1/enrollments/{id}", s.getEnrollment)
	for _, v := range vendorRoutes {
		r.HandleFunc("/edge/"+v.kind, s.edge(v)).Methods(http.MethodPost)
	}
	// The simulators exist only on the sandbox stack; in production every
	// /sandbox path is an ordinary 404.
	if s.cfg.Env == domain.Sandbox && s.simulator != nil {
		partner(http.MethodPost, "/sandbox/simulate/payroll-connected", s.simulatePayroll)
		partner(http.MethodPost, "/sandbox/simulate/deposit", s.simulateDeposit)
		partner(http.MethodPost, "/sandbox/simulate/kyc", s.simulateKYC)
	}
	s.flowRoutes(r)
	partner(http.MethodPost, "/v1/webhook_endpoints", s.createWebhookEndpoint)
	partner(http.MethodGet, "/v1/webhook_endpoints", s.listWebhookEndpoints)
	partner(http.MethodGet, "/v1/webhook_endpoints/{id}", s.getWebhookEndpoint)
	partner(http.MethodDelete, "/v1/webhook_endpoints/{id}", s.deleteWebhookEndpoint)
	partner(http.MethodPost, "/v1/webhook_endpoints/{id}/test", s.testWebhookEndpoint)
	partner(http.MethodGet, "/v1/webhook_endpoints/{id}/deliveries", s.listDeliveries)
	s.router = r
}

// partnerChain is the middleware every /v1 and /sandbox route runs:
// authentication, then the key's rate limit, then for POSTs the
// Idempotency-Key contract. Routes are registered on the root router, not a
// subrouter, so that a wrong method is a 405 rather than a 404.
func (s *Server) partnerChain(method string, h http.Handler) http.Handler {
	if method == http.MethodPost {
		h = s.idempotent(h)
	}
	return s.authenticate(s.rateLimit(h))
}

// methodNotAllowed answers 405 with the Allow header listing what the path
// does take.
func (s *Server) methodNotAllowed(w http.ResponseWriter, r *http.Request) {
	var allowed []string
	for _, m := range []string{http.MethodGet, http.MethodPost, http.MethodDelete} {
		probe := r.Clone(r.Context())
		probe.Method = m
		var match mux.RouteMatch
		if s.router.Match(probe, &match) && match.MatchErr == nil {
			allowed = append(allowed, m)
		}
	}
	w.Header().Set("Allow", strings.Join(allowed, ", "))
	writeProblem(w, r, ProblemMethodNotAllowed, r.Method+" is not allowed here; use "+strings.Join(allowed, " or ")+".", nil)
}

// readWait bounds how long a handler waits for the local projections to show
// its own write.
const readWait = 5 * time.Second

// execute runs a command for this request. Under an Idempotency-Key the
// command's dedup id comes from the key, and after a crash takeover the
// command first looks for what the dead request already appended.
func (s *Server) execute(r *http.Request, n int, cmd eventlog.Command) (eventlog.Outcome, error) {
	if c := claimFrom(r.Context()); c != nil {
		cmd.MsgID = c.MsgID(n)
		if c.Takeover {
			cmd.Recall = s.recall
		}
	}
	return s.run(r.Context(), cmd)
}

// run executes a command and, when it appended, waits until the local
// projections have applied the event, so the answer and any read that
// follows on this instance see the write. Every entry point of the HTTP
// layer (the API, the flow, the vendor edge, the sweeper) writes through it.
func (s *Server) run(ctx context.Context, cmd eventlog.Command) (eventlog.Outcome, error) {
	out, err := s.ledger.Execute(ctx, cmd)
	if err != nil || out.Record == nil {
		return out, err
	}
	return out, s.waitApplied(ctx, out.Record.Seq)
}

// waitApplied waits, bounded, until the local projections reach seq.
func (s *Server) waitApplied(ctx context.Context, seq uint64) error {
	ctx, cancel := context.WithTimeout(ctx, readWait)
	defer cancel()
	if err := s.store.WaitFor(ctx, seq); err != nil {
		return fmt.Errorf("read your write: %w", err)
	}
	return nil
}

// recall finds the event an earlier run of a command appended, once the
// projections have caught up with the ledger.
func (s *Server) recall(ctx context.Context, msgID string) (eventlog.Record, bool, error) {
	wctx, cancel := context.WithTimeout(ctx, readWait)
	defer cancel()
	if err := s.projector.CatchUp(wctx); err != nil {
		return eventlog.Record{}, false, err
	}
	seq, ok, err := s.store.CommandSeq(msgID)
	if err != nil || !ok {
		return eventlog.Record{}, false, err
	}
	rec, err := s.ledger.Get(ctx, seq)
	return rec, err == nil, err
}

// isUnavailable recognises failures to reach the ledger, and commands that
// kept losing the race for their aggregate, which deserve a 503 (retry
// later, and the Idempotency-Key is released) rather than a 500.
func isUnavailable(err error) bool {
	return errors.Is(err, eventlog.ErrConflict) || errors.Is(err, nats.ErrConnectionClosed) || errors.Is(err, nats.ErrNoResponders) ||
		errors.Is(err, nats.ErrTimeout) || errors.Is(err, jetstream.ErrNoStreamResponse) ||
		errors.Is(err, context.DeadlineExceeded) || errors.Is(err, nats.ErrDisconnected)
}

func (s *Server) healthz(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

// readyz reports ready when the ledger answers and the projections have
// caught up with it.
func (s *Server) readyz(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
	defer cancel()
	last, err := s.ledger.LastSeq(ctx)
	if err != nil {
		w.Header().Set("Retry-After", "1")
		writeProblem(w, r, ProblemUnavailable, "The ledger does not answer.", nil)
		return
	}
	if err := s.store.WaitFor(ctx, last); err != nil {
		w.Header().Set("Retry-After", "1")
		writeProblem(w, r, ProblemUnavailable, fmt.Sprintf("Projections are catching up (%d of %d).", s.store.Applied(), last), nil)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"status": "ready", "ledger_seq": last, "applied_seq": s.store.Applied()})
}

// VendorSecrets are the inbound webhook secrets in use, for operators and
// tests that sign vendor webhooks.
func (s *Server) VendorSecrets() VendorSecrets { return s.cfg.Vendors }
