package sandbox

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/partnergiving/giving/domain"
)

// Event is a delivered envelope as the receiver saw it.
type Event struct {
	ID      string         `json:"event_id"`
	Type    string         `json:"event_type"`
	Payload map[string]any `json:"payload"`
	// Raw is the body exactly as delivered (the feed serves the same bytes).
	Raw []byte `json:"-"`
}

// ParseEvent reads an envelope from a delivery or feed item.
func ParseEvent(raw []byte) (Event, error) {
	var e Event
	if err := json.Unmarshal(raw, &e); err != nil {
		return Event{}, fmt.Errorf("not an event envelope: %w", err)
	}
	if e.ID == "" || e.Type == "" {
		return Event{}, fmt.Errorf("not an event envelope: no event_id or event_type")
	}
	e.Raw = raw
	return e, nil
}

// Receiver is a local webhook endpoint as an integration should write one:
// it verifies every delivery's Service-Signature (HMAC-SHA256 over
// "<t>.<raw body>", at most 300 s old, compared in constant time) on every
// line of the header, accepting a delivery one line of which verifies with
// one of its secrets (two lines and two secrets while a rotation overlaps),
// answers 401 to one that fails, and acts once per event_id, counting
// repeats.
// It accepts POSTs on any path, and answers a GET to say it is up.
type Receiver struct {
	addr string
	srv  *http.Server
	log  io.Writer

	mu         sync.Mutex
	secrets    [][]byte
	seen       map[string]Event
	deliveries int
	duplicates int
	arrived    chan struct{}
}

// Listen starts a receiver on addr (host:port; port 0 picks one). log, when
// set, gets a line for every delivery and the body of every new event.
func Listen(addr string, log io.Writer) (*Receiver, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("webhook receiver: %w", err)
	}
	r := &Receiver{addr: ln.Addr().String(), log: log, seen: map[string]Event{}, arrived: make(chan struct{})}
	r.srv = &http.Server{Handler: http.HandlerFunc(r.handle), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = r.srv.Serve(ln) }()
	return r, nil
}

// Addr is the address the receiver listens on.
func (r *Receiver) Addr() string { return r.addr }

// Close stops the receiver.
func (r *Receiver) Close() { _ = r.srv.Close() }

// SetSecret sets the endpoint's whsec_ secrets to verify with: one, or
// during a rotation's overlap the previous and the new one while the
// integration moves from one to the other. Until then every delivery is
// refused.
func (r *Receiver) SetSecret(secrets ...string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.secrets = nil
	for _, s := range secrets {
		r.secrets = append(r.secrets, []byte(s))
	}
}

func (r *Receiver) handle(w http.ResponseWriter, req *http.Request) {
	if req.Method == http.MethodGet {
		// Lets a script wait until the receiver listens.
		fmt.Fprintln(w, "receiving webhooks")
		return
	}
	if req.Method != http.MethodPost {
		http.Error(w, "webhook deliveries are POSTs", http.StatusMethodNotAllowed)
		return
	}
	body, err := io.ReadAll(io.LimitReader(req.Body, 1<<20))
	if err != nil {
		http.Error(w, "read", http.StatusBadRequest)
		return
	}
	r.mu.Lock()
	secrets := r.secrets
	r.mu.Unlock()
	if len(secrets) == 0 {
		r.logf("refused a delivery to %s: no secret to verify it with\n", req.URL.Path)
		http.Error(w, "no secret", http.StatusUnauthorized)
		return
	}
	if err := domain.VerifyAnySignature(req.Header.Values(domain.WebhookSignatureHeader), secrets, body, time.Now()); err != nil {
		r.logf("refused a delivery to %s: %v\n", req.URL.Path, err)
		http.Error(w, "bad signature", http.StatusUnauthorized)
		return
	}
	e, err := ParseEvent(body)
	if err != nil {
		r.logf("refused a delivery to %s: %v\n", req.URL.Path, err)
		http.Error(w, "bad envelope", http.StatusBadRequest)
		return
	}
	r.mu.Lock()
	r.deliveries++
	r.mu.Unlock()
	if r.Accept(e) {
		r.logf("verified %s %s\n%s\n", e.Type, e.ID, body)
	} else {
		r.logf("verified %s %s again: a duplicate, ignored\n", e.Type, e.ID)
	}
	w.WriteHeader(http.StatusOK)
}

func (r *Receiver) logf(format string, args ...any) {
	if r.log != nil {
		fmt.Fprintf(r.log, format, args...)
	}
}

// Accept is the integration acting on an event, from either channel
// (webhook or feed): once per event_id. It reports whether the event was
// new; a repeat is counted and otherwise ignored.
func (r *Receiver) Accept(e Event) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, dup := r.seen[e.ID]; dup {
		r.duplicates++
		return false
	}
	r.seen[e.ID] = e
	close(r.arrived)
	r.arrived = make(chan struct{})
	return true
}

// Await waits up to timeout for a verified event matching match.
func (r *Receiver) Await(ctx context.Context, timeout time.Duration, match func(Event) bool) (Event, error) {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		r.mu.Lock()
		for _, e := range r.seen {
			if match(e) {
				r.mu.Unlock()
				return e, nil
			}
		}
		arrived := r.arrived
		r.mu.Unlock()
		select {
		case <-arrived:
		case <-deadline.C:
			return Event{}, fmt.Errorf("nothing after %s", timeout)
		case <-ctx.Done():
			return Event{}, ctx.Err()
		}
	}
}

// Counts are the deliveries verified, the distinct events acted on, and
// the repeats ignored.
func (r *Receiver) Counts() (deliveries, unique, duplicates int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.deliveries, len(r.seen), r.duplicates
}

// AbsoluteURL checks that s is an absolute http or https URL with a host,
// the mistake a missing scheme ("127.0.0.1:8080") makes otherwise obscure.
func AbsoluteURL(s string) (*url.URL, error) {
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		hint := ""
		if s != "" && !strings.Contains(s, "://") {
			hint = fmt.Sprintf(" (did you mean http://%s?)", s)
		}
		return nil, fmt.Errorf("%q is not an absolute http(s) URL%s", s, hint)
	}
	return u, nil
}
