package httpapi

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"time"

	"github.com/gorilla/mux"

	"github.com/partnergiving/giving/domain"
	"github.com/partnergiving/giving/eventlog"
	"github.com/partnergiving/giving/projections"
)

// Webhooks is what the webhook endpoint routes need from the dispatcher. The
// dispatcher implements it and cmd/giving wires it in, so that this package
// does not import the dispatcher and the same guard and sender serve the API
// and the deliveries.
type Webhooks interface {
	// CheckURL refuses, as a validation error naming url, a receiver
	// address the stack will not connect to.
	CheckURL(ctx context.Context, rawURL string) error
	// TestDelivery sends a signed webhook_endpoint.test envelope to the
	// endpoint at once and logs the attempt.
	TestDelivery(ctx context.Context, ep projections.WebhookEndpoint) (domain.DeliveryAttempt, error)
}

// endpointView is a webhook endpoint as the API shows it: never its secret.
type endpointView struct {
	ID         string   `json:"id"`
	URL        string   `json:"url"`
	EventTypes []string `json:"event_types"`
	Status     string   `json:"status"`
	CreatedAt  string   `json:"created_at"`
}

// createdEndpointView is the answer to a creation, the one place the secret
// is shown.
type createdEndpointView struct {
	endpointView
	Secret string `json:"secret"`
}

func viewEndpoint(ep domain.WebhookEndpoint) endpointView {
	return endpointView{ID: ep.ID, URL: ep.URL, EventTypes: ep.EventTypes, Status: domain.WebhookEndpointEnabled, CreatedAt: domain.FormatTime(ep.CreatedAt)}
}

type endpointRequest struct {
	URL        *string   `json:"url"`
	EventTypes *[]string `json:"event_types"`
}

// createWebhookEndpoint registers a receiver. The secret is generated here,
// sealed before it reaches the ledger, and shown in this answer only.
func (s *Server) createWebhookEndpoint(w http.ResponseWriter, r *http.Request) {
	var req endpointRequest
	if err := decodeJSON(r, &req); err != nil {
		writeError(w, r, err)
		return
	}
	var v domain.Validation
	if req.URL == nil {
		v.Add("url", "is required: the absolute https address of your receiver")
	}
	if req.EventTypes == nil {
		v.Add("event_types", `is required: a list of event types, or ["*"] for all`)
	}
	if err := v.Err(); err != nil {
		writeError(w, r, err)
		return
	}
	u, types, err := domain.ValidateWebhookEndpoint(*req.URL, *req.EventTypes)
	if err != nil {
		writeError(w, r, err)
		return
	}
	if err := s.webhooks.CheckURL(r.Context(), u); err != nil {
		writeError(w, r, err)
		return
	}
	pid := partnerID(r)
	// The limit spans the partner's endpoints, each its own aggregate:
	// creates take turns per partner, and each counts once the projections
	// hold every endpoint event of the partner in the ledger.
	release, err := s.ledger.Turn(r.Context(), s.endpointEvents(pid))
	if err != nil {
		writeError(w, r, err)
		return
	}
	defer release()
	id := domain.NewID(domain.PrefixEndpoint)
	sealed := s.webhookSeal.Seal([]byte(domain.GenerateWebhookSecret()), []byte(id))
	out, err := s.execute(r, 0, eventlog.Command{
		Partner: pid, Aggregate: id,
		Decide: func(ctx context.Context, h eventlog.History) (*domain.Event, error) {
			// Counted here, after a crash-takeover recall found nothing:
			// a recalled creation answers as it did, limit or not.
			if err := s.endpointRoom(ctx, pid); err != nil {
				return nil, err
			}
			ep := loadEndpoint(h)
			ev, err := domain.CreateWebhookEndpoint(&ep, domain.NewWebhookEndpoint{
				ID: id, PartnerID: pid, URL: u, EventTypes: types, SealedSecret: sealed,
			}, time.Now())
			return &ev, err
		},
	})
	if err != nil {
		writeError(w, r, err)
		return
	}
	// Answer from the stored event, so that a request recalled after a crash
	// shows the endpoint and secret that were actually created.
	ev, err := out.Record.Event()
	if err != nil {
		writeError(w, r, err)
		return
	}
	var ep domain.WebhookEndpoint
	ep.Apply(ev)
	secret, err := s.webhookSeal.Open(ep.SealedSecret, []byte(ep.ID))
	if err != nil {
		writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusCreated, createdEndpointView{endpointView: viewEndpoint(ep), Secret: string(secret)})
}

// endpointEvents matches every event about the partner's endpoints.
func (s *Server) endpointEvents(pid string) string {
	return s.ledger.Subjects().Noun(pid, "webhook_endpoint")
}

// endpointRoom refuses a new endpoint when the partner has
// MaxWebhookEndpoints. The caller holds the partner's endpoint turn, so in
// this process no create runs between the count and the append; the count
// waits until the projections hold the newest endpoint event the ledger has
// for the partner, so it includes the creates of other instances that came
// before. Two instances creating a partner's last endpoint at the same
// moment can still both pass: the ledger's check is per aggregate, and each
// endpoint is its own.
func (s *Server) endpointRoom(ctx context.Context, pid string) error {
	last, err := s.ledger.LastOf(ctx, s.endpointEvents(pid))
	if err != nil {
		return err
	}
	if err := s.waitApplied(ctx, last); err != nil {
		return err
	}
	existing, _, _, err := s.store.WebhookEndpoints(pid, nil, 0)
	if err != nil {
		return err
	}
	if len(existing) >= domain.MaxWebhookEndpoints {
		return domain.Errorf(domain.KindConflict, "conflict", "A partner has at most %d webhook endpoints; delete one first.", domain.MaxWebhookEndpoints)
	}
	return nil
}

