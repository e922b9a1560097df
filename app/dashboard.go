package app

import (
	"context"
	"crypto/rand"
	"errors"
	"time"

	"github.com/partnergiving/giving/domain"
	"github.com/partnergiving/giving/eventlog/dashboard"
	"github.com/partnergiving/giving/projections"
)

// The partner's dashboard signs a browser in with a single-use link an API
// key asked for, and keeps it signed in with a session cookie. Both secrets
// are random and stored only as their hashes; a session acts as the key that
// made its link, for as long as that key stays live.

// DashboardLink is a sign-in link, shown once.
type DashboardLink struct {
	URL       string
	ExpiresAt time.Time
}

var (
	// ErrDashboardLinkUsed is a link opened a second time.
	ErrDashboardLinkUsed = errors.New("this sign-in link was already used")
	// ErrDashboardLinkInvalid is a link that is unknown, expired, or whose
	// key no longer works.
	ErrDashboardLinkInvalid = errors.New("this sign-in link is not valid or has expired")
)

// DashboardPath is where the dashboard is served.
const DashboardPath = "/dashboard"

// CreateDashboardLink makes a sign-in link to the partner's dashboard for
// the key shown as keyPrefix.
func (s *Service) CreateDashboardLink(ctx context.Context, partner, keyPrefix string) (DashboardLink, error) {
	token := rand.Text()
	expires := s.cfg.Now().Add(domain.DashboardLinkTTL).UTC()
	err := s.dashboard.Put(ctx, "link."+domain.HashSecret(token), domain.DashboardGrant{Partner: partner, KeyPrefix: keyPrefix, ExpiresAt: expires})
	if err != nil {
		return DashboardLink{}, err
	}
	return DashboardLink{URL: s.cfg.PublicURL + DashboardPath + "/login/" + token, ExpiresAt: expires}, nil
}

// OpenDashboard opens a sign-in link, once, and returns the new session's
// cookie value and its end.
func (s *Service) OpenDashboard(ctx context.Context, token string) (string, time.Time, error) {
	g, found, err := s.dashboard.Use(ctx, "link."+domain.HashSecret(token))
	switch {
	case errors.Is(err, dashboard.ErrGrantUsed):
		return "", time.Time{}, ErrDashboardLinkUsed
	case err != nil:
		return "", time.Time{}, err
	case !found || !g.Usable(s.cfg.Now()):
		return "", time.Time{}, ErrDashboardLinkInvalid
	}
	if _, live, err := s.grantKey(g); err != nil || !live {
		return "", time.Time{}, errors.Join(err, ErrDashboardLinkInvalid)
	}
	cookie := rand.Text()
	expires := s.cfg.Now().Add(domain.DashboardSessionTTL).UTC()
	if err := s.dashboard.Put(ctx, "session."+domain.HashSecret(cookie), domain.DashboardGrant{Partner: g.Partner, KeyPrefix: g.KeyPrefix, ExpiresAt: expires}); err != nil {
		return "", time.Time{}, err
	}
	return cookie, expires, nil
}

// DashboardSession returns the key a session cookie acts as; false when
// the session is unknown, over, signed out, or its key no longer works.
func (s *Service) DashboardSession(ctx context.Context, cookie string) (projections.Principal, bool, error) {
	g, found, err := s.dashboard.Get(ctx, "session."+domain.HashSecret(cookie))
	if err != nil || !found || !g.Usable(s.cfg.Now()) {
		return projections.Principal{}, false, err
	}
	return s.grantKey(g)
}

// SignOutDashboard ends a session.
func (s *Service) SignOutDashboard(ctx context.Context, cookie string) error {
	_, _, err := s.dashboard.Use(ctx, "session."+domain.HashSecret(cookie))
	if errors.Is(err, dashboard.ErrGrantUsed) {
		return nil
	}
	return err
}

// grantKey returns the key a grant acts as, and whether it still works on
// this stack for the grant's partner.
func (s *Service) grantKey(g domain.DashboardGrant) (projections.Principal, bool, error) {
	p, found, err := s.store.KeyByPrefix(g.KeyPrefix)
	if err != nil || !found {
		return projections.Principal{}, false, err
	}
	return p, p.Live(s.cfg.Now()) && p.PartnerID == g.Partner && p.Environment == s.cfg.Env, nil
}
