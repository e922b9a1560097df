package stripefake

import (
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"regexp"
	"strings"

	"github.com/partnergiving/giving/vendors/stripeidentity"
)

// session is the fake's VerificationSession.
type session struct {
	id                string
	clientSecret      string
	clientReferenceID string
	created           int64
	typ               string
	status            stripeidentity.Status
	lastError         *stripeidentity.LastError
	metadata          map[string]string
	returnURL         string
	livemode          bool
	// token is the hosted page's current single-use token, "" once used.
	token string
	base  string
}

// sessionJSON is the VerificationSession object in the field order of
// Stripe's documented example
// (docs.stripe.com/api/identity/verification_sessions/object).
type sessionJSON struct {
	ID                     string                    `json:"id"`
	Object                 string                    `json:"object"`
	ClientReferenceID      *string                   `json:"client_reference_id"`
	ClientSecret           *string                   `json:"client_secret"`
	Created                int64                     `json:"created"`
	LastError              *stripeidentity.LastError `json:"last_error"`
	LastVerificationReport *string                   `json:"last_verification_report"`
	Livemode               bool                      `json:"livemode"`
	Metadata               map[string]string         `json:"metadata"`
	Options                map[string]any            `json:"options"`
	Redaction              *struct{}                 `json:"redaction"`
	Status                 stripeidentity.Status     `json:"status"`
	Type                   string                    `json:"type"`
	URL                    *string                   `json:"url"`
}

// object renders the session. The client secret and the url are only
// given in API answers while the session requires input; events carry
// neither (see stripeidentity's doc: what events carry is not documented).
func (vs *session) object(inEvent bool) sessionJSON {
	o := sessionJSON{
		ID: vs.id, Object: "identity.verification_session", Created: vs.created,
		LastError: vs.lastError, Livemode: vs.livemode, Metadata: maps.Clone(vs.metadata),
		Options: map[string]any{"document": map[string]any{}}, Status: vs.status, Type: vs.typ,
	}
	if vs.clientReferenceID != "" {
		o.ClientReferenceID = &vs.clientReferenceID
	}
	if !inEvent && vs.status == stripeidentity.StatusRequiresInput && vs.token != "" {
		u := vs.base + "/start/" + vs.token
		o.URL, o.ClientSecret = &u, &vs.clientSecret
	}
	return o
}

// createParams are the parameters Stripe documents for creating a
// VerificationSession (and stripe-go's IdentityVerificationSessionParams
// lists); anything else is refused as Stripe refuses unknown parameters.
var createParams = regexp.MustCompile(`^(type|return_url|client_reference_id|verification_flow|related_customer|related_customer_account|metadata\[[^\[\]]{1,40}\]|options\[document\]\[(allowed_types\]\[\d*|require_id_number|require_live_capture|require_matching_selfie)\]|provided_details\[(email|phone)\]|related_person\[(account|person)\]|expand\[\d*\])$`)

func (s *Server) create(r *http.Request, form url.Values) (int, any) {
	for k := range form {
		if !createParams.MatchString(k) {
			return invalid(k, "parameter_unknown", "Received unknown parameter: %s", k)
		}
	}
	typ := form.Get("type")
	switch {
	case typ == "" && form.Get("verification_flow") == "":
		return invalid("type", "parameter_missing", "Missing required param: type.")
	case typ != "" && typ != "document" && typ != "id_number":
		return invalid("type", "", "Invalid type: must be one of document or id_number")
	}
	if ru := form.Get("return_url"); ru != "" {
		u, err := url.Parse(ru)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return invalid("return_url", "url_invalid", "Not a valid URL")
		}
	}
	metadata := map[string]string{}
	for k, v := range form {
		name, ok := strings.CutPrefix(k, "metadata[")
		if !ok {
			continue
		}
		if len(v[0]) > 500 {
			return invalid(k, "", "Metadata values can have up to 500 characters.")
		}
		metadata[strings.TrimSuffix(name, "]")] = v[0]
	}
	if len(metadata) > 50 {
		return invalid("metadata", "", "You can specify up to 50 metadata keys.")
	}
	id := stripeidentity.NewID("vs_")
	vs := &session{
		id: id, clientSecret: id + "_secret_" + stripeidentity.NewID(""),
		clientReferenceID: form.Get("client_reference_id"),
		created:           s.cfg.Now().Unix(), typ: typ, status: stripeidentity.StatusRequiresInput,
		metadata: metadata, returnURL: form.Get("return_url"), livemode: s.livemode(),
		base: baseURL(r),
	}
	if vs.typ == "" {
		vs.typ = "verification_flow"
	}
	s.newToken(vs)
	s.sessions[id] = vs
	return http.StatusOK, vs.object(false)
}

func (s *Server) newToken(vs *session) {
	vs.token = stripeidentity.NewID("")
	s.tokens[vs.token] = vs.id
}

// missing is the answer for an unknown session id.
func missing(id string) (int, any) {
	return http.StatusNotFound, errorBody{stripeError{Type: "invalid_request_error", Code: "resource_missing", Param: "session", Message: fmt.Sprintf("No such verification session: '%s'", id)}}
}

// retrieve answers with the session. Stripe documents that retrieving a
// session that requires input gives a valid url for a new attempt, so a
// used page token is replaced here.
func (s *Server) retrieve(r *http.Request, _ url.Values) (int, any) {
	vs, ok := s.sessions[r.PathValue("id")]
	if !ok {
		return missing(r.PathValue("id"))
	}
	if vs.status == stripeidentity.StatusRequiresInput && vs.token == "" {
		s.newToken(vs)
	}
	return http.StatusOK, vs.object(false)
}

// cancel cancels a session that requires input, the only status Stripe
// documents as cancelable, and sends identity.verification_session.canceled.
func (s *Server) cancel(r *http.Request, _ url.Values) (int, any) {
	vs, ok := s.sessions[r.PathValue("id")]
	if !ok {
		return missing(r.PathValue("id"))
	}
	if vs.status != stripeidentity.StatusRequiresInput {
		return invalid("", "", "This VerificationSession cannot be canceled because it has a status of %s.", vs.status)
	}
	s.consumeToken(vs)
	vs.status, vs.lastError = stripeidentity.StatusCanceled, nil
	pending := []Event{s.event(vs, stripeidentity.EventCanceled)}
	s.sending.Add(1)
	go func() {
		defer s.sending.Done()
		s.deliver(pending)
	}()
	return http.StatusOK, vs.object(false)
}

func (s *Server) consumeToken(vs *session) {
	delete(s.tokens, vs.token)
	vs.token = ""
}