func loadEndpoint(h eventlog.History) domain.WebhookEndpoint {
	var ep domain.WebhookEndpoint
	for _, e := range h.Events {
		ep.Apply(e)
	}
	return ep
}

// endpoint finds one of the caller's endpoints, answering 404 itself when
// there is none.
func (s *Server) endpoint(w http.ResponseWriter, r *http.Request) (projections.WebhookEndpoint, bool) {
	id := mux.Vars(r)["id"]
	ep, ok, err := s.store.WebhookEndpoint(partnerID(r), id)
	if err != nil {
		writeError(w, r, err)
		return ep, false
	}
	if !ok {
		writeError(w, r, domain.NotFound("webhook endpoint", id))
		return ep, false
	}
	return ep, true
}

func (s *Server) getWebhookEndpoint(w http.ResponseWriter, r *http.Request) {
	if ep, ok := s.endpoint(w, r); ok {
		writeJSON(w, http.StatusOK, viewEndpoint(ep.WebhookEndpoint))
	}
}

func (s *Server) listWebhookEndpoints(w http.ResponseWriter, r *http.Request) {
	pid := partnerID(r)
	servePage(s, w, r, eventlog.CursorEndpoints, func(after []byte, limit int) ([]projections.WebhookEndpoint, []byte, bool, error) {
		return s.store.WebhookEndpoints(pid, after, limit)
	}, func(ep projections.WebhookEndpoint) endpointView { return viewEndpoint(ep.WebhookEndpoint) })
}

// deleteWebhookEndpoint removes an endpoint: no delivery starts for it
// afterwards, retries included.
func (s *Server) deleteWebhookEndpoint(w http.ResponseWriter, r *http.Request) {
	id, pid := mux.Vars(r)["id"], partnerID(r)
	if !domain.ValidID(domain.PrefixEndpoint, id) {
		writeError(w, r, domain.NotFound("webhook endpoint", id))
		return
	}
	_, err := s.execute(r, 0, eventlog.Command{
		Partner: pid, Aggregate: id,
		Decide: func(_ context.Context, h eventlog.History) (*domain.Event, error) {
			ep := loadEndpoint(h)
			ev, err := domain.DeleteWebhookEndpoint(&ep, id, time.Now())
			return &ev, err
		},
	})
	if err != nil {
		writeError(w, r, err)
		return
	}
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusNoContent)
}

type testDeliveryView struct {
	Delivered  bool    `json:"delivered"`
	StatusCode *int    `json:"status_code"`
	Error      *string `json:"error"`
}

// testWebhookEndpoint sends a test delivery at once. It takes no body; an
// empty JSON object is accepted too.
func (s *Server) testWebhookEndpoint(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err == nil && len(bytes.TrimSpace(body)) > 0 {
		err = decodeStrict(body, &struct{}{})
	}
	if err != nil {
		writeError(w, r, err)
		return
	}
	ep, ok := s.endpoint(w, r)
	if !ok {
		return
	}
	at, err := s.webhooks.TestDelivery(r.Context(), ep)
	if err != nil {
		writeError(w, r, err)
		return
	}
	v := testDeliveryView{Delivered: at.Outcome == domain.DeliverySucceeded}
	if at.StatusCode != 0 {
		v.StatusCode = &at.StatusCode
	}
	if at.Error != "" {
		v.Error = &at.Error
	}
	writeJSON(w, http.StatusOK, v)
}

type attemptView struct {
	ID            string  `json:"id"`
	EventID       string  `json:"event_id"`
	EventType     string  `json:"event_type"`
	Attempt       int     `json:"attempt"`
	Outcome       string  `json:"outcome"`
	StatusCode    *int    `json:"status_code"`
	DurationMS    int64   `json:"duration_ms"`
	AttemptedAt   string  `json:"attempted_at"`
	NextAttemptAt *string `json:"next_attempt_at"`
	Exhausted     bool    `json:"exhausted"`
	Error         *string `json:"error"`
}

func viewAttempt(a domain.DeliveryAttempt) attemptView {
	v := attemptView{
		ID: a.ID, EventID: a.EventID, EventType: a.EventType, Attempt: a.Attempt, Outcome: string(a.Outcome),
		DurationMS: a.Duration.Milliseconds(), AttemptedAt: domain.FormatTime(a.AttemptedAt), Exhausted: a.Exhausted,
	}
	if a.StatusCode != 0 {
		v.StatusCode = &a.StatusCode
	}
	if a.NextAttemptAt != nil {
		next := domain.FormatTime(*a.NextAttemptAt)
		v.NextAttemptAt = &next
	}
	if a.Error != "" {
		v.Error = &a.Error
	}
	return v
}

// listDeliveries shows the endpoint's last attempts, newest first.
func (s *Server) listDeliveries(w http.ResponseWriter, r *http.Request) {
	ep, ok := s.endpoint(w, r)
	if !ok {
		return
	}
	attempts, err := s.attempts.Last(r.Context(), ep.PartnerID, ep.ID)
	if err != nil {
		writeError(w, r, err)
		return
	}
	data := make([]attemptView, len(attempts))
	for i, a := range attempts {
		data[i] = viewAttempt(a)
	}
	writeJSON(w, http.StatusOK, map[string]any{"data": data})
}
