package e2e

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/partnergiving/giving/domain"
	"github.com/partnergiving/giving/httpapi/apitest"
)

// apiKeyView is a key as GET /v1/api_keys lists it.
type apiKeyView struct {
	Prefix     string  `json:"prefix"`
	CreatedAt  string  `json:"created_at"`
	LastUsedAt *string `json:"last_used_at"`
	ExpiresAt  *string `json:"expires_at"`
}

func listKeys(t *testing.T, c *apitest.Client) []apiKeyView {
	t.Helper()
	resp := c.Do(http.MethodGet, "/v1/api_keys", nil, nil)
	if resp.Status != http.StatusOK {
		t.Fatalf("list keys: %d %s", resp.Status, resp.Body)
	}
	var page struct {
		Data []apiKeyView `json:"data"`
	}
	resp.JSON(t, &page)
	return page.Data
}

// rolledKey is the answer to a roll.
type rolledKey struct {
	Prefix   string `json:"prefix"`
	Key      string `json:"key"`
	Previous struct {
		Prefix    string `json:"prefix"`
		ExpiresAt string `json:"expires_at"`
	} `json:"previous"`
}

func rollKey(t *testing.T, c *apitest.Client, expireIn int) rolledKey {
	t.Helper()
	resp := c.Do(http.MethodPost, "/v1/api_keys/roll", map[string]any{"expire_current_in": expireIn}, nil)
	if resp.Status != http.StatusCreated {
		t.Fatalf("roll: %d %s", resp.Status, resp.Body)
	}
	var r rolledKey
	resp.JSON(t, &r)
	if !domain.WellFormedKey(domain.Sandbox, r.Key) || r.Key == c.Key || !strings.HasPrefix(r.Key, r.Prefix) || !strings.HasPrefix(c.Key, r.Previous.Prefix) {
		t.Fatalf("roll answer: %s", resp.Body)
	}
	return r
}

// unauthorizedBody is the opaque 401 as a key gets it, without the
// request's own id.
func unauthorizedBody(t *testing.T, c *apitest.Client) string {
	t.Helper()
	p := checkProblem(t, c.Do(http.MethodGet, "/v1/churches", nil, nil), 401, "unauthorized")
	delete(p, "request_id")
	return mustJSON(t, p)
}

// A key rolled while requests keep coming: none made with either key fails
// before the old key's expiry; after it the old key gets the same opaque
// 401 as an unknown key, and the new one keeps working. The list shows the
// keys, never a key itself, and the old one's expiry.
func TestAPIKeyRollUnderLoad(t *testing.T) {
	t.Parallel()
	ts := startStack(t, withRateLimit(100000, 100000))
	old, _ := ts.partner(t)
	if r := old.Do(http.MethodGet, "/v1/churches", nil, nil); r.Status != 200 {
		t.Fatalf("the first key: %d", r.Status)
	}
	waitFor(t, 10*time.Second, "the key's use is noted", func() bool {
		keys := listKeys(t, old)
		return len(keys) == 1 && keys[0].LastUsedAt != nil
	})
	keys := listKeys(t, old)
	if used := mustTime(t, *keys[0].LastUsedAt); !used.Equal(used.Truncate(time.Hour)) || time.Since(used) > time.Hour || keys[0].ExpiresAt != nil ||
		!strings.HasPrefix(old.Key, keys[0].Prefix) {
		t.Fatalf("the key listed: %+v", keys[0])
	}

	var stop atomic.Bool
	var failures, made atomic.Int64
	var firstFailure atomic.Value
	var wg sync.WaitGroup
	load := func(c *apitest.Client, deadline func() time.Time) {
		defer wg.Done()
		for !stop.Load() {
			sent := time.Now()
			resp := c.Do(http.MethodGet, "/v1/churches", nil, nil)
			made.Add(1)
			if resp.Status != 200 && sent.Before(deadline().Add(-500*time.Millisecond)) {
				failures.Add(1)
				firstFailure.CompareAndSwap(nil, resp.Status)
			}
		}
	}
	var until atomic.Value
	until.Store(time.Now().Add(time.Hour))
	deadline := func() time.Time { return until.Load().(time.Time) }
	for range 3 {
		wg.Add(1)
		go load(&apitest.Client{TB: t, Base: ts.URL, Key: old.Key}, deadline)
	}
	rolled := rollKey(t, old, 3)
	until.Store(mustTime(t, rolled.Previous.ExpiresAt))
	fresh := &apitest.Client{TB: t, Base: ts.URL, Key: rolled.Key}
	for range 3 {
		wg.Add(1)
		go load(fresh, func() time.Time { return time.Now().Add(time.Hour) })
	}
	waitFor(t, 10*time.Second, "the old key's expiry passes", func() bool { return time.Now().After(deadline().Add(time.Second)) })
	stop.Store(true)
	wg.Wait()
	if failures.Load() > 0 || made.Load() < 20 {
		t.Fatalf("%d of %d requests failed before the old key's expiry (first: %v)", failures.Load(), made.Load(), firstFailure.Load())
	}

	unknown := &apitest.Client{TB: t, Base: ts.URL, Key: domain.GenerateKey(domain.Sandbox).Secret}
	if got, want := unauthorizedBody(t, old), unauthorizedBody(t, unknown); got != want {
		t.Fatalf("the expired key's 401\n got %s\nwant %s", got, want)
	}
	if r := fresh.Do(http.MethodGet, "/v1/churches", nil, nil); r.Status != 200 {
		t.Fatalf("the new key after the old one's expiry: %d", r.Status)
	}
	keys = listKeys(t, fresh)
	if len(keys) != 1 || keys[0].Prefix != rolled.Prefix || strings.Contains(string(fresh.Do(http.MethodGet, "/v1/api_keys", nil, nil).Body), rolled.Key) {
		t.Fatalf("keys after the expiry: %+v", keys)
	}
}

