package e2e

import (
	"net/http"
	"regexp"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/partnergiving/giving/httpapi/apitest"
)

var (
	rateLimitPolicy = regexp.MustCompile(`^"per-key";q=3;w=3$`)
	rateLimitState  = regexp.MustCompile(`^"per-key";r=(\d+);t=(\d+)$`)
)

func TestRateLimitPerKey(t *testing.T) {
	t.Parallel()
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

// Under 64 concurrent clients on one key the limiter never lets a request
// through unchecked: over the run, the successes stay within the bucket's
// refill plus its burst, and every other answer is a 429 with Retry-After.
func TestRateLimitHoldsUnderContention(t *testing.T) {
	// Serial: it counts how many requests 64 clients get through in five
	// seconds, a throughput that tests running beside it would lower.
	if testing.Short() {
		t.Skip("runs a five-second load")
	}
	const perSecond, burst, clients = 20, 10, 64
	ts := startStack(t, withRateLimit(perSecond, burst))
	c, _ := ts.partner(t)
	var ok, limited, other atomic.Int64
	var badRetry atomic.Value
	start := time.Now()
	end := start.Add(5 * time.Second)
	var wg sync.WaitGroup
	for range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(end) {
				r := c.Do(http.MethodGet, "/v1/churches", nil, nil)
				switch r.Status {
				case http.StatusOK:
					ok.Add(1)
				case http.StatusTooManyRequests:
					limited.Add(1)
					if s, err := strconv.Atoi(r.Header.Get("Retry-After")); err != nil || s < 1 {
						badRetry.Store(r.Header.Get("Retry-After"))
					}
				default:
					other.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start).Seconds()
	allowed := int64(perSecond*elapsed) + burst
	t.Logf("%d clients for %.1fs at %d/s burst %d: %d succeeded (at most %d allowed), %d limited", clients, elapsed, perSecond, burst, ok.Load(), allowed, limited.Load())
	if ok.Load() > allowed {
		t.Fatalf("%d requests succeeded, at most %d may", ok.Load(), allowed)
	}
	if ok.Load() < perSecond*4 {
		t.Fatalf("only %d requests succeeded in %.1fs at %d/s", ok.Load(), elapsed, perSecond)
	}
	if other.Load() != 0 || limited.Load() == 0 {
		t.Fatalf("%d answers were neither 200 nor 429; %d were 429", other.Load(), limited.Load())
	}
	if v := badRetry.Load(); v != nil {
		t.Fatalf("a 429 had Retry-After %q", v)
	}
}
