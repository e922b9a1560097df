package httpapi

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/partnergiving/giving/domain"
)

// FuzzImportRequest feeds arbitrary bodies through the import request's
// decoding and row validation, as the handler does, and checks that every
// outcome is a documented 4xx problem or a 200 with one result per row:
// never a panic, never a 5xx.
func FuzzImportRequest(f *testing.F) {
	for _, seed := range []string{
		`{"churches":[{"name":"Grace Chapel","external_id":"crm-1"}]}`,
		`{"churches":[]}`,
		`{"churches":null}`,
		`{}`,
		`[]`,
		`{"churches":[null,"x",1,true,[],{}]}`,
		`{"churches":[{"name":5},{"name":"a","external_id":5},{"name":"a","external_id":null}]}`,
		`{"churches":[{"name":"a","extra":1}],"more":2}`,
		`{"churches":[{"name":"\u0000"},{"name":"   "},{"name":"\ud800"}]}`,
		`{"churches":[{"name":"a","external_id":"x"},{"name":"b","external_id":"x"}]}`,
		`{"churches":[{"name":"a"}]} trailing`,
		`{"churches":[{"name":"a"}`,
		`{"churches":[{"NAME":"case"}]}`,
		`{"churches":[{"name":"a","name":"b"}]}`,
		"\xff\xfe",
		``,
	} {
		f.Add([]byte(seed))
	}
	used := map[string]bool{"taken": true}
	f.Fuzz(func(t *testing.T, body []byte) {
		req := httptest.NewRequest(http.MethodPost, "/v1/churches/import", nil)
		var in importRequest
		if err := decodeStrict(body, &in); err != nil {
			expectProblem(t, req, err)
			return
		}
		if in.Churches == nil || len(*in.Churches) > domain.MaxImportRows {
			return // answered 422 or 413 by the handler, with fixed problems
		}
		rows := decodeImportRows(*in.Churches)
		ev, results, err := domain.ImportChurches("pt_fuzz", rows, func(ext string) bool { return used[ext] }, time.Now())
		if err != nil {
			t.Fatalf("a batch within the limit failed as a whole: %v", err)
		}
		if len(results) != len(rows) {
			t.Fatalf("%d results for %d rows", len(results), len(rows))
		}
		created := 0
		for i, r := range results {
			if r.Index != i || (r.Church == nil) == (r.Err == nil) {
				t.Fatalf("row %d: %+v", i, r)
			}
			if r.Err != nil {
				if p, ok := domain.ProblemFor(r.Err.Code); ok && p.Status/100 != 4 {
					t.Fatalf("row %d rejected with a non-4xx problem %s", i, r.Err.Code)
				}
				continue
			}
			created++
			name := r.Church.Name
			if strings.TrimSpace(name) != name || name == "" || utf8.RuneCountInString(name) > domain.MaxChurchName {
				t.Fatalf("row %d created with name %q", i, name)
			}
		}
		if (ev == nil) != (created == 0) {
			t.Fatalf("event %v with %d created rows", ev, created)
		}
		if ev != nil {
			if _, err := ev.Envelope(); err != nil {
				t.Fatalf("the event does not serialise: %v", err)
			}
		}
		rec := httptest.NewRecorder()
		writeJSON(rec, http.StatusOK, map[string]any{"results": viewRowResults(results)})
		var out struct {
			Results []rowResult `json:"results"`
		}
		if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil || len(out.Results) != len(rows) {
			t.Fatalf("answer does not decode: %v", err)
		}
	})
}

// expectProblem checks that err becomes a 4xx problem+json answer.
func expectProblem(t *testing.T, req *http.Request, err error) {
	t.Helper()
	rec := httptest.NewRecorder()
	writeError(rec, req, err)
	if rec.Code/100 != 4 {
		t.Fatalf("decode error %v answered %d", err, rec.Code)
	}
	if rec.Header().Get("Content-Type") != "application/problem+json" {
		t.Fatalf("content type %q", rec.Header().Get("Content-Type"))
	}
	var p problem
	if err := json.Unmarshal(rec.Body.Bytes(), &p); err != nil || p.Type == "" || p.Detail == "" || p.Status != rec.Code {
		t.Fatalf("problem body %s: %v", rec.Body, err)
	}
	if strings.Contains(p.Detail, "json:") {
		t.Fatalf("detail leaks a Go error: %q", p.Detail)
	}
}

var idempotencyKeyPattern = regexp.MustCompile(`^[!-~]{1,255}$`)

// FuzzIdempotencyKey checks the key rule against the pattern the OpenAPI
// document publishes.
func FuzzIdempotencyKey(f *testing.F) {
	for _, seed := range []string{"a", "a b", "", strings.Repeat("k", 255), strings.Repeat("k", 256), "ключ", "\x7f", "~!"} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, k string) {
		if got, want := validIdempotencyKey(k), idempotencyKeyPattern.MatchString(k); got != want {
			t.Fatalf("validIdempotencyKey(%q) = %v, the documented pattern says %v", k, got, want)
		}
	})
}

// The fingerprint tells requests apart by method, path and body, so a key
// reused for another route or body is caught.
func TestFingerprintCoversMethodPathAndBody(t *testing.T) {
	s := &Server{cfg: Config{Keys: Keys{Fingerprint: []byte("fingerprint key")}}}
	fp := func(method, path, body string) string {
		return s.fingerprint(httptest.NewRequest(method, path, nil), []byte(body))
	}
	base := fp("POST", "/v1/churches/import", `{"a":1}`)
	if base != fp("POST", "/v1/churches/import", `{"a":1}`) {
		t.Fatal("same request, different fingerprints")
	}
	for _, other := range []string{
		fp("POST", "/v1/churches/import", `{"a":2}`),
		fp("POST", "/v1/donor_sessions", `{"a":1}`),
		fp("PUT", "/v1/churches/import", `{"a":1}`),
		fp("POST", "/v1/churches/import", `{"a":1} `),
	} {
		if other == base {
			t.Fatal("different requests share a fingerprint")
		}
	}
}