// A key revokes another of the partner's keys, never itself and never
// another partner's; the operator's console revokes a rolled key as any
// other, and a revoked key gets the opaque 401.
func TestAPIKeyRevoke(t *testing.T) {
	t.Parallel()
	ts := startStack(t)
	a, pid := ts.partner(t)
	other, _ := ts.partner(t)
	second, err := ts.Operators.IssueKey(context.Background(), pid)
	if err != nil {
		t.Fatal(err)
	}
	ts.waitProjected(t)
	b := &apitest.Client{TB: t, Base: ts.URL, Key: second.Secret}
	if n := len(listKeys(t, a)); n != 2 {
		t.Fatalf("%d keys listed, want 2", n)
	}
	selfPrefix := a.Key[:len("sk_test_")+8]
	for _, k := range listKeys(t, other) {
		if k.Prefix == selfPrefix || k.Prefix == second.Prefix {
			t.Fatalf("another partner's list shows key %s", k.Prefix)
		}
	}
	checkProblem(t, a.Do(http.MethodDelete, "/v1/api_keys/"+selfPrefix, nil, nil), 409, "key-in-use")
	checkProblem(t, other.Do(http.MethodDelete, "/v1/api_keys/"+selfPrefix, nil, nil), 404, "not-found")
	checkProblem(t, a.Do(http.MethodDelete, "/v1/api_keys/sk_test_nothere", nil, nil), 404, "not-found")
	if r := b.Do(http.MethodDelete, "/v1/api_keys/"+selfPrefix, nil, nil); r.Status != http.StatusNoContent {
		t.Fatalf("revoke with the other key: %d %s", r.Status, r.Body)
	}
	unknown := &apitest.Client{TB: t, Base: ts.URL, Key: domain.GenerateKey(domain.Sandbox).Secret}
	if got, want := unauthorizedBody(t, a), unauthorizedBody(t, unknown); got != want {
		t.Fatalf("the revoked key's 401\n got %s\nwant %s", got, want)
	}
	checkProblem(t, b.Do(http.MethodDelete, "/v1/api_keys/"+selfPrefix, nil, nil), 404, "not-found")

	// The operator's console revokes a key the partner rolled.
	rolled := rollKey(t, b, 0)
	c := &apitest.Client{TB: t, Base: ts.URL, Key: rolled.Key}
	if got, want := unauthorizedBody(t, b), unauthorizedBody(t, unknown); got != want {
		t.Fatalf("a key rolled with expire_current_in 0\n got %s\nwant %s", got, want)
	}
	if _, err := ts.Operators.RevokeKey(context.Background(), rolled.Prefix); err != nil {
		t.Fatal(err)
	}
	ts.waitProjected(t)
	if got, want := unauthorizedBody(t, c), unauthorizedBody(t, unknown); got != want {
		t.Fatalf("a rolled key revoked by the operator\n got %s\nwant %s", got, want)
	}
}

