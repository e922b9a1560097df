package e2e

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/partnergiving/giving/domain"
	"github.com/partnergiving/giving/httpapi/apitest"
)

// Every way of failing authentication gets the same 401: status, headers and
// body identical apart from the request's own id.
func TestUnauthorizedIsIdenticalForEveryCause(t *testing.T) {
	t.Parallel()
	sandbox := startStack(t)
	production := startStack(t, withEnv(domain.Production))
	live, _ := production.partner(t)
	if !strings.HasPrefix(live.Key, "sk_live_") {
		t.Fatalf("production key %q", live.Key)
	}
	test, _ := sandbox.partner(t)
	revoked, _ := sandbox.partner(t)
	if r := revoked.Do(http.MethodGet, "/v1/churches", nil, nil); r.Status != 200 {
		t.Fatalf("key before revocation: %d", r.Status)
	}
	if _, err := sandbox.Operators.RevokeKey(context.Background(), revoked.Key[:len("sk_test_")+8]); err != nil {
		t.Fatal(err)
	}
	sandbox.waitProjected(t)
	unknown := domain.GenerateKey(domain.Sandbox).Secret

	type attempt struct {
		name, base, auth string
	}
	attempts := []attempt{
		{"missing", sandbox.URL, ""},
		{"empty bearer", sandbox.URL, "Bearer "},
		{"other scheme", sandbox.URL, "Basic dXNlcjpwYXNz"},
		{"malformed", sandbox.URL, "Bearer sk_test_short"},
		{"garbage", sandbox.URL, "Bearer " + strings.Repeat("x", 300)},
		{"unknown", sandbox.URL, "Bearer " + unknown},
		{"revoked", sandbox.URL, "Bearer " + revoked.Key},
		{"live key on sandbox", sandbox.URL, "Bearer " + live.Key},
		{"test key in production", production.URL, "Bearer " + test.Key},
		{"missing in production", production.URL, ""},
	}
	// The working keys work, so the failures above are about the keys.
	if r := test.Do(http.MethodGet, "/v1/churches", nil, nil); r.Status != 200 {
		t.Fatalf("sandbox key: %d", r.Status)
	}
	if r := live.Do(http.MethodGet, "/v1/churches", nil, nil); r.Status != 200 {
		t.Fatalf("live key: %d", r.Status)
	}

	var refHeader http.Header
	var refBody map[string]any
	for _, a := range attempts {
		for _, method := range []string{http.MethodGet, http.MethodPost} {
			path := "/v1/churches"
			var body any
			if method == http.MethodPost {
				path, body = importPath, `{"churches":[{"name":"x"}]}`
			}
			c := &apitest.Client{TB: t, Base: a.base}
			resp := c.Do(method, path, body, apitest.Header{"Authorization": a.auth})
			p := checkProblem(t, resp, 401, "unauthorized")
			delete(p, "request_id")
			h := resp.Header.Clone()
			h.Del("Request-Id")
			h.Del("Date")
			if refHeader == nil {
				refHeader, refBody = h, p
				continue
			}
			if !sameHeaders(h, refHeader) {
				t.Errorf("%s %s: headers differ\n got %v\nwant %v", a.name, method, h, refHeader)
			}
			if got, want := mustJSON(t, p), mustJSON(t, refBody); got != want {
				t.Errorf("%s %s: body differs\n got %s\nwant %s", a.name, method, got, want)
			}
		}
	}
	if refHeader.Get("WWW-Authenticate") == "" || refHeader.Get("RateLimit") != "" {
		t.Fatalf("401 headers %v", refHeader)
	}
}

func sameHeaders(a, b http.Header) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if strings.Join(v, "\x00") != strings.Join(b[k], "\x00") {
			return false
		}
	}
	return true
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
