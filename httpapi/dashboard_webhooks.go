package httpapi

import (
	"encoding/json"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"time"

	"github.com/gorilla/mux"

	"github.com/partnergiving/giving/app"
	"github.com/partnergiving/giving/domain"
)

// The dashboard's webhook pages: the overview, the endpoints, one endpoint
// with its attempts, and the actions on it. Each reads and acts through the
// API's routes (callAPI).

// dashMaxAttempts is as many attempts as one endpoint's list answers at
// once: the overview and the event page read one such page per endpoint.
const dashMaxAttempts = "100"

type eventTypesPage struct {
	Data []EventType `json:"data"`
}

// endpointHealth is one endpoint on the overview.
type endpointHealth struct {
	endpointView
	Last      *attemptView
	Failing   bool
	Succeeded int
	Failed    int
}

type overviewData struct {
	Endpoints []endpointHealth
	Chart     deliveryChart
	// Events are the partner's newest events, newest first.
	Events []envelopeOf
}

type recentAttempt struct {
	attemptView
	EndpointID string
}

func (s *Server) dashOverview(w http.ResponseWriter, r *http.Request, d *dashRequest) {
	var eps listPage[endpointView]
	if !s.dashGet(w, r, d, "/v1/webhook_endpoints?limit=100", &eps) {
		return
	}
	now := s.now()
	var data overviewData
	for _, ep := range eps.Data {
		var atts listPage[attemptView]
		if !s.dashGet(w, r, d, "/v1/webhook_endpoints/"+url.PathEscape(ep.ID)+"/deliveries?limit="+dashMaxAttempts, &atts) {
			return
		}
		h := endpointHealth{endpointView: ep, Failing: ep.Status != "enabled"}
		if len(atts.Data) > 0 {
			h.Last = &atts.Data[0]
			h.Failing = h.Failing || atts.Data[0].Outcome != string(domain.DeliverySucceeded)
		}
		for _, a := range atts.Data {
			if a.Outcome == string(domain.DeliverySucceeded) {
				h.Succeeded++
			} else {
				h.Failed++
			}
		}
		data.Endpoints = append(data.Endpoints, h)
	}
	sort.SliceStable(data.Endpoints, func(i, j int) bool { return data.Endpoints[i].Failing && !data.Endpoints[j].Failing })
	counts, err := s.app.DeliveriesByHour(r.Context(), d.principal.PartnerID, now)
	if err != nil {
		s.dashFail(w, r, d, err)
		return
	}
	data.Chart = drawDeliveries(now, counts)
	latest, err := s.app.LatestEvents(d.principal.PartnerID, overviewEvents)
	if err != nil {
		s.dashFail(w, r, d, err)
		return
	}
	for _, raw := range latest {
		var e envelopeOf
		if err := json.Unmarshal(raw, &e); err != nil {
			s.dashFail(w, r, d, err)
			return
		}
		data.Events = append(data.Events, e)
	}
	s.renderDash(w, r, d, dashView{Page: "overview", Title: "Overview", Nav: "overview", Data: data})
}

// overviewEvents is how many of the newest events the overview lists.
const overviewEvents = 10

type endpointsData struct {
	Endpoints []endpointView
	Types     []EventType
	Form      endpointForm
}

// endpointForm is the create and edit form's values.
type endpointForm struct {
	URL         string
	Description string
	Types       map[string]bool
}

func (s *Server) dashEndpoints(w http.ResponseWriter, r *http.Request, d *dashRequest) {
	var eps listPage[endpointView]
	var types eventTypesPage
	if !s.dashGet(w, r, d, "/v1/webhook_endpoints?limit=100", &eps) || !s.dashGet(w, r, d, "/v1/event_types", &types) {
		return
	}
	s.renderDash(w, r, d, dashView{Page: "endpoints", Title: "Webhook endpoints", Nav: "endpoints",
		Data: endpointsData{Endpoints: eps.Data, Types: types.Data, Form: endpointForm{Types: map[string]bool{}}}})
}