// Every new route holds the house rules: Idempotency-Key on POST and PATCH
// (a replay answers the same body), 404 across partners, and a
// problem+json 4xx for every bad input, never a 5xx.
func TestKeyAndEndpointRoutesHoldTheHouseRules(t *testing.T) {
	t.Parallel()
	ts := startStack(t)
	c, _ := ts.partner(t)
	other, _ := ts.partner(t)
	rc := okReceiver(t)
	ep := createEndpoint(t, c, rc.URL)
	routes := []struct {
		method, path string
		good         any
		bad          []any
	}{
		{http.MethodPatch, "/v1/webhook_endpoints/" + ep.ID, map[string]any{"description": "d"}, []any{
			`{`, `[]`, map[string]any{"url": 7}, map[string]any{"url": "ftp://x.example/"}, map[string]any{"url": "http://10.0.0.1/x"},
			map[string]any{"event_types": []string{}}, map[string]any{"metadata": map[string]any{"k": 1}},
			map[string]any{"metadata": map[string]string{strings.Repeat("k", 41): "v"}}, map[string]any{"signature_scheme": "rsa"},
			map[string]any{"secret": "whsec_mine"}, map[string]any{"description": strings.Repeat("d", 501)},
		}},
		{http.MethodPost, "/v1/webhook_endpoints/" + ep.ID + "/rotate_secret", map[string]any{"expire_current_in": 60}, []any{
			`{`, map[string]any{"expire_current_in": -1}, map[string]any{"expire_current_in": 604801}, map[string]any{"expire_current_in": "1"},
			map[string]any{"expire_current_in": 1.5}, map[string]any{"expire_current_in": 1e30}, map[string]any{"other": 1},
		}},
		{http.MethodPost, "/v1/api_keys/roll", map[string]any{"expire_current_in": 3600}, []any{
			`{`, map[string]any{}, map[string]any{"expire_current_in": -1}, map[string]any{"expire_current_in": 604801}, map[string]any{"expire_current_in": nil},
		}},
	}
	for _, r := range routes {
		for i, body := range r.bad {
			resp := c.Do(r.method, r.path, body, nil)
			if resp.Status < 400 || resp.Status >= 500 || resp.Header.Get("Content-Type") != "application/problem+json" {
				t.Errorf("%s %s bad body %d: %d %s", r.method, r.path, i, resp.Status, resp.Body)
			}
		}
		checkProblem(t, c.Do(r.method, r.path, r.good, apitest.Header{"Idempotency-Key": ""}), 400, "idempotency-key-missing")
		key := apitest.Header{"Idempotency-Key": "replay-" + r.method + r.path}
		first := c.Do(r.method, r.path, r.good, key)
		again := c.Do(r.method, r.path, r.good, key)
		if first.Status/100 != 2 || again.Status != 200 || again.Header.Get("Idempotent-Replayed") != "true" || string(again.Body) != string(first.Body) {
			t.Errorf("%s %s replay: %d then %d %q\n%s\n%s", r.method, r.path, first.Status, again.Status, again.Header.Get("Idempotent-Replayed"), first.Body, again.Body)
		}
		if strings.HasPrefix(r.path, "/v1/webhook_endpoints/") {
			checkProblem(t, other.Do(r.method, r.path, r.good, nil), 404, "not-found")
		}
	}
	// The roll above replaced c's key for an hour; both still work.
	if r := c.Do(http.MethodGet, "/v1/api_keys", nil, nil); r.Status != 200 {
		t.Fatalf("the rolled key within its overlap: %d", r.Status)
	}
	checkProblem(t, c.Do(http.MethodPatch, "/v1/webhook_endpoints/we_nothere", map[string]any{}, nil), 404, "not-found")
	checkProblem(t, c.Do(http.MethodPost, "/v1/webhook_endpoints/we_nothere/rotate_secret", nil, nil), 404, "not-found")
}
