package httpapi

import (
	"context"
	"net/http"
	"time"

	"github.com/gorilla/mux"

	"github.com/partnergiving/giving/app"
	"github.com/partnergiving/giving/domain"
	"github.com/partnergiving/giving/projections"
)

// endpointView is a webhook endpoint as the API shows it: never its secret
// or private key; its public key, for an ed25519 endpoint, at any time.
type endpointView struct {
	ID         string   `json:"id"`
	URL        string   `json:"url"`
	EventTypes []string `json:"event_types"`
	Status     string   `json:"status"`
	// DisabledReason is manual or failing while the endpoint is disabled,
	// null while it is enabled.
	DisabledReason *string           `json:"disabled_reason"`
	Description    string            `json:"description"`
	Metadata       map[string]string `json:"metadata"`
	// SignatureScheme is hmac_sha256 or ed25519: how webhook-signature is
	// made.
	SignatureScheme string `json:"signature_scheme"`
	// PublicKey is the whpk_ key that verifies an ed25519 endpoint's
	// webhook-signature; null for hmac_sha256.
	PublicKey *string `json:"public_key"`
	// PreviousPublicKey is the rotated-out public key, while its
	// signatures are still sent; null otherwise.
	PreviousPublicKey *string `json:"previous_public_key"`
	// PreviousSecretExpiresAt is until when a rotated-out secret signs
	// beside the current one; null when none does.
	PreviousSecretExpiresAt *string `json:"previous_secret_expires_at"`
	CreatedAt               string  `json:"created_at"`
}

// createdEndpointView is the answer to a creation or a rotation, the only
// places a secret is shown.
type createdEndpointView struct {
	endpointView
	Secret string `json:"secret"`
}

func (s *Server) viewEndpoint(ep domain.WebhookEndpoint) endpointView {
	v := endpointView{
		ID: ep.ID, URL: ep.URL, EventTypes: ep.EventTypes, Status: ep.Status(),
		DisabledReason: optional(ep.DisabledReason), Description: ep.Description, Metadata: ep.Metadata,
		SignatureScheme: ep.SignatureScheme(), CreatedAt: domain.FormatTime(ep.CreatedAt),
	}
	if v.Metadata == nil {
		v.Metadata = map[string]string{}
	}
	if ep.SigningKey != nil {
		v.PublicKey = &ep.SigningKey.PublicKey
	}
	if until := ep.PreviousUntil(s.now()); !until.IsZero() {
		v.PreviousSecretExpiresAt = optional(domain.FormatTime(until))
		if ep.Previous.SigningKey != nil {
			v.PreviousPublicKey = &ep.Previous.SigningKey.PublicKey
		}
	}
	return v
}

type endpointRequest struct {
	URL             *string            `json:"url"`
	EventTypes      *[]string          `json:"event_types"`
	Description     *string            `json:"description"`
	Metadata        *map[string]string `json:"metadata"`
	SignatureScheme *string            `json:"signature_scheme"`
}

// createWebhookEndpoint registers a receiver. The secret is generated here,
// sealed before it reaches the ledger, and shown in this answer only.
func (s *Server) createWebhookEndpoint(w http.ResponseWriter, r *http.Request, claimed *app.Request) {
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
	n := app.EndpointSettings{URL: *req.URL, EventTypes: *req.EventTypes}
	if req.Description != nil {
		n.Description = *req.Description
	}
	if req.Metadata != nil {
		n.Metadata = *req.Metadata
	}
	if req.SignatureScheme != nil {
		n.Scheme = *req.SignatureScheme
		if n.Scheme == "" {
			writeError(w, r, domain.ValidateSignatureScheme(""))
			return
		}
	}
	created, err := s.app.Under(claimed).CreateEndpoint(r.Context(), partnerID(r), n)
	if err != nil {
		writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusCreated, createdEndpointView{endpointView: s.viewEndpoint(created.Endpoint), Secret: created.Secret})
}

// updateWebhookEndpoint changes the fields the body names; the others stay
// as they are. Metadata is merged: a key set to "" is removed.
func (s *Server) updateWebhookEndpoint(w http.ResponseWriter, r *http.Request, claimed *app.Request) {
	var req endpointRequest
	if err := decodeOptional(r, &req); err != nil {
		writeError(w, r, err)
		return
	}
	c := domain.WebhookEndpointChange{URL: req.URL, EventTypes: req.EventTypes, Description: req.Description, Scheme: req.SignatureScheme}
	if req.Metadata != nil {
		c.Metadata = *req.Metadata
		if c.Metadata == nil {
			c.Metadata = map[string]string{}
		}
	}
	ep, err := s.app.Under(claimed).UpdateEndpoint(r.Context(), partnerID(r), mux.Vars(r)["id"], c)
	if err != nil {
		writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, s.viewEndpoint(ep.WebhookEndpoint))
}

