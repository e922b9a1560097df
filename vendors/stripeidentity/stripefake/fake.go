package stripefake

import (
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/partnergiving/giving/vendors/stripeidentity"
)

// Config configures a fake.
type Config struct {
	// SecretKey is the one key the fake accepts as a bearer token. A
	// *_live_ key makes every object and event livemode.
	SecretKey string
	// WebhookURL receives the signed events; none are sent when empty
	// (Events still records them).
	WebhookURL string
	// WebhookSecret is the endpoint's whsec_ signing secret.
	WebhookSecret string
	// WebhookClient sends the webhooks, for example one that trusts the
	// service's TLS certificate; a 10-second-timeout client when nil.
	WebhookClient *http.Client
	// Now is the fake's clock; time.Now when nil.
	Now func() time.Time
}

// Server is a running fake. Its zero value is not usable; call New or
// Start.
type Server struct {
	cfg     Config
	mux     *http.ServeMux
	httpSrv *httptest.Server
	// URL is the fake's base address when started with Start.
	URL string

	mu         sync.Mutex
	sessions   map[string]*session
	tokens     map[string]string // hosted page token → session id
	idem       map[string]idemEntry
	requests   []Request
	events     []Event
	deliveries []Delivery
	failures   []Failure
	sending    sync.WaitGroup
}

// Request is one API request the fake received, and how it answered.
type Request struct {
	Method string
	Path   string
	Header http.Header
	// Form is the decoded form body of a POST.
	Form url.Values
	// Status is the fake's answer; Refusal says why it refused, if it did.
	Status  int
	Refusal string
}

// Event is one event the fake rendered.
type Event struct {
	ID        string
	Type      string
	SessionID string
	Body      []byte
}

// Delivery is one POST of an event to the webhook URL.
type Delivery struct {
	EventID string
	Type    string
	// Signature is the Stripe-Signature header sent.
	Signature string
	// Status is what the receiver answered, 0 when it did not; Err says
	// why.
	Status int
	Err    string
}

// Failure is an answer FailNext makes the next API request receive instead
// of being served.
type Failure struct {
	// Status is the HTTP status to answer with.
	Status int
	// Type, Code, Message and Param fill Stripe's error object.
	Type, Code, Message, Param string
	// ShouldRetry, when set, is sent as Stripe-Should-Retry.
	ShouldRetry string
	// Body, when set, replaces the error object (for undecodable answers).
	Body string
	// Delay holds the answer back, to make a client time out.
	Delay time.Duration
}

type idemEntry struct {
	fingerprint string
	status      int
	body        []byte
}

// New returns a fake to serve with any listener. Session URLs point at the
// host the API request came to.
func New(cfg Config) *Server {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.WebhookClient == nil {
		cfg.WebhookClient = &http.Client{Timeout: 10 * time.Second}
	}
	s := &Server{
		cfg:      cfg,
		mux:      http.NewServeMux(),
		sessions: map[string]*session{},
		tokens:   map[string]string{},
		idem:     map[string]idemEntry{},
	}
	s.mux.HandleFunc("POST /v1/identity/verification_sessions", s.api(s.create))
	s.mux.HandleFunc("GET /v1/identity/verification_sessions/{id}", s.api(s.retrieve))
	s.mux.HandleFunc("POST /v1/identity/verification_sessions/{id}/cancel", s.api(s.cancel))
	s.mux.HandleFunc("/v1/", s.api(s.unrecognized))
	s.mux.HandleFunc("GET /start/{token}", s.page)
	s.mux.HandleFunc("POST /start/{token}", s.submit)
	return s
}

// Start serves a new fake on a loopback port.
func Start(cfg Config) *Server {
	s := New(cfg)
	s.httpSrv = httptest.NewServer(s)
	s.URL = s.httpSrv.URL
	return s
}

// ServeHTTP serves the API and the hosted pages.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.mux.ServeHTTP(w, r) }

// Close waits for webhooks still being sent and stops a started fake.
func (s *Server) Close() {
	s.sending.Wait()
	if s.httpSrv != nil {
		s.httpSrv.Close()
	}
}

// FailNext makes the next API requests, one per failure, answer with the
// given failures instead of being served.
func (s *Server) FailNext(f ...Failure) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failures = append(s.failures, f...)
}

// Requests returns the API requests received so far.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.requests)
}

// Events returns the events rendered so far, delivered or not.
func (s *Server) Events() []Event {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.events)
}

// Deliveries returns the webhook POSTs made so far.
func (s *Server) Deliveries() []Delivery {
	s.sending.Wait()
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.deliveries)
}

// SessionStatus reports a session's status and last_error code.
func (s *Server) SessionStatus(id string) (stripeidentity.Status, string, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	vs, ok := s.sessions[id]
	if !ok {
		return "", "", false
	}
	code := ""
	if vs.lastError != nil {
		code = vs.lastError.Code
	}
	return vs.status, code, true
}

// apiHandler serves one API route: it returns the status and the object
// or error to answer with.
type apiHandler func(r *http.Request, form url.Values) (int, any)

var (
	versionForm = regexp.MustCompile(`^\d{4}-\d{2}-\d{2}(\.[a-z]+)?$`)
	idemForm    = regexp.MustCompile(`^[!-~]{1,255}$`)
)

