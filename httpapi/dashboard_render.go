package httpapi

import (
	"bytes"
	"encoding/json"
	"html/template"
	"net/http"
	"strings"

	"github.com/partnergiving/giving/domain"
)

// dashView is what a dashboard page shows: the layout's parts and the
// page's own Data.
type dashView struct {
	Status  int
	Page    string // the template
	Title   string
	Nav     string // the navigation entry the page belongs to
	Problem *problem
	Notice  string
	Data    any

	// Filled in by renderDash.
	Partner string
	Env     domain.Environment
	CSRF    string
}

// dashPages holds one template per page, each the layout with its body.
var dashPages = parsePages("dashboardui", template.FuncMap{
	"asset":   assetURL,
	"formKey": newFormKey,
	"path":    dashPath,
	"join":    strings.Join,
})

// renderDash writes a dashboard page, rendered into a buffer first so that
// a template fault is a clean error page rather than half a page. d is nil
// on the pages a browser sees signed out.
func (s *Server) renderDash(w http.ResponseWriter, r *http.Request, d *dashRequest, v dashView) {
	t, ok := dashPages[v.Page]
	if !ok {
		panic("httpapi: no dashboard page " + v.Page)
	}
	if v.Status == 0 {
		v.Status = http.StatusOK
	}
	v.Env = s.app.Env()
	if d != nil {
		v.Partner, v.CSRF = d.principal.PartnerID, s.csrfToken("dashboard", d.cookie)
	}
	if n, ok := dashNotices[r.URL.Query().Get("notice")]; ok && v.Notice == "" {
		v.Notice = n
	}
	var buf bytes.Buffer
	if err := t.ExecuteTemplate(&buf, "layout.html", v); err != nil {
		logger(r.Context()).Error().Err(err).Str("page", v.Page).Msg("dashboard page failed to render")
		buf.Reset()
		p := problem{Title: domain.ProblemInternal.Title, Status: http.StatusInternalServerError, Detail: "This page could not be drawn.", RequestID: requestID(r.Context())}
		v = dashView{Status: p.Status, Page: "problem", Title: p.Title, Problem: &p, Env: v.Env, Partner: v.Partner, CSRF: v.CSRF}
		if err := dashPages["problem"].ExecuteTemplate(&buf, "layout.html", v); err != nil {
			panic("httpapi: dashboard problem page: " + err.Error())
		}
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(v.Status)
	_, _ = w.Write(buf.Bytes())
}

// prettyJSON indents a JSON document for reading; what is not JSON is
// shown as it is.
func prettyJSON(raw []byte) string {
	var out bytes.Buffer
	if err := json.Indent(&out, raw, "", "  "); err != nil {
		return string(raw)
	}
	return out.String()
}
