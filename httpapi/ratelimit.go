package httpapi

import (
	"fmt"
	"math"
	"net/http"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/rs/zerolog"
)

// RateLimit is the per-key token bucket: Burst requests at once, refilled at
// PerSecond.
type RateLimit struct {
	PerSecond int
	Burst     int
}

// Instances tells how many instances share the API keys' budgets.
type Instances interface {
	Live() int
}

// refusalLog is the log of rate-limit refusals, sampled (the first 10 a
// minute, then one in 100): a client hammering its limit must not flood the
// log.
func refusalLog(log zerolog.Logger) zerolog.Logger {
	return log.Sample(&zerolog.BurstSampler{Burst: 10, Period: time.Minute, NextSampler: &zerolog.BasicSampler{N: 100}})
}

// limiter enforces RateLimit per API key with a token bucket in this
// process (golang.org/x/time/rate): no network round trip and no write on
// the hot path, and nothing to fail, so it never lets a request through
// unchecked. Instances split each key's budget: with n live instances each
// allows PerSecond/n and a burst of Burst/n (at least 1), so a key spread
// over the instances gets its budget in total, never more; a key whose
// requests all reach one instance gets that instance's share.
type limiter struct {
	rl        RateLimit
	policy    string
	instances Instances

	mu   sync.Mutex
	keys map[string]*keyBucket
	n    int
}

type keyBucket struct {
	lim  *rate.Limiter
	used time.Time
}

// idleBucket is how long a key's bucket is kept unused; a bucket refilled
// to full is the same as a new one.
const idleBucket = 10 * time.Minute

func newLimiter(rl RateLimit, instances Instances) (*limiter, error) {
	if rl.PerSecond <= 0 || rl.Burst <= 0 {
		return nil, fmt.Errorf("rate limit: per-second rate and burst must be positive")
	}
	window := int(math.Ceil(float64(rl.Burst) / float64(rl.PerSecond)))
	return &limiter{rl: rl, instances: instances, keys: map[string]*keyBucket{}, n: 1,
		policy: fmt.Sprintf(`"per-key";q=%d;w=%d`, rl.Burst, window)}, nil
}

// share is this instance's rate and burst for each key.
func (l *limiter) share(n int) (rate.Limit, int) {
	return rate.Limit(float64(l.rl.PerSecond) / float64(n)), max(1, int(math.Ceil(float64(l.rl.Burst)/float64(n))))
}

// take spends one token of key's bucket. It returns whether the request may
// go on, the tokens left (scaled to the whole key), the seconds until the
// bucket is full again, and when refused, how long until a token is there.
//
// The clock is read, and the token taken, under the lock, so a bucket sees
// its times in order: x/time/rate moves a bucket's last update back to an
// earlier time it is handed and counts the refill since then a second time,
// so concurrent requests that read the clock before taking their turn let a
// key spend a token or two past its budget
// (TestRateLimitHoldsUnderContention, now and then, under load).
func (l *limiter) take(key string) (ok bool, remaining, reset int, retry time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := time.Now()
	n := 1
	if l.instances != nil {
		n = max(1, l.instances.Live())
	}
	r, burst := l.share(n)
	if n != l.n {
		l.n = n
		for _, b := range l.keys {
			b.lim.SetLimitAt(now, r)
			b.lim.SetBurstAt(now, burst)
		}
	}
	b, found := l.keys[key]
	if !found {
		b = &keyBucket{lim: rate.NewLimiter(r, burst)}
		l.keys[key] = b
	}
	b.used = now
	if len(l.keys) > 1024 && !found {
		l.forgetIdle(now)
	}

	res := b.lim.ReserveN(now, 1)
	if delay := res.DelayFrom(now); delay > 0 {
		res.CancelAt(now)
		ok, retry = false, delay
	} else {
		ok = true
	}
	tokens := math.Max(0, b.lim.TokensAt(now))
	remaining = int(math.Floor(tokens * float64(n)))
	reset = int(math.Ceil((float64(burst) - tokens) / float64(r)))
	return ok, min(remaining, l.rl.Burst), max(reset, 0), retry
}

// forgetIdle drops buckets unused for idleBucket; l.mu is held.
func (l *limiter) forgetIdle(now time.Time) {
	for k, b := range l.keys {
		if now.Sub(b.used) > idleBucket {
			delete(l.keys, k)
		}
	}
}

// rateLimit answers 429 once a key spends its budget. Every answer carries
// the IETF RateLimit-Policy and RateLimit headers.
func (s *Server) rateLimit(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p, _ := principalFrom(r.Context())
		ok, remaining, reset, retry := s.limiter.take(p.KeyID)
		w.Header().Set("RateLimit-Policy", s.limiter.policy)
		w.Header().Set("RateLimit", fmt.Sprintf(`"per-key";r=%d;t=%d`, remaining, reset))
		if !ok {
			s.cfg.Metrics.RateLimited()
			s.refusals.Warn().Str("request_id", requestID(r.Context())).Str("partner_id", p.PartnerID).Str("key_id", p.KeyID).
				Str("route", info(r.Context()).route).Dur("retry_after", retry).Msg("rate limited (sampled: the first 10 a minute, then 1 in 100)")
			writeRateLimited(w, r, max(retry, time.Second))
			return
		}
		next.ServeHTTP(w, r)
	})
}