// rotateWebhookSecret replaces the endpoint's secret; the answer shows the
// new one, once. The previous one signs beside it for expire_current_in
// seconds (default a day).
func (s *Server) rotateWebhookSecret(w http.ResponseWriter, r *http.Request, claimed *app.Request) {
	var req struct {
		ExpireCurrentIn *int64 `json:"expire_current_in"`
	}
	if err := decodeOptional(r, &req); err != nil {
		writeError(w, r, err)
		return
	}
	overlap := domain.DefaultSecretOverlap
	if req.ExpireCurrentIn != nil {
		var err error
		if overlap, err = domain.ValidateOverlap(*req.ExpireCurrentIn); err != nil {
			writeError(w, r, err)
			return
		}
	}
	rotated, err := s.app.Under(claimed).RotateSecret(r.Context(), partnerID(r), mux.Vars(r)["id"], overlap)
	if err != nil {
		writeError(w, r, err)
		return
	}
	v := createdEndpointView{endpointView: s.viewEndpoint(rotated.Endpoint.WebhookEndpoint), Secret: rotated.Secret}
	// The answer names the expiry even when it is already past (0 s).
	v.PreviousSecretExpiresAt = optional(domain.FormatTime(rotated.PreviousExpiresAt))
	writeJSON(w, http.StatusOK, v)
}

// endpoint finds one of the caller's endpoints, answering 404 itself when
// there is none.
func (s *Server) endpoint(w http.ResponseWriter, r *http.Request) (projections.WebhookEndpoint, bool) {
	ep, err := s.app.Endpoint(partnerID(r), mux.Vars(r)["id"])
	if err != nil {
		writeError(w, r, err)
		return ep, false
	}
	return ep, true
}

func (s *Server) getWebhookEndpoint(w http.ResponseWriter, r *http.Request) {
	if ep, ok := s.endpoint(w, r); ok {
		writeJSON(w, http.StatusOK, s.viewEndpoint(ep.WebhookEndpoint))
	}
}

func (s *Server) listWebhookEndpoints(w http.ResponseWriter, r *http.Request) {
	pid := partnerID(r)
	servePage(s, w, r, domain.CursorEndpoints, func(after []byte, limit int) ([]projections.WebhookEndpoint, []byte, bool, error) {
		return s.store.WebhookEndpoints(pid, after, limit)
	}, func(ep projections.WebhookEndpoint) endpointView { return s.viewEndpoint(ep.WebhookEndpoint) })
}

// deleteWebhookEndpoint removes an endpoint: no delivery starts for it
// afterwards, retries included.
func (s *Server) deleteWebhookEndpoint(w http.ResponseWriter, r *http.Request) {
	if err := s.app.DeleteEndpoint(r.Context(), partnerID(r), mux.Vars(r)["id"]); err != nil {
		writeError(w, r, err)
		return
	}
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusNoContent)
}

// disableWebhookEndpoint stops deliveries to an endpoint until it is
// enabled; enableWebhookEndpoint starts them again, without replaying what
// happened meanwhile. Both answer with the endpoint and take no body (an
// empty JSON object is accepted too).
func (s *Server) disableWebhookEndpoint(w http.ResponseWriter, r *http.Request, claimed *app.Request) {
	s.switchEndpoint(w, r, s.app.Under(claimed).DisableEndpoint)
}

func (s *Server) enableWebhookEndpoint(w http.ResponseWriter, r *http.Request, claimed *app.Request) {
	s.switchEndpoint(w, r, s.app.Under(claimed).EnableEndpoint)
}

func (s *Server) switchEndpoint(w http.ResponseWriter, r *http.Request, change func(context.Context, string, string) (projections.WebhookEndpoint, error)) {
	if err := decodeOptional(r, &struct{}{}); err != nil {
		writeError(w, r, err)
		return
	}
	ep, err := change(r.Context(), partnerID(r), mux.Vars(r)["id"])
	if err != nil {
		writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, s.viewEndpoint(ep.WebhookEndpoint))
}

// resendWebhookEvent sends one stored event to the endpoint again, as one
// new attempt; the answer names the attempt, which the deliveries list
// shows once it is made.
func (s *Server) resendWebhookEvent(w http.ResponseWriter, r *http.Request, claimed *app.Request) {
	var req struct {
		EventID *string `json:"event_id"`
	}
	if err := decodeJSON(r, &req); err != nil {
		writeError(w, r, err)
		return
	}
	if req.EventID == nil || *req.EventID == "" {
		var v domain.Validation
		v.Add("event_id", "is required: the event_id of one of your events (GET /v1/events)")
		writeError(w, r, v.Err())
		return
	}
	id, err := s.app.Under(claimed).ResendEvent(r.Context(), partnerID(r), mux.Vars(r)["id"], *req.EventID)
	if err != nil {
		writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusAccepted, map[string]string{"attempt_id": id})
}

