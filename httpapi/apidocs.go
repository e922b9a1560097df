package httpapi

import (
	"crypto/rand"
	"fmt"
	"html/template"
	"mime"
	"net/http"
	"strings"

	"github.com/partnergiving/giving/domain"
)

// The rendered API reference at /docs is the OpenAPI document drawn by
// Redoc (apidocs/redoc.standalone.js, the pinned npm package's bundle, a
// test keeps the two equal), served from the binary like every other asset:
// the page loads nothing from elsewhere, and its policy says so. Redoc
// writes its styles into style elements; they carry the page's nonce
// (docsCSP's %s), which docs.js hands to Redoc, except the two the bundle
// writes as it loads, before it knows the nonce, allowed by their hashes:
// an empty one and its scrollbar styles.
const docsCSP = "default-src 'self'; style-src 'self' 'nonce-%s' 'sha256-47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=' 'sha256-QMIg+bpjm3JdElJ388KYke01izlUW0UoNOeKjpMxdgc='; img-src 'self' data:; object-src 'none'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'"

// landingCSP is the landing page's: no script, nothing loaded at all.
const landingCSP = "default-src 'none'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'"

var (
	docsPage    = template.Must(template.New("docs.html").Funcs(template.FuncMap{"asset": assetURL}).ParseFS(uiFiles, "apidocs/docs.html"))
	landingPage = template.Must(template.ParseFS(uiFiles, "apidocs/landing.html"))
)

func serveDocs(w http.ResponseWriter, r *http.Request) {
	nonce := rand.Text()
	writePage(w, docsPage, fmt.Sprintf(docsCSP, nonce), nonce)
}

// serveRoot answers a browser (one that asks for HTML) with a small landing
// page that links the reference; every other client gets the not-found
// problem any unknown path gets.
func serveRoot(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet || !acceptsHTML(r.Header.Get("Accept")) {
		writeProblem(w, r, domain.ProblemNotFound, "No route matches "+r.Method+" "+r.URL.EscapedPath()+"; the API is under /v1, its reference at /docs.", nil)
		return
	}
	writePage(w, landingPage, landingCSP, nil)
}

// acceptsHTML reports whether an Accept header names text/html, as every
// browser's navigation does; a bare */* (curl, most HTTP libraries) does not.
func acceptsHTML(accept string) bool {
	for _, part := range strings.Split(accept, ",") {
		mt, params, err := mime.ParseMediaType(strings.TrimSpace(part))
		if err == nil && (mt == "text/html" || mt == "application/xhtml+xml") && params["q"] != "0" {
			return true
		}
	}
	return false
}

// writePage answers an HTML page of the API's own under its policy.
func writePage(w http.ResponseWriter, page *template.Template, csp string, data any) {
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Content-Security-Policy", csp)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	_ = page.Execute(w, data)
}
