package domain

import "time"

// A partner's dashboard is opened by a sign-in link an API key asks for:
// the link works once, for a few minutes, and signs the browser in to the
// key's partner and stack for a bounded session. The session lives no
// longer than the key that made it: revoking the key, or a roll's expiry,
// ends every session it opened.

const (
	// DashboardLinkTTL is how long a sign-in link can be opened.
	DashboardLinkTTL = 10 * time.Minute
	// DashboardSessionTTL is how long a signed-in dashboard session lasts.
	DashboardSessionTTL = 8 * time.Hour
)

// DashboardGrant is what a sign-in link, and the session it opens, stand
// for: the partner, the key that asked (by prefix) and until when.
type DashboardGrant struct {
	Partner   string    `json:"partner"`
	KeyPrefix string    `json:"key_prefix"`
	ExpiresAt time.Time `json:"expires_at"`
	// Used is set on a link once it has been opened, and on a session once
	// it was signed out.
	Used bool `json:"used,omitempty"`
}

// Usable reports whether the link or session can still be used at now.
func (g DashboardGrant) Usable(now time.Time) bool {
	return !g.Used && now.Before(g.ExpiresAt)
}