// endpointBody is the API body a create or edit form makes: the URL, the
// description and the ticked event types ("*" for all).
func endpointBody(r *http.Request) map[string]any {
	types := r.PostForm["event_types"]
	if types == nil {
		types = []string{}
	}
	return map[string]any{"url": r.PostFormValue("url"), "event_types": types, "description": r.PostFormValue("description")}
}

func (s *Server) dashCreateEndpoint(w http.ResponseWriter, r *http.Request, d *dashRequest) {
	body := endpointBody(r)
	if scheme := r.PostFormValue("signature_scheme"); scheme != "" {
		body["signature_scheme"] = scheme
	}
	var created createdEndpointView
	if s.dashAct(w, r, d, http.MethodPost, "/v1/webhook_endpoints", body, &created) {
		s.renderDash(w, r, d, dashView{Page: "secret", Title: "Endpoint created", Nav: "endpoints", Data: created})
	}
}

type endpointData struct {
	Endpoint endpointView
	Attempts []recentAttempt
	Outcome  string
	Next     string
	Types    []EventType
	Form     endpointForm
	// Since is the recover form's default start: a day ago.
	Since string
}

func (s *Server) dashEndpoint(w http.ResponseWriter, r *http.Request, d *dashRequest) {
	id := mux.Vars(r)["id"]
	data := endpointData{Since: s.now().Add(-24 * time.Hour).UTC().Format(formMinute)}
	if !s.dashGet(w, r, d, "/v1/webhook_endpoints/"+url.PathEscape(id), &data.Endpoint) {
		return
	}
	q := url.Values{"limit": {"50"}}
	data.Outcome = r.URL.Query().Get("outcome")
	if data.Outcome != "" {
		q.Set("outcome", data.Outcome)
	}
	if c := r.URL.Query().Get("cursor"); c != "" {
		q.Set("cursor", c)
	}
	var atts listPage[attemptView]
	if !s.dashGet(w, r, d, "/v1/webhook_endpoints/"+url.PathEscape(id)+"/deliveries?"+q.Encode(), &atts) {
		return
	}
	for _, a := range atts.Data {
		data.Attempts = append(data.Attempts, recentAttempt{attemptView: a, EndpointID: id})
	}
	if atts.NextCursor != nil {
		q.Set("cursor", *atts.NextCursor)
		q.Del("limit")
		data.Next = q.Encode()
	}
	s.renderDash(w, r, d, dashView{Page: "endpoint", Title: "Endpoint " + data.Endpoint.URL, Nav: "endpoints", Data: data})
}

func (s *Server) dashEditEndpoint(w http.ResponseWriter, r *http.Request, d *dashRequest) {
	id := mux.Vars(r)["id"]
	var data endpointData
	var types eventTypesPage
	if !s.dashGet(w, r, d, "/v1/webhook_endpoints/"+url.PathEscape(id), &data.Endpoint) || !s.dashGet(w, r, d, "/v1/event_types", &types) {
		return
	}
	data.Types = types.Data
	data.Form = endpointForm{URL: data.Endpoint.URL, Description: data.Endpoint.Description, Types: map[string]bool{}}
	for _, t := range data.Endpoint.EventTypes {
		data.Form.Types[t] = true
	}
	s.renderDash(w, r, d, dashView{Page: "endpoint_edit", Title: "Edit endpoint", Nav: "endpoints", Data: data})
}

func (s *Server) dashUpdateEndpoint(w http.ResponseWriter, r *http.Request, d *dashRequest) {
	id := mux.Vars(r)["id"]
	if s.dashAct(w, r, d, http.MethodPatch, "/v1/webhook_endpoints/"+url.PathEscape(id), endpointBody(r), nil) {
		dashDone(w, r, "/endpoints/"+url.PathEscape(id), "updated")
	}
}

func (s *Server) dashConfirmDelete(w http.ResponseWriter, r *http.Request, d *dashRequest) {
	var ep endpointView
	if s.dashGet(w, r, d, "/v1/webhook_endpoints/"+url.PathEscape(mux.Vars(r)["id"]), &ep) {
		s.renderDash(w, r, d, dashView{Page: "endpoint_delete", Title: "Delete this endpoint?", Nav: "endpoints", Data: ep})
	}
}

