package certify

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/partnergiving/giving/domain"
)

type certEvent struct {
	ID      string         `json:"event_id"`
	Type    string         `json:"event_type"`
	Payload map[string]any `json:"payload"`
	raw     []byte
}

// certReceiver is the local webhook endpoint. It verifies every delivery by the
// spec's rules and deduplicates by event_id, as an integration must.
type certReceiver struct {
	addr string
	srv  *http.Server

	mu         sync.Mutex
	secret     []byte
	seen       map[string]certEvent
	deliveries int
	duplicates int
	arrived    chan struct{}
}

func startCertReceiver(listen string) (*certReceiver, error) {
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return nil, fmt.Errorf("webhook receiver: %w", err)
	}
	r := &certReceiver{addr: ln.Addr().String(), seen: map[string]certEvent{}, arrived: make(chan struct{})}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /webhooks", r.handle)
	r.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = r.srv.Serve(ln) }()
	return r, nil
}

func (r *certReceiver) close() { _ = r.srv.Close() }

func (r *certReceiver) setSecret(s string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.secret = []byte(s)
}

func (r *certReceiver) handle(w http.ResponseWriter, req *http.Request) {
	body, err := io.ReadAll(io.LimitReader(req.Body, 1<<20))
	if err != nil {
		http.Error(w, "read", http.StatusBadRequest)
		return
	}
	r.mu.Lock()
	secret := r.secret
	r.mu.Unlock()
	if secret == nil || domain.VerifySignature(req.Header.Get("Service-Signature"), secret, body, time.Now()) != nil {
		http.Error(w, "bad signature", http.StatusUnauthorized)
		return
	}
	var e certEvent
	if err := json.Unmarshal(body, &e); err != nil || e.ID == "" {
		http.Error(w, "bad envelope", http.StatusBadRequest)
		return
	}
	e.raw = body
	r.mu.Lock()
	r.deliveries++
	r.mu.Unlock()
	r.accept(e)
	w.WriteHeader(http.StatusOK)
}

// accept is the integration acting on an event, from either channel: once
// per event_id; a repeat is counted and otherwise ignored.
func (r *certReceiver) accept(e certEvent) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, dup := r.seen[e.ID]; dup {
		r.duplicates++
		return
	}
	r.seen[e.ID] = e
	close(r.arrived)
	r.arrived = make(chan struct{})
}

// await waits for a verified event matching match.
func (r *certReceiver) await(ctx context.Context, timeout time.Duration, match func(certEvent) bool) (certEvent, error) {
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
			return certEvent{}, fmt.Errorf("nothing after %s", timeout)
		case <-ctx.Done():
			return certEvent{}, ctx.Err()
		}
	}
}

func (r *certReceiver) counts() (deliveries, unique, duplicates int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.deliveries, len(r.seen), r.duplicates
}

// completeFlow walks the hosted flow through its HTML forms as a browser
// without JavaScript would, with the sandbox's seed answers: code 000000,
// both consents, the first payroll provider, user_good / pass_good.
