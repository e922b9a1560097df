package e2e

import (
	"net/http"
	"regexp"
	"strconv"
	"testing"

	"github.com/partnergiving/giving/httpapi/apitest"
)

var (
	rateLimitPolicy = regexp.MustCompile(`^"per-key";q=3;w=3$`)
	rateLimitState  = regexp.MustCompile(`^"per-key";r=(\d+);t=(\d+)$`)
)

func TestRateLimitPerKey(t *testing.T) {
	ts := startStack(t, withRateLimit(1, 3))
	a, pid := ts.partner(t)
	b, _ := ts.partner(t)
	key, err := ts.Operators.IssueKey(t.Context(), pid)
	if err != nil {
		t.Fatal(err)
	}
	ts.waitProjected(t)
	a2 := &apitest.Client{TB: t, Base: ts.URL, Key: key.Secret}

	// The burst is 3. The bucket refills one per second, so a few quick
	// requests more must meet a 429 (a slow machine may earn one refill).
	var limited *apitest.Response
	for i := 0; i < 10 && limited == nil; i++ {
		r := a.Do(http.MethodGet, "/v1/churches", nil, nil)
		if !rateLimitPolicy.MatchString(r.Header.Get("RateLimit-Policy")) || !rateLimitState.MatchString(r.Header.Get("RateLimit")) {
			t.Fatalf("request %d: RateLimit-Policy %q RateLimit %q", i, r.Header.Get("RateLimit-Policy"), r.Header.Get("RateLimit"))
		}
		switch {
		case r.Status == http.StatusTooManyRequests:
			if i < 3 {
				t.Fatalf("limited within the burst, at request %d", i+1)
			}
			limited = r
		case r.Status != http.StatusOK:
			t.Fatalf("request %d: %d %s", i, r.Status, r.Body)
		}
	}
	if limited == nil {
		t.Fatal("10 quick requests never hit the limit of 3 + 1/s")
	}
	checkProblem(t, limited, 429, "rate-limited")
	if s, err := strconv.Atoi(limited.Header.Get("Retry-After")); err != nil || s < 1 {
		t.Fatalf("Retry-After %q", limited.Header.Get("Retry-After"))
	}
	if m := rateLimitState.FindStringSubmatch(limited.Header.Get("RateLimit")); m == nil || m[1] != "0" {
		t.Fatalf("429 RateLimit %q, want r=0", limited.Header.Get("RateLimit"))
	}
	// POSTs count against the same budget, and are refused before the
	// Idempotency-Key is even claimed.
	checkProblem(t, a.Do(http.MethodPost, importPath, `{"churches":[{"name":"x"}]}`, apitest.Header{"Idempotency-Key": "limited"}), 429, "rate-limited")

	// Another key, of the same partner or another, has its own budget.
	for _, c := range []*apitest.Client{a2, b} {
		r := c.Do(http.MethodGet, "/v1/churches", nil, nil)
		if r.Status != 200 {
			t.Fatalf("other key: %d %s", r.Status, r.Body)
		}
		if m := rateLimitState.FindStringSubmatch(r.Header.Get("RateLimit")); m == nil || m[1] != "2" {
			t.Fatalf("other key's first request: RateLimit %q, want r=2", r.Header.Get("RateLimit"))
		}
	}
}
