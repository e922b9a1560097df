package httpapi

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/gorilla/mux"
	"github.com/rs/zerolog"

	"github.com/partnergiving/giving/app"
	"github.com/partnergiving/giving/domain"
	"github.com/partnergiving/giving/projections"
	"github.com/partnergiving/giving/telemetry"
	"github.com/partnergiving/giving/vendors/increase"
)

// Config is what the HTTP layer needs to know about its deployment.
type Config struct {
	RateLimit RateLimit
	// Vendors are the inbound webhook signing secrets (the sandbox stack's
	// own on the sandbox).
	Vendors VendorSecrets
	// BankTransfers is where the bank edge reads the transfer an Increase
	// webhook names: Increase's API in production, the sandbox's own
	// Increase on the sandbox.
	BankTransfers increase.Transfers
	// Keys are the transport's own secrets, derived from the master key.
	Keys Keys
	Log  zerolog.Logger
	// Metrics records requests, rate-limit rejections, replays and vendor
	// webhooks; nil records nothing.
	Metrics *telemetry.Metrics
	// FrameAncestors is the dashboard's CSP frame-ancestors source list:
	// who may embed it in a frame (empty: nobody, 'none').
	FrameAncestors string
	// StandIns are the sandbox's built-in vendors' browser pages (a
	// payroll widget, an identity check), each served under
	// /standin/<name>/; none on the production stack.
	StandIns map[string]http.Handler
}

// Keys are the HTTP layer's secrets. Instances sharing a ledger share them,
// so a cursor or a form made by one is good on every other.
type Keys struct {
	// Cursor authenticates list cursors.
	Cursor []byte
	// CSRF binds hosted-flow forms to the browser's binding secret.
	CSRF []byte
	// Fingerprint keys the hash of an idempotent request's body.
	Fingerprint []byte
}

// Deps are the parts the HTTP layer works with.
type Deps struct {
	// App runs the use cases.
	App *app.Service
	// Store answers the reads (churches, sessions, enrollments, endpoints,
	// API keys) from the local projections.
	Store *projections.Store
	// Instances counts the instances that share each key's rate budget.
	Instances Instances
}

// Server serves the API.
type Server struct {
	cfg     Config
	log     zerolog.Logger
	app     *app.Service
	store   *projections.Store
	limiter *limiter
	cursors domain.Cursors
	router  *mux.Router

	// refusals logs rate-limit refusals, sampled.
	refusals zerolog.Logger
}

// New builds the server and its routes.
func New(cfg Config, d Deps) (*Server, error) {
	lim, err := newLimiter(cfg.RateLimit, d.Instances)
	if err != nil {
		return nil, err
	}
	s := &Server{cfg: cfg, log: cfg.Log, app: d.App, store: d.Store, limiter: lim, cursors: domain.NewCursors(cfg.Keys.Cursor)}
	s.refusals = refusalLog(cfg.Log)
	s.routes()
	return s, nil
}

// now is the server's clock.
func (s *Server) now() time.Time { return s.app.Now() }

// Handler is the root handler.
func (s *Server) Handler() http.Handler { return s.observe(s.router) }