// api wraps a route with what every Stripe API request goes through:
// recording, an injected failure, authentication, version and encoding
// checks, and idempotency for POSTs.
func (s *Server) api(h apiHandler) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		rec := Request{Method: r.Method, Path: r.URL.Path, Header: r.Header.Clone()}
		if r.Method == http.MethodPost {
			rec.Form, _ = url.ParseQuery(string(body))
		}
		s.mu.Lock()
		if len(s.failures) > 0 {
			f := s.failures[0]
			s.failures = s.failures[1:]
			rec.Status, rec.Refusal = f.Status, "injected failure"
			s.requests = append(s.requests, rec)
			s.mu.Unlock()
			s.fail(w, f)
			return
		}
		status, answer, refusal := s.serve(r, body, rec.Form, h)
		rec.Status, rec.Refusal = status, refusal
		s.requests = append(s.requests, rec)
		s.mu.Unlock()
		writeJSON(w, status, answer)
	}
}

// serve runs the checks and the route under the lock and returns the raw
// answer; replays of an idempotent POST return the stored one.
func (s *Server) serve(r *http.Request, body []byte, form url.Values, h apiHandler) (int, []byte, string) {
	refuse := func(status int, e stripeError) (int, []byte, string) {
		return status, mustJSON(errorBody{e}), e.Message
	}
	if r.Header.Get("Authorization") != "Bearer "+s.cfg.SecretKey || s.cfg.SecretKey == "" {
		return refuse(http.StatusUnauthorized, stripeError{Type: "invalid_request_error", Message: "Invalid API Key provided."})
	}
	if v := r.Header.Get("Stripe-Version"); v != "" && !versionForm.MatchString(v) {
		return refuse(http.StatusBadRequest, stripeError{Type: "invalid_request_error", Message: fmt.Sprintf("Invalid Stripe API version: %s", v)})
	}
	if r.Method != http.MethodPost {
		status, answer := h(r, nil)
		return status, mustJSON(answer), refusalOf(answer)
	}
	if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "application/x-www-form-urlencoded" {
		return refuse(http.StatusBadRequest, stripeError{Type: "invalid_request_error", Message: "Stripe's API takes application/x-www-form-urlencoded bodies."})
	}
	if _, err := url.ParseQuery(string(body)); err != nil {
		return refuse(http.StatusBadRequest, stripeError{Type: "invalid_request_error", Message: "The body is not valid form encoding."})
	}
	key := r.Header.Get("Idempotency-Key")
	if !idemForm.MatchString(key) {
		return refuse(http.StatusBadRequest, stripeError{Type: "invalid_request_error", Message: "This fake requires an Idempotency-Key of 1 to 255 visible characters on every POST."})
	}
	fingerprint := r.Method + " " + r.URL.Path + "?" + form.Encode()
	if prev, ok := s.idem[key]; ok {
		if prev.fingerprint != fingerprint {
			return refuse(http.StatusBadRequest, stripeError{Type: "idempotency_error", Message: "Keys for idempotent requests can only be used with the same parameters they were first used with."})
		}
		return prev.status, prev.body, "idempotent replay"
	}
	status, answer := h(r, form)
	raw := mustJSON(answer)
	s.idem[key] = idemEntry{fingerprint: fingerprint, status: status, body: raw}
	return status, raw, refusalOf(answer)
}

func (s *Server) fail(w http.ResponseWriter, f Failure) {
	if f.Delay > 0 {
		time.Sleep(f.Delay)
	}
	if f.ShouldRetry != "" {
		w.Header().Set("Stripe-Should-Retry", f.ShouldRetry)
	}
	if f.Body != "" {
		w.Header().Set("Request-Id", stripeidentity.NewID("req_"))
		w.WriteHeader(f.Status)
		io.WriteString(w, f.Body)
		return
	}
	writeJSON(w, f.Status, mustJSON(errorBody{stripeError{Type: f.Type, Code: f.Code, Message: f.Message, Param: f.Param}}))
}

// stripeError is Stripe's error object (docs.stripe.com/api/errors).
type stripeError struct {
	Type    string `json:"type"`
	Code    string `json:"code,omitempty"`
	Message string `json:"message,omitempty"`
	Param   string `json:"param,omitempty"`
	DocURL  string `json:"doc_url,omitempty"`
}

// errorBody is the envelope Stripe wraps its error object in.
type errorBody struct {
	Error stripeError `json:"error"`
}

func refusalOf(answer any) string {
	if e, ok := answer.(errorBody); ok {
		return e.Error.Message
	}
	return ""
}

func invalid(param, code, format string, args ...any) (int, any) {
	e := stripeError{Type: "invalid_request_error", Code: code, Param: param, Message: fmt.Sprintf(format, args...)}
	if code != "" {
		e.DocURL = "https://stripe.com/docs/error-codes/" + strings.ReplaceAll(code, "_", "-")
	}
	return http.StatusBadRequest, errorBody{e}
}

func mustJSON(v any) []byte {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		panic(err) // only the fake's own types are encoded
	}
	return b
}

func writeJSON(w http.ResponseWriter, status int, body []byte) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Request-Id", stripeidentity.NewID("req_"))
	w.WriteHeader(status)
	w.Write(body)
}

func (s *Server) unrecognized(r *http.Request, _ url.Values) (int, any) {
	return http.StatusNotFound, errorBody{stripeError{Type: "invalid_request_error", Message: fmt.Sprintf("Unrecognized request URL (%s: %s).", r.Method, r.URL.Path)}}
}

// livemode follows the key, as Stripe's objects do.
func (s *Server) livemode() bool { return strings.Contains(s.cfg.SecretKey, "_live_") }

// baseURL is where the browser reached the fake's API, for session URLs.
func baseURL(r *http.Request) string {
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	return scheme + "://" + r.Host
}
