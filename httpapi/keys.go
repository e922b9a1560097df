package httpapi

import (
	"net/http"
	"time"

	"github.com/gorilla/mux"

	"github.com/partnergiving/giving/app"
	"github.com/partnergiving/giving/domain"
)

// apiKeyView is one of the partner's live keys: never the key itself.
type apiKeyView struct {
	Prefix    string `json:"prefix"`
	CreatedAt string `json:"created_at"`
	// LastUsedAt is rounded down to the hour; null when unknown.
	LastUsedAt *string `json:"last_used_at"`
	// ExpiresAt is when a rolled key stops working; null for a key that
	// works until revoked.
	ExpiresAt *string `json:"expires_at"`
}

func (s *Server) listAPIKeys(w http.ResponseWriter, r *http.Request) {
	keys, err := s.app.APIKeys(r.Context(), partnerID(r))
	if err != nil {
		writeError(w, r, err)
		return
	}
	out := make([]apiKeyView, len(keys))
	for i, k := range keys {
		out[i] = apiKeyView{Prefix: k.Prefix, CreatedAt: domain.FormatTime(k.CreatedAt), ExpiresAt: optionalTime(k.ExpiresAt)}
		if !k.LastUsedAt.IsZero() {
			out[i].LastUsedAt = optional(domain.FormatTime(k.LastUsedAt))
		}
	}
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, http.StatusOK, map[string]any{"data": out})
}

// rolledKeyView is the answer to a roll, the one place the new key is
// shown.
type rolledKeyView struct {
	apiKeyView
	Key      string         `json:"key"`
	Previous previousKeyRef `json:"previous"`
}

type previousKeyRef struct {
	Prefix    string `json:"prefix"`
	ExpiresAt string `json:"expires_at"`
}

// rollAPIKey issues a new key in place of the one the request carries,
// which keeps working for expire_current_in seconds.
func (s *Server) rollAPIKey(w http.ResponseWriter, r *http.Request, claimed *app.Request) {
	var req struct {
		ExpireCurrentIn *int64 `json:"expire_current_in"`
	}
	if err := decodeJSON(r, &req); err != nil {
		writeError(w, r, err)
		return
	}
	if req.ExpireCurrentIn == nil {
		var v domain.Validation
		v.Add("expire_current_in", "is required: 0 to %d seconds (7 days) the current key keeps working", int64(domain.MaxOverlap/time.Second))
		writeError(w, r, v.Err())
		return
	}
	overlap, err := domain.ValidateOverlap(*req.ExpireCurrentIn)
	if err != nil {
		writeError(w, r, err)
		return
	}
	p, _ := principalFrom(r.Context())
	rolled, err := s.app.Under(claimed).RollKey(r.Context(), p.PartnerID, p.KeyID, overlap)
	if err != nil {
		writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusCreated, rolledKeyView{
		apiKeyView: apiKeyView{Prefix: rolled.Prefix, CreatedAt: domain.FormatTime(rolled.CreatedAt)},
		Key:        rolled.Secret,
		Previous:   previousKeyRef{Prefix: rolled.PreviousPrefix, ExpiresAt: domain.FormatTime(rolled.PreviousExpiresAt)},
	})
}

// revokeAPIKey revokes another of the partner's live keys at once.
func (s *Server) revokeAPIKey(w http.ResponseWriter, r *http.Request) {
	p, _ := principalFrom(r.Context())
	if err := s.app.RevokeKey(r.Context(), p.PartnerID, mux.Vars(r)["prefix"], p.KeyID); err != nil {
		writeError(w, r, err)
		return
	}
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusNoContent)
}

// createDashboardSession makes a single-use sign-in link to the partner's
// dashboard, acting as the key the request carries.
func (s *Server) createDashboardSession(w http.ResponseWriter, r *http.Request, claimed *app.Request) {
	if err := decodeOptional(r, &struct{}{}); err != nil {
		writeError(w, r, err)
		return
	}
	p, _ := principalFrom(r.Context())
	link, err := s.app.Under(claimed).CreateDashboardLink(r.Context(), p.PartnerID, p.KeyPrefix)
	if err != nil {
		writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusCreated, map[string]string{"url": link.URL, "expires_at": domain.FormatTime(link.ExpiresAt)})
}
