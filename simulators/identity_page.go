package simulators

import (
	"bytes"
	"errors"
	"html/template"
	"net/http"
	"slices"
	"strings"

	"github.com/partnergiving/giving/domain"
)

// The stand-in's hosted page, which the service serves on the sandbox
// stack under /standin/stripe/ as it serves its other vendors' stand-ins:
// GET shows the choices, POST sends the chosen outcome as Stripe's webhook
// and takes the donor back to the flow. Like Stripe's page it needs no API
// key and sets no cookie: its address is the donor's alone, so its form
// needs no CSRF token either. It runs no script and loads nothing.

const standinCSP = "default-src 'none'; img-src data:; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"

// standinLabels say what each choice of the page does.
var standinLabels = map[string]string{
	domain.KYCPassed: "Verified: the document and the person match (the flow goes on to payroll)",
	domain.KYCReview: "Not verified: the document could not be verified (the flow shows that a person reviews it)",
	domain.KYCFailed: "Declined: the person declines to be verified (the flow shows the declined page)",
	StandinWait:      "Submitted, undecided: leave the decision to POST /sandbox/simulate/kyc (the flow waits)",
}

type standinChoice struct {
	Value, Label string
	Checked      bool
}

type standinView struct {
	Action  string
	Choices []standinChoice
	Error   string
}

var standinPage = template.Must(template.New("standin").Parse(`<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="referrer" content="no-referrer">
<meta name="robots" content="noindex, nofollow">
<link rel="icon" href="data:,">
<title>{{if .Error}}Error: {{end}}Verify your identity (sandbox stand-in for Stripe Identity)</title>
</head>
<body>
<main>
<h1>Verify your identity</h1>
<p id="sandbox-note"><strong>Sandbox:</strong> this page stands in for Stripe Identity's hosted verification page. It asks for no document: choose how the verification ends. The choice reaches the service as Stripe's signed webhook, through its production webhook edge, and you go back to the giving page.</p>
{{- with .Error}}
<p id="standin-error" role="alert"><strong>Error:</strong> {{.}}</p>
{{- end}}
{{- if .Choices}}
<form method="post" action="{{.Action}}">
  <fieldset>
    <legend>How the verification ends</legend>
    {{- range .Choices}}
    <div>
      <input type="radio" id="choice-{{.Value}}" name="choice" value="{{.Value}}"{{if .Checked}} checked{{end}}>
      <label for="choice-{{.Value}}">{{.Label}}</label>
    </div>
    {{- end}}
  </fieldset>
  <button type="submit" id="finish">Finish</button>
</form>
{{- end}}
</main>
</body>
</html>
`))

// formLimit bounds the page's form.
const formLimit = 16 << 10

// ServeHTTP serves the page at /identity/<token>, below the prefix the
// service mounts it under.
func (st *IdentityStandin) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	token, ok := strings.CutPrefix(r.URL.Path, "/identity/")
	if !ok || token == "" || strings.Contains(token, "/") {
		st.render(w, "", http.StatusNotFound, missingPage)
		return
	}
	switch r.Method {
	case http.MethodGet, http.MethodHead:
		if _, err := st.ticket(token); err != nil {
			st.render(w, "", http.StatusNotFound, missingPage)
			return
		}
		st.render(w, token, http.StatusOK, "")
	case http.MethodPost:
		st.decide(w, r, token)
	default:
		w.Header().Set("Allow", "GET, POST")
		st.render(w, "", http.StatusMethodNotAllowed, "This page takes GET and POST only.")
	}
}

const missingPage = "This verification page does not exist. Go back to the giving page and start again."

// decide sends the chosen outcome and takes the donor back to the flow,
// which shows where the donor now stands: decided, or refused by the edge
// (an expired session, say). Only when the edge could not record it (it
// failed, or was not reached) does the page stay, to try again.
func (st *IdentityStandin) decide(w http.ResponseWriter, r *http.Request, token string) {
	r.Body = http.MaxBytesReader(w, r.Body, formLimit)
	choice := r.PostFormValue("choice")
	if !slices.Contains(StandinChoices, choice) {
		st.render(w, token, http.StatusUnprocessableEntity, "Choose how the verification ends.")
		return
	}
	back, answer, err := st.DecideStandin(r.Context(), token, choice)
	switch {
	case errors.Is(err, ErrStandinToken):
		st.render(w, "", http.StatusNotFound, missingPage)
	case err != nil || answer.StatusCode >= 500:
		st.render(w, token, http.StatusServiceUnavailable, "The service did not record this outcome. Please try again in a moment.")
	default:
		http.Redirect(w, r, back, http.StatusSeeOther)
	}
}

// render writes the page: with its form for a token the stand-in issued,
// with only message for none ("").
func (st *IdentityStandin) render(w http.ResponseWriter, token string, status int, message string) {
	v := standinView{Action: StandinPath + token, Error: message}
	if token != "" {
		for _, c := range StandinChoices {
			v.Choices = append(v.Choices, standinChoice{Value: c, Label: standinLabels[c], Checked: c == domain.KYCPassed})
		}
	}
	var buf bytes.Buffer
	if err := standinPage.Execute(&buf, v); err != nil {
		http.Error(w, "the stand-in's page failed to render", http.StatusInternalServerError)
		return
	}
	h := w.Header()
	h.Set("Content-Security-Policy", standinCSP)
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Cache-Control", "no-store")
	h.Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}
