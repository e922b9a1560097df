package e2e

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/partnergiving/giving/httpapi/apitest"
)

// The access log has one JSON line per request, and never a body, a key, an
// Authorization header or a query string.
func TestAccessLogLinePerRequestWithoutSecrets(t *testing.T) {
	t.Parallel()
	ts := startStack(t)
	c, pid := ts.partner(t)
	const (
		secretBody  = "SecretChurchName"
		secretIdem  = "SecretIdempotencyKey"
		secretQuery = "SecretQueryValue"
	)
	var ids []string
	r := c.Do(http.MethodPost, importPath, `{"churches":[{"name":"`+secretBody+`"}]}`, apitest.Header{"Idempotency-Key": secretIdem})
	ids = append(ids, r.Header.Get("Request-Id"))
	r = c.Do(http.MethodGet, "/v1/churches?limit=1&cursor="+secretQuery, nil, nil)
	ids = append(ids, r.Header.Get("Request-Id"))
	var imp importResponse
	c.Do(http.MethodPost, importPath, `{"churches":[{"name":"x"}]}`, nil).JSON(t, &imp)
	r = c.Do(http.MethodGet, "/v1/churches/"+imp.Results[0].Church.ID, nil, nil)
	ids = append(ids, r.Header.Get("Request-Id"))
	r = rawDo(t, http.MethodGet, ts.URL+"/v1/nothing-here?token="+secretQuery, nil, map[string]string{"Authorization": "Bearer sk_test_" + secretQuery})
	ids = append(ids, r.Header.Get("Request-Id"))

	want := []struct {
		method, route string
		status        int
	}{
		{"POST", "/v1/churches/import", 200},
		{"GET", "/v1/churches", 400},
		{"GET", "/v1/churches/{id}", 200},
		{"GET", "(unmatched)", 404},
	}
	logs := ts.Logs.String()
	for _, secret := range []string{secretBody, secretIdem, secretQuery, c.Key, c.Key[8:], "Bearer", "limit=1"} {
		if strings.Contains(logs, secret) {
			t.Fatalf("the log holds %q:\n%s", secret, logs)
		}
	}
	lines := map[string][]map[string]any{}
	for _, line := range strings.Split(strings.TrimSpace(logs), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("log line is not JSON: %q", line)
		}
		if m["message"] == "request" {
			id, _ := m["request_id"].(string)
			lines[id] = append(lines[id], m)
		}
	}
	for i, id := range ids {
		got := lines[id]
		if len(got) != 1 {
			t.Fatalf("request %s: %d access log lines, want 1", id, len(got))
		}
		m := got[0]
		if m["method"] != want[i].method || m["route"] != want[i].route || m["status"] != float64(want[i].status) {
			t.Errorf("request %d logged %v, want %+v", i, m, want[i])
		}
		if i < 3 && m["partner_id"] != pid {
			t.Errorf("request %d: partner_id %v, want %s", i, m["partner_id"], pid)
		}
		if _, ok := m["duration_ms"]; !ok {
			t.Errorf("request %d: no duration", i)
		}
	}
}