func (s *Server) dashDeleteEndpoint(w http.ResponseWriter, r *http.Request, d *dashRequest) {
	if s.dashAct(w, r, d, http.MethodDelete, "/v1/webhook_endpoints/"+url.PathEscape(mux.Vars(r)["id"]), nil, nil) {
		dashDone(w, r, "/endpoints", "deleted")
	}
}

type testResult struct {
	EndpointID string
	testDeliveryView
}

func (s *Server) dashTestEndpoint(w http.ResponseWriter, r *http.Request, d *dashRequest) {
	id := mux.Vars(r)["id"]
	res := testResult{EndpointID: id}
	if s.dashAct(w, r, d, http.MethodPost, "/v1/webhook_endpoints/"+url.PathEscape(id)+"/test", struct{}{}, &res.testDeliveryView) {
		s.renderDash(w, r, d, dashView{Page: "test_result", Title: "Test delivery", Nav: "endpoints", Data: res})
	}
}

func (s *Server) dashRotateSecret(w http.ResponseWriter, r *http.Request, d *dashRequest) {
	body := map[string]any{}
	if v := r.PostFormValue("expire_current_in"); v != "" {
		secs, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			s.dashProblem(w, r, d, problem{Title: domain.ProblemValidation.Title, Status: domain.ProblemValidation.Status,
				Detail: "How long the previous secret keeps signing must be a number of seconds."})
			return
		}
		body["expire_current_in"] = secs
	}
	var rotated createdEndpointView
	if s.dashAct(w, r, d, http.MethodPost, "/v1/webhook_endpoints/"+url.PathEscape(mux.Vars(r)["id"])+"/rotate_secret", body, &rotated) {
		s.renderDash(w, r, d, dashView{Page: "secret", Title: "Secret rotated", Nav: "endpoints", Data: rotated})
	}
}

func (s *Server) dashSwitchEndpoint(w http.ResponseWriter, r *http.Request, d *dashRequest) {
	vars := mux.Vars(r)
	if s.dashAct(w, r, d, http.MethodPost, "/v1/webhook_endpoints/"+url.PathEscape(vars["id"])+"/"+vars["switch"], struct{}{}, nil) {
		dashDone(w, r, "/endpoints/"+url.PathEscape(vars["id"]), vars["switch"]+"d")
	}
}

func (s *Server) dashResend(w http.ResponseWriter, r *http.Request, d *dashRequest) {
	id := mux.Vars(r)["id"]
	body := map[string]string{"event_id": r.PostFormValue("event_id")}
	if s.dashAct(w, r, d, http.MethodPost, "/v1/webhook_endpoints/"+url.PathEscape(id)+"/resend", body, nil) {
		dashDone(w, r, "/endpoints/"+url.PathEscape(id), "resent")
	}
}

func (s *Server) dashRecover(w http.ResponseWriter, r *http.Request, d *dashRequest) {
	id := mux.Vars(r)["id"]
	body := map[string]*string{}
	for _, name := range []string{"since", "until"} {
		t, err := formTime(r.PostFormValue(name))
		if err != nil {
			s.dashProblem(w, r, d, problem{Title: domain.ProblemInvalidRange.Title, Status: domain.ProblemInvalidRange.Status,
				Detail: name + " must be a date and time such as 2026-11-20 00:00 (UTC)."})
			return
		}
		if t != nil {
			body[name] = t
		}
	}
	var started struct {
		RecoveryID string `json:"recovery_id"`
	}
	if s.dashAct(w, r, d, http.MethodPost, "/v1/webhook_endpoints/"+url.PathEscape(id)+"/recover", body, &started) {
		http.Redirect(w, r, dashPath("/endpoints/"+url.PathEscape(id)+"/recoveries/"+url.PathEscape(started.RecoveryID)), http.StatusSeeOther)
	}
}

