package httpapi

import (
	"fmt"
	"math"
	"net/http"
	"time"

	"github.com/rs/zerolog"
	"github.com/throttled/throttled/v2"
)

// RateLimit is the per-key token bucket: Burst requests at once, refilled at
// PerSecond.
type RateLimit struct {
	PerSecond int
	Burst     int
}

// limiter enforces RateLimit per API key with state shared by every
// instance (a GCRA bucket in JetStream KV).
type limiter struct {
	gcra   *throttled.GCRARateLimiterCtx
	policy string
}

// refusalLog is the log of rate-limit refusals, sampled (the first 10 a
// minute, then one in 100): a client hammering its limit must not flood the
// log.
func refusalLog(log zerolog.Logger) zerolog.Logger {
	return log.Sample(&zerolog.BurstSampler{Burst: 10, Period: time.Minute, NextSampler: &zerolog.BasicSampler{N: 100}})
}

func newLimiter(store throttled.GCRAStoreCtx, rl RateLimit) (*limiter, error) {
	if rl.PerSecond <= 0 || rl.Burst <= 0 {
		return nil, fmt.Errorf("rate limit: per-second rate and burst must be positive")
	}
	// throttled's burst counts requests beyond the first.
	gcra, err := throttled.NewGCRARateLimiterCtx(store, throttled.RateQuota{MaxRate: throttled.PerSec(rl.PerSecond), MaxBurst: rl.Burst - 1})
	if err != nil {
		return nil, fmt.Errorf("rate limit: %w", err)
	}
	window := int(math.Ceil(float64(rl.Burst) / float64(rl.PerSecond)))
	return &limiter{gcra: gcra, policy: fmt.Sprintf(`"per-key";q=%d;w=%d`, rl.Burst, window)}, nil
}

// rateLimit answers 429 once a key spends its budget. Every answer carries
// the IETF RateLimit-Policy and RateLimit headers. If the shared state cannot
// be reached the request is let through and the failure logged: an outage of
// the limiter must not become an outage of the API.
func (s *Server) rateLimit(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p, _ := principalFrom(r.Context())
		limited, res, err := s.limiter.gcra.RateLimitCtx(r.Context(), p.KeyID, 1)
		if err != nil {
			logger(r.Context()).Warn().Err(err).Msg("rate limiter unavailable; request allowed")
			next.ServeHTTP(w, r)
			return
		}
		reset := int(math.Ceil(res.ResetAfter.Seconds()))
		w.Header().Set("RateLimit-Policy", s.limiter.policy)
		w.Header().Set("RateLimit", fmt.Sprintf(`"per-key";r=%d;t=%d`, max(res.Remaining, 0), max(reset, 0)))
		if limited {
			s.cfg.Metrics.RateLimited()
			s.refusals.Warn().Str("request_id", requestID(r.Context())).Str("partner_id", p.PartnerID).Str("key_id", p.KeyID).
				Str("route", info(r.Context()).route).Dur("retry_after", res.RetryAfter).Msg("rate limited (sampled: the first 10 a minute, then 1 in 100)")
			writeRateLimited(w, r, max(res.RetryAfter, time.Second))
			return
		}
		next.ServeHTTP(w, r)
	})
}