// recoverWebhookEndpoint starts re-delivering a range of the endpoint's
// events; the recovery runs in the background and its progress is read at
// GET .../recoveries/{recovery_id}.
func (s *Server) recoverWebhookEndpoint(w http.ResponseWriter, r *http.Request, claimed *app.Request) {
	var req struct {
		Since       *string `json:"since"`
		SinceCursor *string `json:"since_cursor"`
		Until       *string `json:"until"`
	}
	if err := decodeJSON(r, &req); err != nil {
		writeError(w, r, err)
		return
	}
	pid := partnerID(r)
	var rg domain.RecoveryRange
	var err error
	if rg.Since, err = recoveryTime("since", req.Since); err == nil {
		rg.Until, err = recoveryTime("until", req.Until)
	}
	if err != nil {
		writeError(w, r, err)
		return
	}
	if req.SinceCursor != nil {
		after, err := s.cursors.DecodeSeq(domain.CursorEvents, pid, *req.SinceCursor)
		if err != nil {
			writeError(w, r, app.ErrFeedPosition)
			return
		}
		rg.SinceCursor = &after
	}
	rec, err := s.app.Under(claimed).RecoverEndpoint(r.Context(), pid, mux.Vars(r)["id"], rg)
	if err != nil {
		writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusAccepted, map[string]any{"recovery_id": rec.ID, "status": rec.Status, "total": rec.Total})
}

// recoveryTime reads an RFC 3339 bound of a recovery; absent is nil.
func recoveryTime(name string, v *string) (*time.Time, error) {
	if v == nil {
		return nil, nil
	}
	t, err := time.Parse(time.RFC3339Nano, *v)
	if err != nil {
		return nil, domain.ProblemInvalidRange.New("%s must be an RFC 3339 time such as 2026-11-20T00:00:00Z.", name)
	}
	return &t, nil
}

type recoveryView struct {
	ID                string  `json:"id"`
	WebhookEndpointID string  `json:"webhook_endpoint_id"`
	Status            string  `json:"status"`
	Total             int     `json:"total"`
	Sent              int     `json:"sent"`
	Failed            int     `json:"failed"`
	Error             *string `json:"error"`
	CreatedAt         string  `json:"created_at"`
	UpdatedAt         string  `json:"updated_at"`
}

func (s *Server) getRecovery(w http.ResponseWriter, r *http.Request) {
	vars := mux.Vars(r)
	rec, err := s.app.Recovery(r.Context(), partnerID(r), vars["id"], vars["recovery_id"])
	if err != nil {
		writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, recoveryView{
		ID: rec.ID, WebhookEndpointID: rec.EndpointID, Status: rec.Status, Total: rec.Total, Sent: rec.Sent, Failed: rec.Failed,
		Error: optional(rec.Error), CreatedAt: domain.FormatTime(rec.CreatedAt), UpdatedAt: domain.FormatTime(rec.UpdatedAt),
	})
}

type testDeliveryView struct {
	Delivered  bool    `json:"delivered"`
	StatusCode *int    `json:"status_code"`
	Error      *string `json:"error"`
}

// testWebhookEndpoint sends a test delivery at once. It takes no body; an
// empty JSON object is accepted too.
func (s *Server) testWebhookEndpoint(w http.ResponseWriter, r *http.Request, claimed *app.Request) {
	if err := decodeOptional(r, &struct{}{}); err != nil {
		writeError(w, r, err)
		return
	}
	at, err := s.app.Under(claimed).TestEndpoint(r.Context(), partnerID(r), mux.Vars(r)["id"])
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
	// ResponseBody is the first bytes of the receiver's answer body.
	ResponseBody *string `json:"response_body"`
}

func viewAttempt(a domain.DeliveryAttempt) attemptView {
	v := attemptView{
		ID: a.ID, EventID: a.EventID, EventType: a.EventType, Attempt: a.Attempt, Outcome: string(a.Outcome),
		DurationMS: a.Duration.Milliseconds(), AttemptedAt: domain.FormatTime(a.AttemptedAt), Exhausted: a.Exhausted,
	}
	if a.StatusCode != 0 {
		v.StatusCode = &a.StatusCode
	}
	v.NextAttemptAt, v.Error, v.ResponseBody = optionalTime(a.NextAttemptAt), optional(a.Error), optional(a.Response)
	return v
}

// listDeliveries shows a page of the endpoint's last attempts, newest
// first, all of them or only those that succeeded or failed.
func (s *Server) listDeliveries(w http.ResponseWriter, r *http.Request) {
	outcome := r.URL.Query().Get("outcome")
	if outcome != "" && outcome != app.OutcomeSucceeded && outcome != app.OutcomeFailed {
		var v domain.Validation
		v.Add("outcome", "must be succeeded or failed")
		writeError(w, r, v.Err())
		return
	}
	pid, id := partnerID(r), mux.Vars(r)["id"]
	servePage(s, w, r, domain.CursorDeliveries, func(after []byte, limit int) ([]domain.DeliveryAttempt, []byte, bool, error) {
		page, more, err := s.app.Deliveries(r.Context(), pid, id, app.DeliveryFilter{Outcome: outcome, After: string(after), Limit: limit})
		var last []byte
		if len(page) > 0 {
			last = []byte(page[len(page)-1].ID)
		}
		return page, last, more, err
	}, viewAttempt)
}
