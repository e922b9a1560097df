package httpapi

import (
	"bytes"
	"errors"
	"html/template"
	"net/http"
	"slices"

	"github.com/gorilla/mux"

	"github.com/partnergiving/giving/domain"
	"github.com/partnergiving/giving/simulators"
)

// The sandbox's stand-in for Stripe Identity's hosted verification page
// (simulators.IdentityStandin), served on the sandbox stack only, outside
// the flow's own pages: the identity step sends the donor here as
// production sends them to Stripe. The donor chooses how the verification
// ends; the stand-in sends Stripe's webhook through the production edge and
// the donor goes back to the flow. Like Stripe's page it needs no API key
// and sets no cookie: its address is the donor's alone, so its form needs
// no CSRF token either.

const standinCSP = "default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"

// standinLabels say what each choice of the page does.
var standinLabels = map[string]string{
	domain.KYCPassed:       "Verified: the document and the person match (the flow goes on to payroll)",
	domain.KYCReview:       "Not verified: the document could not be verified (the flow shows that a person reviews it)",
	domain.KYCFailed:       "Declined: the person declines to be verified (the flow shows the declined page)",
	simulators.StandinWait: "Submitted, undecided: leave the decision to POST /sandbox/simulate/kyc (the flow waits)",
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

var standinPage = template.Must(template.New("standin").Funcs(template.FuncMap{"asset": assetURL}).Parse(`<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="referrer" content="no-referrer">
<meta name="robots" content="noindex, nofollow">
<title>{{if .Error}}Error: {{end}}Verify your identity (sandbox stand-in for Stripe Identity)</title>
<link rel="stylesheet" href="{{asset "flow.css"}}">
<link rel="icon" href="{{asset "icon.svg"}}" type="image/svg+xml">
</head>
<body>
<main id="main">
<h1>Verify your identity</h1>
<p class="note" id="sandbox-note"><strong>Sandbox:</strong> this page stands in for Stripe Identity's hosted verification page. It asks for no document: choose how the verification ends. The choice reaches the service as Stripe's signed webhook, through its production webhook edge, and you go back to the giving page.</p>
{{- with .Error}}
<p class="error" id="standin-error" role="alert"><span class="visually-hidden">Error: </span>{{.}}</p>
{{- end}}
{{- if .Choices}}
<form method="post" action="{{.Action}}">
  <fieldset class="field">
    <legend>How the verification ends</legend>
    {{- range .Choices}}
    <div class="radio">
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

// standinRoutes mounts the stand-in's page when the stack has one.
func (s *Server) standinRoutes(r *mux.Router) {
	if s.standin == nil {
		return
	}
	path := simulators.StandinPath + "{token}"
	r.HandleFunc(path, s.standinShow).Methods(http.MethodGet)
	r.HandleFunc(path, s.standinDecide).Methods(http.MethodPost)
}

// standinShow shows the page of a token the stand-in issued.
func (s *Server) standinShow(w http.ResponseWriter, r *http.Request) {
	if err := s.standin.OpenStandin(mux.Vars(r)["token"]); err != nil {
		s.renderStandin(w, r, http.StatusNotFound, "This verification page does not exist. Go back to the giving page and start again.")
		return
	}
	s.renderStandin(w, r, http.StatusOK, "")
}

// standinDecide sends the chosen outcome and takes the donor back to the
// flow, which shows where the donor now stands: decided, or refused by the
// edge (an expired session, say). Only when the edge could not record it
// (it failed, or was not reached) does the page stay, to try again.
func (s *Server) standinDecide(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, flowFormLimit)
	choice := r.PostFormValue("choice")
	if !slices.Contains(simulators.StandinChoices, choice) {
		s.renderStandin(w, r, http.StatusUnprocessableEntity, "Choose how the verification ends.")
		return
	}
	back, answer, err := s.standin.DecideStandin(r.Context(), mux.Vars(r)["token"], choice)
	switch {
	case errors.Is(err, simulators.ErrStandinToken):
		s.renderStandin(w, r, http.StatusNotFound, "This verification page does not exist. Go back to the giving page and start again.")
		return
	case err != nil || answer.StatusCode >= 500:
		logger(r.Context()).Warn().Err(err).Int("edge_status", answer.StatusCode).Msg("identity stand-in could not deliver its webhook")
		s.renderStandin(w, r, http.StatusServiceUnavailable, "The service did not record this outcome. Please try again in a moment.")
		return
	}
	http.Redirect(w, r, back, http.StatusSeeOther)
}

func (s *Server) renderStandin(w http.ResponseWriter, r *http.Request, status int, message string) {
	v := standinView{Action: r.URL.Path, Error: message}
	for _, c := range simulators.StandinChoices {
		if status == http.StatusNotFound {
			break
		}
		v.Choices = append(v.Choices, standinChoice{Value: c, Label: standinLabels[c], Checked: c == domain.KYCPassed})
	}
	var buf bytes.Buffer
	if err := standinPage.Execute(&buf, v); err != nil {
		s.flowFail(w, r, err)
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
