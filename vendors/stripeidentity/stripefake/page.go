package stripefake

import (
	"fmt"
	"html/template"
	"net/http"

	"github.com/partnergiving/giving/vendors/stripeidentity"
)

// Choice is what the donor does on the hosted page.
type Choice string

// The choices the stand-in page offers.
const (
	// Verify: the donor submits and every check passes (processing, then
	// verified).
	Verify Choice = "verify"
	// Unverified: the donor submits and the document check fails
	// (processing, then requires_input with document_unverified_other).
	Unverified Choice = "unverified"
	// Decline: the donor declines to be verified (requires_input with
	// consent_declined).
	Decline Choice = "decline"
	// Cancel: the session is canceled, as the API or the Dashboard would
	// cancel it (canceled).
	Cancel Choice = "cancel"
	// Leave: the donor goes back without submitting; nothing changes.
	Leave Choice = "leave"
)

var choices = []struct {
	Choice Choice
	Label  string
}{
	{Verify, "Verify my identity"},
	{Unverified, "Submit a document that cannot be verified"},
	{Decline, "Decline to be verified"},
	{Cancel, "Cancel this verification"},
	{Leave, "Go back without submitting"},
}

var pageTemplate = template.Must(template.New("page").Parse(`<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Verify your identity (test stand-in)</title>
</head>
<body>
<main>
<h1>Verify your identity</h1>
<p>This page stands in for Stripe Identity's hosted verification page in tests. Choose how this verification ends.</p>
<form method="post" action="/start/{{.Token}}">
<ul>
{{range .Choices}}<li><button type="submit" name="choice" value="{{.Choice}}">{{.Label}}</button></li>
{{end}}</ul>
</form>
</main>
</body>
</html>
`))

var gonePage = `<!doctype html>
<html lang="en">
<head><meta charset="utf-8"><title>Link expired</title></head>
<body><main><h1>This verification link has expired</h1><p>Return to the site that sent you here to get a new one.</p></main></body>
</html>
`

// page serves the hosted verification page of a session's url.
func (s *Server) page(w http.ResponseWriter, r *http.Request) {
	token := r.PathValue("token")
	s.mu.Lock()
	_, ok := s.tokens[token]
	s.mu.Unlock()
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Content-Security-Policy", "default-src 'none'; form-action 'self' http: https:")
	if !ok {
		w.WriteHeader(http.StatusGone)
		fmt.Fprint(w, gonePage)
		return
	}
	pageTemplate.Execute(w, map[string]any{"Token": token, "Choices": choices})
}

// submit ends the page as the donor chose, sends the resulting webhooks,
// and only then redirects the browser to the return_url, so that a test
// finds the outcome recorded when the browser lands.
func (s *Server) submit(w http.ResponseWriter, r *http.Request) {
	token := r.PathValue("token")
	s.mu.Lock()
	id, ok := s.tokens[token]
	s.mu.Unlock()
	if !ok {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.WriteHeader(http.StatusGone)
		fmt.Fprint(w, gonePage)
		return
	}
	returnURL, err := s.Complete(id, Choice(r.PostFormValue("choice")))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	if returnURL == "" {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprint(w, `<!doctype html><html lang="en"><head><meta charset="utf-8"><title>Done</title></head><body><main><h1>Done</h1><p>No return URL was given.</p></main></body></html>`)
		return
	}
	http.Redirect(w, r, returnURL, http.StatusSeeOther)
}

// Complete ends a session's hosted page as the donor's choice would, sends
// the webhooks, and returns the session's return_url. Tests without a
// browser call it directly.
func (s *Server) Complete(sessionID string, c Choice) (returnURL string, err error) {
	s.mu.Lock()
	vs, ok := s.sessions[sessionID]
	if !ok {
		s.mu.Unlock()
		return "", fmt.Errorf("stripefake: no session %s", sessionID)
	}
	if vs.token == "" {
		s.mu.Unlock()
		return "", fmt.Errorf("stripefake: session %s has no usable page (status %s)", sessionID, vs.status)
	}
	events, err := s.apply(vs, c)
	returnURL = vs.returnURL
	s.mu.Unlock()
	if err != nil {
		return "", err
	}
	s.deliver(events)
	return returnURL, nil
}

// apply changes vs as the choice does and renders the events Stripe sends
// for each status it passes through. The caller holds the lock.
func (s *Server) apply(vs *session, c Choice) ([]Event, error) {
	var events []Event
	move := func(status stripeidentity.Status, lastErr *stripeidentity.LastError, typ string) {
		vs.status, vs.lastError = status, lastErr
		events = append(events, s.event(vs, typ))
	}
	switch c {
	case Verify:
		move(stripeidentity.StatusProcessing, nil, stripeidentity.EventProcessing)
		move(stripeidentity.StatusVerified, nil, stripeidentity.EventVerified)
	case Unverified:
		move(stripeidentity.StatusProcessing, nil, stripeidentity.EventProcessing)
		move(stripeidentity.StatusRequiresInput, &stripeidentity.LastError{Code: "document_unverified_other", Reason: "The document could not be verified."}, stripeidentity.EventRequiresInput)
	case Decline:
		move(stripeidentity.StatusRequiresInput, &stripeidentity.LastError{Code: "consent_declined", Reason: "The user declined to be verified by Stripe."}, stripeidentity.EventRequiresInput)
	case Cancel:
		move(stripeidentity.StatusCanceled, nil, stripeidentity.EventCanceled)
	case Leave:
		return nil, nil
	default:
		return nil, fmt.Errorf("stripefake: unknown choice %q", c)
	}
	s.consumeToken(vs)
	return events, nil
}
