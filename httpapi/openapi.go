package httpapi

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"html/template"
	"net/http"

	"github.com/gorilla/mux"

	"github.com/partnergiving/giving/domain"
	"go.yaml.in/yaml/v3"
)

// OpenAPIYAML is the interface description, OpenAPI 3.1.0. Integration tests
// validate every response against it, so it cannot drift from the service.
//
//go:embed openapi.yaml
var OpenAPIYAML []byte

// openAPIJSON is the same document as JSON, converted once at start-up.
var openAPIJSON = mustJSON(OpenAPIYAML)

func mustJSON(y []byte) []byte {
	var doc any
	if err := yaml.Unmarshal(y, &doc); err != nil {
		panic(fmt.Sprintf("httpapi: openapi.yaml: %v", err))
	}
	out, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		panic(fmt.Sprintf("httpapi: openapi.yaml to JSON: %v", err))
	}
	return out
}

func serveOpenAPIYAML(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/yaml")
	_, _ = w.Write(OpenAPIYAML)
}

func serveOpenAPIJSON(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(openAPIJSON)
}

var problemPages = template.Must(template.New("problems").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width,initial-scale=1">
<title>{{if .One}}{{.One.Title}}{{else}}Problem types{{end}} · Partner Giving API</title></head>
<body style="font-family:system-ui,sans-serif;max-width:44rem;margin:2rem auto;padding:0 1rem;line-height:1.5">
{{if .One}}<h1>{{.One.Title}}</h1><p><code>type: {{.One.TypeURI}}</code> · HTTP {{.One.Status}}</p><p>{{.One.About}}</p><p><a href="/problems">All problem types</a></p>
{{else}}<h1>Problem types</h1><p>Every error is <code>application/problem+json</code> with <code>type</code>, <code>title</code>, <code>status</code>, <code>detail</code> and <code>request_id</code>; validation errors add <code>errors</code>, a list of <code>{field, detail}</code>.</p>
<dl>{{range .All}}<dt><a href="{{.TypeURI}}"><code>{{.Code}}</code></a> · {{.Status}} {{.Title}}</dt><dd>{{.About}}</dd>{{end}}</dl>{{end}}
</body></html>`))

func serveProblemIndex(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	_ = problemPages.Execute(w, map[string]any{"All": domain.Problems()})
}

func serveProblem(w http.ResponseWriter, r *http.Request) {
	p, ok := domain.ProblemFor(domain.Code(mux.Vars(r)["slug"]))
	if !ok || p.Flow {
		writeProblem(w, r, domain.ProblemNotFound, "No such problem type.", nil)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	_ = problemPages.Execute(w, map[string]any{"One": p})
}
