package httpapi

import (
	"net/http"

	"github.com/gorilla/mux"

	"github.com/partnergiving/giving/domain"
	"github.com/partnergiving/giving/projections"
)

// enrollmentView shows an enrollment's status and configured values only.
type enrollmentView struct {
	EnrollmentID   string            `json:"enrollment_id"`
	ChurchID       string            `json:"church_id"`
	DonorID        string            `json:"donor_id"`
	DonorSessionID string            `json:"donor_session_id"`
	Status         string            `json:"status"`
	Mode           domain.Mode       `json:"mode"`
	Value          domain.Hundredths `json:"value"`
	CreatedAt      string            `json:"created_at"`
	ActivatedAt    *string           `json:"activated_at"`
}

func viewEnrollment(e projections.EnrollmentView) enrollmentView {
	v := enrollmentView{
		EnrollmentID: e.ID, ChurchID: e.ChurchID, DonorID: e.DonorID, DonorSessionID: e.SessionID,
		Status: string(e.Status), Mode: e.Giving.Mode, Value: e.Giving.Value, CreatedAt: domain.FormatTime(e.CreatedAt),
	}
	if e.ActivatedAt != nil {
		at := domain.FormatTime(*e.ActivatedAt)
		v.ActivatedAt = &at
	}
	return v
}

func (s *Server) getEnrollment(w http.ResponseWriter, r *http.Request) {
	id := mux.Vars(r)["id"]
	e, ok, err := s.store.Enrollment(partnerID(r), id)
	if err != nil {
		writeError(w, r, err)
		return
	}
	if !ok {
		writeError(w, r, domain.NotFound("enrollment", id))
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
	switch f.Status {
	case "", domain.EnrollmentPending, domain.EnrollmentActive:
	default:
		v.Add("status", "must be pending or active")
	}
	if err := v.Err(); err != nil {
		writeError(w, r, err)
		return
	}
	servePage(s, w, r, domain.CursorEnrollments, func(after []byte, limit int) ([]projections.EnrollmentView, []byte, bool, error) {
		return s.store.Enrollments(pid, f, after, limit)
	}, viewEnrollment)
}
