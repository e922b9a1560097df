package httpapi

import (
	"net/http"
	"strings"

	"github.com/partnergiving/giving/domain"
)

// authenticate admits requests that carry a live API key of this stack. Every
// failure — no header, another scheme, a malformed, unknown, revoked,
// expired or other-stack key — gets the same 401, so the answer reveals
// nothing about which keys exist. A key let in has its use noted (the hour,
// without waiting).
func (s *Server) authenticate(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, ok := principalFrom(r.Context()); ok {
			// The dashboard's in-process call (callAPI), already signed in
			// as its session's key; no request from outside carries one.
			next.ServeHTTP(w, r)
			return
		}
		secret, ok := bearer(r.Header.Get("Authorization"))
		if !ok || !domain.WellFormedKey(s.app.Env(), secret) {
			writeUnauthorized(w, r)
			return
		}
		p, found, err := s.store.KeyByHash(domain.HashSecret(secret))
		if err != nil {
			writeError(w, r, err)
			return
		}
		if !found || !p.Live(s.now()) || p.Environment != s.app.Env() {
			writeUnauthorized(w, r)
			return
		}
		s.app.NoteKeyUse(p.KeyID)
		info(r.Context()).principal = &p
		next.ServeHTTP(w, r)
	})
}

func bearer(h string) (string, bool) {
	scheme, token, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	token = strings.TrimSpace(token)
	return token, token != ""
}

// partnerID is the authenticated partner. Only handlers behind authenticate
// call it.
func partnerID(r *http.Request) string {
	p, _ := principalFrom(r.Context())
	return p.PartnerID
}