func (s *Server) dashRecovery(w http.ResponseWriter, r *http.Request, d *dashRequest) {
	vars := mux.Vars(r)
	var rec recoveryView
	if s.dashGet(w, r, d, "/v1/webhook_endpoints/"+url.PathEscape(vars["id"])+"/recoveries/"+url.PathEscape(vars["recovery_id"]), &rec) {
		s.renderDash(w, r, d, dashView{Page: "recovery", Title: "Recovery", Nav: "endpoints", Data: rec})
	}
}

// attemptData is one attempt and the request it sent.
type attemptData struct {
	EndpointID string
	Attempt    attemptView
	Headers    [][2]string
	Body       string
}

// dashAttempt shows one attempt: its result and the request it sent, the
// event's envelope, with the headers the dispatcher adds (the signatures
// themselves are not kept).
func (s *Server) dashAttempt(w http.ResponseWriter, r *http.Request, d *dashRequest) {
	vars := mux.Vars(r)
	id := vars["id"]
	var atts listPage[attemptView]
	if !s.dashGet(w, r, d, "/v1/webhook_endpoints/"+url.PathEscape(id)+"/deliveries?limit="+dashMaxAttempts, &atts) {
		return
	}
	data := attemptData{EndpointID: id}
	found := false
	for _, a := range atts.Data {
		if a.ID == vars["attempt_id"] {
			data.Attempt, found = a, true
		}
	}
	if !found {
		s.dashProblem(w, r, d, problem{Title: domain.ProblemNotFound.Title, Status: http.StatusNotFound,
			Detail: "This endpoint has no attempt " + vars["attempt_id"] + " among the attempts it keeps."})
		return
	}
	ts := ""
	if at, err := time.Parse(time.RFC3339Nano, data.Attempt.AttemptedAt); err == nil {
		ts = strconv.FormatInt(at.Unix(), 10)
	}
	data.Headers = [][2]string{
		{"Content-Type", "application/json"}, {"User-Agent", domain.WebhookUserAgent},
		{domain.StandardIDHeader, data.Attempt.EventID}, {domain.StandardTimestampHeader, ts},
		{domain.StandardSignatureHeader, "(not kept)"}, {domain.WebhookSignatureHeader, "(not kept)"},
		{domain.WebhookAttemptHeader, strconv.Itoa(data.Attempt.Attempt)},
	}
	a := s.callAPI(r, d, http.MethodGet, "/v1/events/"+url.PathEscape(data.Attempt.EventID), "", nil)
	if a.ok() {
		data.Body = prettyJSON(a.body)
	}
	s.renderDash(w, r, d, dashView{Page: "attempt", Title: "Delivery attempt", Nav: "endpoints", Data: data})
}

// eventDeliveries finds the attempts of one event among those each of the
// partner's endpoints keeps, for the event page.
func (s *Server) eventDeliveries(w http.ResponseWriter, r *http.Request, d *dashRequest, eventID string) ([]recentAttempt, bool) {
	var eps listPage[endpointView]
	if !s.dashGet(w, r, d, "/v1/webhook_endpoints?limit=100", &eps) {
		return nil, false
	}
	var out []recentAttempt
	for _, ep := range eps.Data {
		var atts listPage[attemptView]
		if !s.dashGet(w, r, d, "/v1/webhook_endpoints/"+url.PathEscape(ep.ID)+"/deliveries?limit="+dashMaxAttempts, &atts) {
			return nil, false
		}
		for _, a := range atts.Data {
			if a.EventID == eventID {
				out = append(out, recentAttempt{attemptView: a, EndpointID: ep.ID})
			}
		}
	}
	return out, true
}

// dashPath is the address of a dashboard page.
func dashPath(p string) string { return app.DashboardPath + p }

// envelopeOf is the part of an envelope a list shows.
type envelopeOf struct {
	EventID    string          `json:"event_id"`
	EventType  string          `json:"event_type"`
	OccurredAt string          `json:"occurred_at"`
	ChurchID   string          `json:"church_id"`
	Payload    json.RawMessage `json:"payload"`
}
