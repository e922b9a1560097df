package httpapi

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"time"

	"github.com/gorilla/mux"

	"github.com/partnergiving/giving/app"
	"github.com/partnergiving/giving/domain"
	"github.com/partnergiving/giving/projections"
)

// enrollmentView shows an enrollment's status and configured values only,
// and the partner's own cancel reason.
type enrollmentView struct {
	EnrollmentID   string             `json:"enrollment_id"`
	ChurchID       string             `json:"church_id"`
	DonorID        string             `json:"donor_id"`
	DonorSessionID string             `json:"donor_session_id"`
	Status         string             `json:"status"`
	Mode           domain.Mode        `json:"mode"`
	Value          domain.Hundredths  `json:"value"`
	CreatedAt      string             `json:"created_at"`
	ActivatedAt    *string            `json:"activated_at"`
	PausedAt       *string            `json:"paused_at"`
	CanceledAt     *string            `json:"canceled_at"`
	CancelReason   *string            `json:"cancel_reason"`
	EndedAt        *string            `json:"ended_at"`
	EndReason      *string            `json:"end_reason"`
	PendingUpdate  *pendingUpdateView `json:"pending_update"`
	// Only in the answer to a raise of the value.
	ConsentURL          string `json:"consent_url,omitempty"`
	ConsentURLExpiresAt string `json:"consent_url_expires_at,omitempty"`
}

// pendingUpdateView is a higher value waiting for the donor's consent.
type pendingUpdateView struct {
	Value               domain.Hundredths `json:"value"`
	ConsentURLExpiresAt string            `json:"consent_url_expires_at"`
}

func viewEnrollment(e app.Enrollment) enrollmentView {
	v := enrollmentView{
		EnrollmentID: e.ID, ChurchID: e.ChurchID, DonorID: e.DonorID, DonorSessionID: e.SessionID,
		Status: string(e.Status), Mode: e.Giving.Mode, Value: e.Giving.Value, CreatedAt: domain.FormatTime(e.CreatedAt),
		ActivatedAt: optionalTime(e.ActivatedAt), PausedAt: optionalTime(e.PausedAt),
		CanceledAt: optionalTime(e.CanceledAt), EndedAt: optionalTime(e.EndedAt),
		CancelReason: optional(e.CancelReason), EndReason: optional(e.EndReason),
	}
	if p := e.Pending; p != nil {
		v.PendingUpdate = &pendingUpdateView{Value: p.Value, ConsentURLExpiresAt: domain.FormatTime(p.ExpiresAt)}
		if e.ConsentURL != "" {
			v.ConsentURL, v.ConsentURLExpiresAt = e.ConsentURL, v.PendingUpdate.ConsentURLExpiresAt
		}
	}
	return v
}

// optionalTime writes a time that may be unset (JSON null).
func optionalTime(t *time.Time) *string {
	if t == nil {
		return nil
	}
	s := domain.FormatTime(*t)
	return &s
}

// optional is a string that may be unset (JSON null when empty).
func optional(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func (s *Server) getEnrollment(w http.ResponseWriter, r *http.Request) {
	e, err := s.app.Enrollment(partnerID(r), mux.Vars(r)["id"])
	if err != nil {
		writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, viewEnrollment(e))
}

func (s *Server) listEnrollments(w http.ResponseWriter, r *http.Request) {
	pid := partnerID(r)
	q := r.URL.Query()
	var v domain.Validation
	f := projections.EnrollmentFilter{ChurchID: q.Get("church_id"), Status: domain.EnrollmentStatus(q.Get("status"))}
	if f.ChurchID != "" && !domain.ValidID(domain.PrefixChurch, f.ChurchID) {
		v.Add("church_id", "must be a church id")
	}
	if f.Status != "" && !validStatus(f.Status) {
		v.Add("status", "must be one of %s", statusNames())
	}
	if err := v.Err(); err != nil {
		writeError(w, r, err)
		return
	}
	servePage(s, w, r, domain.CursorEnrollments, func(after []byte, limit int) ([]app.Enrollment, []byte, bool, error) {
		return s.app.Enrollments(pid, f, after, limit)
	}, viewEnrollment)
}

func validStatus(st domain.EnrollmentStatus) bool {
	for _, ok := range domain.EnrollmentStatuses {
		if st == ok {
			return true
		}
	}
	return false
}

func statusNames() string {
	names := make([]string, len(domain.EnrollmentStatuses))
	for i, st := range domain.EnrollmentStatuses {
		names[i] = string(st)
	}
	return strings.Join(names, ", ")
}

// enrollmentMove answers a move of one enrollment with the enrollment.
func (s *Server) enrollmentMove(w http.ResponseWriter, r *http.Request, move func(ctx context.Context, partner, id string) (app.Enrollment, error)) {
	e, err := move(r.Context(), partnerID(r), mux.Vars(r)["id"])
	if err != nil {
		writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, viewEnrollment(e))
}

// bodilessMove serves a move that takes no body (an empty JSON object is
// accepted too): pause and resume.
func (s *Server) bodilessMove(move func(a *app.Service, ctx context.Context, partner, id string) (app.Enrollment, error)) claimedHandler {
	return func(w http.ResponseWriter, r *http.Request, claimed *app.Request) {
		if err := decodeOptional(r, &struct{}{}); err != nil {
			writeError(w, r, err)
			return
		}
		s.enrollmentMove(w, r, func(ctx context.Context, partner, id string) (app.Enrollment, error) {
			return move(s.app.Under(claimed), ctx, partner, id)
		})
	}
}

type cancelRequest struct {
	Reason *string `json:"reason"`
}

// cancelEnrollment takes an optional body {reason}.
func (s *Server) cancelEnrollment(w http.ResponseWriter, r *http.Request, claimed *app.Request) {
	var req cancelRequest
	if err := decodeOptional(r, &req); err != nil {
		writeError(w, r, err)
		return
	}
	s.enrollmentMove(w, r, func(ctx context.Context, partner, id string) (app.Enrollment, error) {
		return s.app.Under(claimed).CancelEnrollment(ctx, partner, id, req.Reason)
	})
}

type updateRequest struct {
	Value json.RawMessage `json:"value"`
}

func (s *Server) updateEnrollment(w http.ResponseWriter, r *http.Request, claimed *app.Request) {
	var req updateRequest
	if err := decodeJSON(r, &req); err != nil {
		writeError(w, r, err)
		return
	}
	s.enrollmentMove(w, r, func(ctx context.Context, partner, id string) (app.Enrollment, error) {
		return s.app.Under(claimed).UpdateEnrollment(ctx, partner, id, req.Value)
	})
}
