package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/partnergiving/giving/httpapi/apitest"
)

// leaks are fragments of Go error strings and internals that must never
// reach a partner.
var leaks = []string{"json:", "strconv", "runtime", "goroutine", ".go:", "nats:", "bolt", "panic", "invalid character", "unexpected EOF", "cannot unmarshal"}

// checkProblem asserts that resp is a problem+json answer of the catalogue
// with the given status and slug, and returns its body.
func checkProblem(t *testing.T, resp *apitest.Response, status int, slug string) map[string]any {
	t.Helper()
	if resp.Status != status {
		t.Fatalf("status %d, want %d: %s", resp.Status, status, resp.Body)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "application/problem+json" {
		t.Fatalf("content type %q, want application/problem+json", ct)
	}
	var p map[string]any
	if err := json.Unmarshal(resp.Body, &p); err != nil {
		t.Fatalf("problem body: %v: %s", err, resp.Body)
	}
	if p["type"] != "/problems/"+slug || p["status"] != float64(status) {
		t.Fatalf("problem type %v status %v, want /problems/%s %d", p["type"], p["status"], slug, status)
	}
	for _, k := range []string{"title", "detail", "request_id"} {
		if s, _ := p[k].(string); s == "" {
			t.Fatalf("problem lacks %s: %s", k, resp.Body)
		}
	}
	// A replayed answer is the original body, with the original request's
	// id; the header names this request.
	replayed := resp.Header.Get("Idempotent-Replayed") == "true"
	if rid := resp.Header.Get("Request-Id"); rid == "" || (rid != p["request_id"] && !replayed) {
		t.Fatalf("Request-Id header %q, body request_id %v", rid, p["request_id"])
	}
	// Ids are random letters and digits, which can spell a fragment
	// ("...bOLt..."): they are left out of the search.
	text := strings.ToLower(serviceIDs.ReplaceAllString(string(resp.Body), "<id>"))
	for _, l := range leaks {
		if strings.Contains(text, strings.ToLower(l)) {
			t.Fatalf("problem leaks %q: %s", l, resp.Body)
		}
	}
	return p
}

// serviceIDs matches the service's ids: a prefix and a KSUID's 27 letters
// and digits.
var serviceIDs = regexp.MustCompile(`\b[a-z]+_[0-9A-Za-z]{27}\b`)

// fieldErrors returns the problem's errors list as field → detail.
func fieldErrors(t *testing.T, p map[string]any) map[string]string {
	t.Helper()
	list, _ := p["errors"].([]any)
	out := map[string]string{}
	for _, e := range list {
		m := e.(map[string]any)
		f, _ := m["field"].(string)
		d, _ := m["detail"].(string)
		if f == "" || d == "" {
			t.Fatalf("error entry without field or detail: %v", m)
		}
		out[f] = d
	}
	return out
}

// rawDo sends a request that the OpenAPI document cannot describe (an
// unknown route, a wrong method), so it is not validated against it.
func rawDo(t *testing.T, method, url string, body []byte, headers map[string]string) *apitest.Response {
	t.Helper()
	req, err := http.NewRequestWithContext(context.Background(), method, url, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return &apitest.Response{Status: resp.StatusCode, Header: resp.Header, Body: data}
}

func TestUnknownRouteAndWrongMethod(t *testing.T) {
	t.Parallel()
	ts := startStack(t)
	c, _ := ts.partner(t)
	auth := map[string]string{"Authorization": "Bearer " + c.Key}

	checkProblem(t, rawDo(t, http.MethodGet, ts.URL+"/v1/nope", nil, auth), 404, "not-found")
	checkProblem(t, rawDo(t, http.MethodGet, ts.URL+"/nope", nil, nil), 404, "not-found")
	checkProblem(t, rawDo(t, http.MethodGet, ts.URL+"/v1/churches/", nil, auth), 404, "not-found")

	resp := rawDo(t, http.MethodDelete, ts.URL+"/v1/churches", nil, auth)
	checkProblem(t, resp, 405, "method-not-allowed")
	if got := resp.Header.Get("Allow"); got != "GET" {
		t.Fatalf("Allow %q, want GET", got)
	}
	resp = rawDo(t, http.MethodDelete, ts.URL+"/v1/churches/import", nil, auth)
	checkProblem(t, resp, 405, "method-not-allowed")
	// GET and PATCH also match, as /v1/churches/{id} with the id "import".
	if got := resp.Header.Get("Allow"); got != "GET, POST, PATCH" {
		t.Fatalf("Allow %q, want GET, POST, PATCH", got)
	}
	resp = rawDo(t, http.MethodPut, ts.URL+"/v1/churches/ch_x", nil, auth)
	checkProblem(t, resp, 405, "method-not-allowed")
	if got := resp.Header.Get("Allow"); got != "GET, PATCH" {
		t.Fatalf("Allow %q, want GET, PATCH", got)
	}
}

func TestRequestErrorsAreProblems(t *testing.T) {
	t.Parallel()
	ts := startStack(t)
	c, _ := ts.partner(t)
	before := ts.lastSeq(t)
	post := func(body string, headers apitest.Header) *apitest.Response {
		return c.Do(http.MethodPost, "/v1/churches/import", body, headers)
	}

	for _, body := range []string{`{"churches": [`, `{"churches":[]} {}`, `[]`, `"text"`, `nul`, `{"churches":[{"name":"a"}]}x`, ` `} {
		checkProblem(t, post(body, nil), 400, "malformed-json")
	}
	checkProblem(t, post("", apitest.Header{"Content-Type": ""}), 400, "malformed-json")
	checkProblem(t, post(`{"churches":[]}`, apitest.Header{"Content-Type": "text/plain"}), 415, "unsupported-media-type")
	checkProblem(t, post(`{"churches":[]}`, apitest.Header{"Content-Type": "application/x-www-form-urlencoded"}), 415, "unsupported-media-type")
	if r := post(`{"churches":[]}`, apitest.Header{"Content-Type": "application/json; charset=utf-8"}); r.Status != 200 {
		t.Fatalf("json with charset: %d %s", r.Status, r.Body)
	}

	big := `{"churches":[{"name":"` + strings.Repeat("x", 1<<20) + `"}]}`
	checkProblem(t, post(big, nil), 413, "payload-too-large")

	p := checkProblem(t, post(`{"churches":"x"}`, nil), 422, "validation-error")
	if fe := fieldErrors(t, p); fe["churches"] == "" {
		t.Fatalf("errors %v lack churches", p["errors"])
	}
	p = checkProblem(t, post(`{}`, nil), 422, "validation-error")
	if fe := fieldErrors(t, p); fe["churches"] == "" {
		t.Fatalf("errors %v lack churches", p["errors"])
	}
	p = checkProblem(t, post(`{"churches":null}`, nil), 422, "validation-error")
	if fe := fieldErrors(t, p); fe["churches"] == "" {
		t.Fatalf("errors %v lack churches", p["errors"])
	}
	p = checkProblem(t, post(`{"churches":[],"color":"red"}`, nil), 422, "validation-error")
	if fe := fieldErrors(t, p); fe["color"] == "" {
		t.Fatalf("unknown field: errors %v lack color", p["errors"])
	}

	p = checkProblem(t, c.Do(http.MethodGet, "/v1/churches?limit=abc", nil, nil), 422, "validation-error")
	if fe := fieldErrors(t, p); fe["limit"] == "" {
		t.Fatalf("errors %v lack limit", p["errors"])
	}
	checkProblem(t, c.Do(http.MethodGet, "/v1/churches?limit=101", nil, nil), 422, "validation-error")
	checkProblem(t, c.Do(http.MethodGet, "/v1/churches?cursor=garbage", nil, nil), 400, "invalid-cursor")
	checkProblem(t, c.Do(http.MethodGet, "/v1/churches/ch_2bK5ZbqfD6u3PcvoYQ1vQWR3NnZ", nil, nil), 404, "not-found")
	checkProblem(t, c.Do(http.MethodGet, "/v1/churches/..%2F..%2Fetc", nil, nil), 404, "not-found")
	checkProblem(t, c.Do(http.MethodGet, "/problems/nope", nil, nil), 404, "not-found")

	if after := ts.lastSeq(t); after != before {
		t.Fatalf("failed requests appended events: ledger %d → %d", before, after)
	}
}

func TestOperationalRoutes(t *testing.T) {
	t.Parallel()
	ts := startStack(t)
	c := &apitest.Client{TB: t, Base: ts.URL}
	for _, path := range []string{"/healthz", "/readyz", "/openapi.yaml", "/openapi.json", "/problems", "/problems/validation-error"} {
		r := c.Do(http.MethodGet, path, nil, nil)
		if r.Status != 200 || r.Header.Get("Request-Id") == "" {
			t.Fatalf("%s: %d (Request-Id %q)", path, r.Status, r.Header.Get("Request-Id"))
		}
	}
	var doc map[string]any
	c.Do(http.MethodGet, "/openapi.json", nil, nil).JSON(t, &doc)
	if doc["openapi"] != "3.1.0" {
		t.Fatalf("openapi.json: %v", doc["openapi"])
	}
	page := string(c.Do(http.MethodGet, "/problems", nil, nil).Body)
	for _, slug := range []string{"unauthorized", "idempotency-key-reused", "rate-limited", "payload-too-large"} {
		if !strings.Contains(page, "/problems/"+slug) {
			t.Errorf("/problems does not list %s", slug)
		}
	}
}
