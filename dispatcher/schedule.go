package dispatcher

import (
	"fmt"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// DefaultSchedule is the published retry schedule: the waits after attempts
// 1 to 9, so an event is tried 10 times over about 24 hours (1m, 5m, 15m,
// 30m, 1h, 2h, 4h, 6h, 10h; 23h51m in all) before its delivery is exhausted.
var DefaultSchedule = []time.Duration{
	time.Minute, 5 * time.Minute, 15 * time.Minute, 30 * time.Minute,
	time.Hour, 2 * time.Hour, 4 * time.Hour, 6 * time.Hour, 10 * time.Hour,
}

// DefaultJitter spreads each wait uniformly over ±20% of its nominal value,
// so retries of many events to one receiver do not arrive in lockstep.
const DefaultJitter = 0.2

// DefaultMaxRetryAfter bounds how long a receiver's Retry-After can push the
// next attempt back.
const DefaultMaxRetryAfter = time.Hour

// ParseSchedule reads a schedule written as comma-separated Go durations,
// e.g. "1m,5m,15m".
func ParseSchedule(s string) ([]time.Duration, error) {
	if strings.TrimSpace(s) == "" {
		return nil, fmt.Errorf("retry schedule: at least one wait is required")
	}
	var out []time.Duration
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		d, err := time.ParseDuration(part)
		if err != nil || d <= 0 {
			return nil, fmt.Errorf("retry schedule: %q is not a positive duration", part)
		}
		out = append(out, d)
	}
	return out, nil
}

// FormatSchedule writes a schedule the way ParseSchedule reads it.
func FormatSchedule(s []time.Duration) string {
	parts := make([]string, len(s))
	for i, d := range s {
		parts[i] = d.String()
	}
	return strings.Join(parts, ",")
}

// nextWait is how long to wait after failed attempt n (1-based): the
// schedule's wait with jitter, or the receiver's Retry-After when that is
// longer, up to maxRetryAfter.
func nextWait(schedule []time.Duration, n int, jitter float64, retryAfter, maxRetryAfter time.Duration) time.Duration {
	base := schedule[min(n, len(schedule))-1]
	wait := time.Duration(float64(base) * (1 + jitter*(2*rand.Float64()-1)))
	if retryAfter > 0 {
		wait = max(wait, min(retryAfter, maxRetryAfter))
	}
	return wait
}

// parseRetryAfter reads Retry-After as seconds or an HTTP date.
func parseRetryAfter(v string, now time.Time) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0
	}
	if secs, err := strconv.ParseInt(v, 10, 64); err == nil {
		if secs <= 0 {
			return 0
		}
		return time.Duration(min(secs, 1<<32)) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil && t.After(now) {
		return t.Sub(now)
	}
	return 0
}