func (s *Server) routes() {
	r := mux.NewRouter()
	r.Use(routeName)
	notFound := http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		writeProblem(w, req, domain.ProblemNotFound, "No route matches "+req.Method+" "+req.URL.EscapedPath()+".", nil)
	})
	r.NotFoundHandler, r.MethodNotAllowedHandler = notFound, http.HandlerFunc(s.methodNotAllowed)

	r.HandleFunc("/healthz", s.healthz).Methods(http.MethodGet)
	r.HandleFunc("/readyz", s.readyz).Methods(http.MethodGet)
	r.HandleFunc("/openapi.yaml", serveOpenAPIYAML).Methods(http.MethodGet)
	r.HandleFunc("/openapi.json", serveOpenAPIJSON).Methods(http.MethodGet)
	r.HandleFunc("/problems", serveProblemIndex).Methods(http.MethodGet)
	r.HandleFunc("/problems/{slug}", serveProblem).Methods(http.MethodGet)
	r.HandleFunc("/docs", serveDocs).Methods(http.MethodGet)
	r.HandleFunc("/", serveRoot)

	partner := func(method, path string, h http.HandlerFunc) {
		r.Handle(path, s.partnerChain(h)).Methods(method)
	}
	// write registers a POST or PATCH: it runs under its Idempotency-Key.
	write := func(method, path string, h claimedHandler) {
		r.Handle(path, s.partnerChain(s.idempotent(h))).Methods(method)
	}
	write(http.MethodPost, "/v1/churches/import", s.importChurches)
	partner(http.MethodGet, "/v1/churches", s.listChurches)
	partner(http.MethodGet, "/v1/churches/{id}", s.getChurch)
	write(http.MethodPatch, "/v1/churches/{id}", s.updateChurch)
	write(http.MethodPost, "/v1/churches/{id}/archive", s.archiveChurch)
	partner(http.MethodGet, "/v1/events", s.listEvents)
	partner(http.MethodGet, "/v1/events/{id}", s.getEvent)
	partner(http.MethodGet, "/v1/event_types", s.listEventTypes)
	write(http.MethodPost, "/v1/donor_sessions", s.createSession)
	partner(http.MethodGet, "/v1/donor_sessions/{id}", s.getSession)
	partner(http.MethodGet, "/v1/enrollments", s.listEnrollments)
	partner(http.MethodGet, "/v1/enrollments/{id}", s.getEnrollment)
	write(http.MethodPost, "/v1/enrollments/{id}/cancel", s.cancelEnrollment)
	write(http.MethodPost, "/v1/enrollments/{id}/pause", s.bodilessMove((*app.Service).PauseEnrollment))
	write(http.MethodPost, "/v1/enrollments/{id}/resume", s.bodilessMove((*app.Service).ResumeEnrollment))
	write(http.MethodPost, "/v1/enrollments/{id}/update", s.updateEnrollment)
	for _, v := range vendorRoutes {
		r.HandleFunc("/edge/"+v.kind, s.edge(v)).Methods(http.MethodPost)
	}
	// The simulators exist only on the sandbox stack; in production every
	// /sandbox path is an ordinary 404.
	if s.app.HasSimulators() {
		write(http.MethodPost, "/sandbox/simulate/payroll-connected", s.simulatePayroll)
		write(http.MethodPost, "/sandbox/simulate/payroll-ended", s.simulatePayrollEnded)
		write(http.MethodPost, "/sandbox/simulate/deposit", s.simulateDeposit)
		write(http.MethodPost, "/sandbox/simulate/kyc", s.simulateKYC)
	}
	for name, h := range s.cfg.StandIns {
		r.PathPrefix("/standin/" + name + "/").Handler(http.StripPrefix("/standin/"+name, h))
	}
	s.flowRoutes(r)
	s.dashboardRoutes(r)
	write(http.MethodPost, "/v1/webhook_endpoints", s.createWebhookEndpoint)
	partner(http.MethodGet, "/v1/webhook_endpoints", s.listWebhookEndpoints)
	partner(http.MethodGet, "/v1/webhook_endpoints/{id}", s.getWebhookEndpoint)
	write(http.MethodPatch, "/v1/webhook_endpoints/{id}", s.updateWebhookEndpoint)
	partner(http.MethodDelete, "/v1/webhook_endpoints/{id}", s.deleteWebhookEndpoint)
	write(http.MethodPost, "/v1/webhook_endpoints/{id}/rotate_secret", s.rotateWebhookSecret)
	write(http.MethodPost, "/v1/webhook_endpoints/{id}/test", s.testWebhookEndpoint)
	write(http.MethodPost, "/v1/webhook_endpoints/{id}/disable", s.disableWebhookEndpoint)
	write(http.MethodPost, "/v1/webhook_endpoints/{id}/enable", s.enableWebhookEndpoint)
	write(http.MethodPost, "/v1/webhook_endpoints/{id}/resend", s.resendWebhookEvent)
	write(http.MethodPost, "/v1/webhook_endpoints/{id}/recover", s.recoverWebhookEndpoint)
	partner(http.MethodGet, "/v1/webhook_endpoints/{id}/recoveries/{recovery_id}", s.getRecovery)
	partner(http.MethodGet, "/v1/webhook_endpoints/{id}/deliveries", s.listDeliveries)
	partner(http.MethodGet, "/v1/api_keys", s.listAPIKeys)
	write(http.MethodPost, "/v1/api_keys/roll", s.rollAPIKey)
	partner(http.MethodDelete, "/v1/api_keys/{prefix}", s.revokeAPIKey)
	write(http.MethodPost, "/v1/dashboard_sessions", s.createDashboardSession)
	s.router = r
}

// partnerChain is the middleware every /v1 and /sandbox route runs:
// authentication, then the key's rate limit; POSTs and PATCHes are
// registered (write) with the Idempotency-Key contract inside it. Routes
// are registered on the root router, not a subrouter, so that a wrong
// method is a 405 rather than a 404.
func (s *Server) partnerChain(h http.Handler) http.Handler {
	return s.authenticate(s.rateLimit(h))
}

// methodNotAllowed answers 405 with the Allow header listing what the path
// does take.
func (s *Server) methodNotAllowed(w http.ResponseWriter, r *http.Request) {
	var allowed []string
	for _, m := range []string{http.MethodGet, http.MethodPost, http.MethodPatch, http.MethodDelete} {
		probe := r.Clone(r.Context())
		probe.Method = m
		var match mux.RouteMatch
		if s.router.Match(probe, &match) && match.MatchErr == nil {
			allowed = append(allowed, m)
		}
	}
	w.Header().Set("Allow", strings.Join(allowed, ", "))
	writeProblem(w, r, domain.ProblemMethodNotAllowed, r.Method+" is not allowed here; use "+strings.Join(allowed, " or ")+".", nil)
}

func (s *Server) healthz(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

// readyz reports ready when the ledger answers and can store writes, and the
// projections have caught up with it.
func (s *Server) readyz(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
	defer cancel()
	ready, err := s.app.Ready(ctx)
	switch {
	case ready.Unwritable:
		w.Header().Set("Retry-After", "5")
		writeProblem(w, r, domain.ProblemUnavailable, "The ledger cannot store writes: its disk is full. Writes resume by themselves once it has room; the log says more.", nil)
	case err != nil && ready.LedgerSeq == 0:
		w.Header().Set("Retry-After", "1")
		writeProblem(w, r, domain.ProblemUnavailable, "The ledger does not answer.", nil)
	case err != nil:
		w.Header().Set("Retry-After", "1")
		writeProblem(w, r, domain.ProblemUnavailable, fmt.Sprintf("Projections are catching up (%d of %d).", ready.AppliedSeq, ready.LedgerSeq), nil)
	default:
		writeJSON(w, http.StatusOK, map[string]any{"status": "ready", "ledger_seq": ready.LedgerSeq, "applied_seq": ready.AppliedSeq})
	}
}

// VendorSecrets are the inbound webhook secrets in use, for operators and
// tests that sign vendor webhooks.
func (s *Server) VendorSecrets() VendorSecrets { return s.cfg.Vendors }
