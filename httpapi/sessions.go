package httpapi

import (
	"encoding/json"
	"net/http"
	"time"

	"github.com/gorilla/mux"

	"github.com/partnergiving/giving/app"
	"github.com/partnergiving/giving/domain"
)

// sessionView is a donor session as partners see it: status and configured
// values, never the phone, and the url only in the creation answer.
type sessionView struct {
	ID           string            `json:"id"`
	URL          string            `json:"url,omitempty"`
	ExpiresAt    string            `json:"expires_at"`
	ChurchID     string            `json:"church_id"`
	DonorID      string            `json:"donor_id"`
	Mode         domain.Mode       `json:"mode"`
	Value        domain.Hundredths `json:"value"`
	Status       string            `json:"status"`
	EnrollmentID *string           `json:"enrollment_id"`
	CreatedAt    string            `json:"created_at"`
}

func viewSession(s domain.Session, now time.Time) sessionView {
	// The deadline is the url's expiry, or later while the payroll vendor
	// works on a switch the donor started (domain.PayrollWait): the
	// session is not expired while it may still complete.
	status := s.Status
	if status == domain.SessionOpen && !now.Before(s.Deadline()) {
		status = domain.SessionExpired
	}
	v := sessionView{
		ID: s.ID, ExpiresAt: domain.FormatTime(s.Deadline()), ChurchID: s.ChurchID, DonorID: s.DonorID,
		Mode: s.Giving.Mode, Value: s.Giving.Value, Status: string(status), CreatedAt: domain.FormatTime(s.CreatedAt),
	}
	if s.EnrollmentID != "" {
		id := s.EnrollmentID
		v.EnrollmentID = &id
	}
	return v
}

type sessionRequest struct {
	ChurchID    *string         `json:"church_id"`
	DonorPhone  *string         `json:"donor_phone"`
	Mode        *string         `json:"mode"`
	Value       json.RawMessage `json:"value"`
	RedirectURL *string         `json:"redirect_url"`
}

// createSession opens a donor session and returns its hosted-flow url once.
func (s *Server) createSession(w http.ResponseWriter, r *http.Request, claimed *app.Request) {
	var req sessionRequest
	if err := decodeJSON(r, &req); err != nil {
		writeError(w, r, err)
		return
	}
	created, err := s.app.Under(claimed).CreateSession(r.Context(), partnerID(r), app.SessionRequest(req))
	if err != nil {
		writeError(w, r, err)
		return
	}
	v := viewSession(created.Session, s.now())
	v.URL = created.URL
	writeJSON(w, http.StatusCreated, v)
}

func (s *Server) getSession(w http.ResponseWriter, r *http.Request) {
	id := mux.Vars(r)["id"]
	sess, ok, err := s.store.Session(partnerID(r), id)
	if err != nil {
		writeError(w, r, err)
		return
	}
	// A re-consent session is the service's own, opened for an enrollment
	// update; partners follow the enrollment, not it.
	if !ok || sess.Purpose != domain.SessionPurposeEnroll {
		writeError(w, r, domain.NotFound("donor session", id))
		return
	}
	writeJSON(w, http.StatusOK, viewSession(sess, s.now()))
}
