package httpapi

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"time"

	"github.com/gorilla/mux"
	"github.com/nyaruka/phonenumbers"

	"github.com/partnergiving/giving/domain"
	"github.com/partnergiving/giving/eventlog"
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
	status := s.Status
	if status == domain.SessionOpen && !now.Before(s.ExpiresAt) {
		status = domain.SessionExpired
	}
	v := sessionView{
		ID: s.ID, ExpiresAt: domain.FormatTime(s.ExpiresAt), ChurchID: s.ChurchID, DonorID: s.DonorID,
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
func (s *Server) createSession(w http.ResponseWriter, r *http.Request) {
	var req sessionRequest
	if err := decodeJSON(r, &req); err != nil {
		writeError(w, r, err)
		return
	}
	pid := partnerID(r)
	n, phone, err := s.validateSession(pid, req)
	if err != nil {
		writeError(w, r, err)
		return
	}
	n.DonorID = s.vault.DonorID(pid, phone)
	if err := s.vault.Put(r.Context(), n.DonorID, phone); err != nil {
		writeError(w, r, err)
		return
	}
	n.ID = domain.NewID(domain.PrefixSession)
	out, err := s.execute(r, 0, eventlog.Command{
		Partner: pid, Aggregate: n.ID,
		Decide: func(_ context.Context, h eventlog.History) (*domain.Event, error) {
			cur := loadSession(h)
			n.TokenHash = domain.HashSecret(s.flowToken(n.ID))
			ev, err := domain.CreateSession(&cur, n, s.now())
			return &ev, err
		},
	})
	if err != nil {
		writeError(w, r, err)
		return
	}
	// After a crash takeover the session may be the one an earlier run
	// created; answer with that one.
	ev, err := out.Record.Event()
	if err != nil {
		writeError(w, r, err)
		return
	}
	var created domain.Session
	created.Apply(ev)
	v := viewSession(created, s.now())
	v.URL = s.flowURL(created.ID)
	writeJSON(w, http.StatusCreated, v)
}

var e164Form = regexp.MustCompile(`^\+[1-9][0-9]{6,14}$`)

// validateSession checks every field, reporting all the faults at once. The
// phone is never echoed in an error.
func (s *Server) validateSession(pid string, req sessionRequest) (domain.NewSession, string, error) {
	var v domain.Validation
	n := domain.NewSession{PartnerID: pid}
	switch {
	case req.ChurchID == nil:
		v.Add("church_id", "is required")
	case !domain.ValidID(domain.PrefixChurch, *req.ChurchID):
		v.Add("church_id", "is not a church id of this partner")
	default:
		_, ok, err := s.store.Church(pid, *req.ChurchID)
		if err != nil {
			return n, "", err
		}
		if !ok {
			v.Add("church_id", "is not a church id of this partner")
		}
		n.ChurchID = *req.ChurchID
	}
	var phone string
	if req.DonorPhone == nil {
		v.Add("donor_phone", "is required")
	} else if p, ok := normalizePhone(*req.DonorPhone); !ok {
		v.Add("donor_phone", "must be a valid phone number in E.164 format, such as +12025550123")
	} else {
		phone = p
	}
	if req.Mode == nil {
		v.Add("mode", `is required: "pct" or "fixed"`)
	} else if len(req.Value) == 0 || string(req.Value) == "null" {
		v.Add("value", "is required")
	} else if !isJSONNumber(req.Value) {
		v.Add("value", "must be a number")
	} else if g, fe := domain.ParseGiving(*req.Mode, json.Number(req.Value)); fe != nil {
		v.Add(fe.Field, "%s", fe.Detail)
	} else {
		n.Giving = g
	}
	if req.RedirectURL == nil {
		v.Add("redirect_url", "is required")
	} else if detail := s.checkRedirect(pid, *req.RedirectURL); detail != "" {
		v.Add("redirect_url", "%s", detail)
	} else {
		n.RedirectURL = *req.RedirectURL
	}
	return n, phone, v.Err()
}

func isJSONNumber(raw json.RawMessage) bool {
	c := raw[0]
	return c == '-' || (c >= '0' && c <= '9')
}

// normalizePhone accepts an E.164 number that libphonenumber says can exist.
func normalizePhone(s string) (string, bool) {
	if !e164Form.MatchString(s) {
		return "", false
	}
	n, err := phonenumbers.Parse(s, "")
	if err != nil || !phonenumbers.IsValidNumber(n) || phonenumbers.Format(n, phonenumbers.E164) != s {
		return "", false
	}
	return s, true
}

// checkRedirect returns what is wrong with a redirect url, or "".
func (s *Server) checkRedirect(pid, raw string) string {
	if len(raw) > domain.MaxRedirectURL {
		return "must be at most 2048 characters"
	}
	u, err := url.Parse(raw)
	if err != nil || !u.IsAbs() || u.Scheme != "https" || u.Host == "" || u.Opaque != "" {
		return "must be an absolute https URL"
	}
	if u.User != nil {
		return "must not contain user information"
	}
	p, ok, err := s.store.Partner(pid)
	if err != nil || !ok || !slices.Contains(p.RedirectOrigins, domain.OriginOf(u)) {
		return "must be on one of the partner's allowlisted origins"
	}
	return ""
}

// flowToken is the secret in a session's hosted-flow url: 256 bits derived
// from the session id with a server key. Only its hash is stored. Deriving it
// (rather than drawing it at random) lets an idempotent replay of the
// creation answer with the same url.
func (s *Server) flowToken(sessionID string) string {
	m := hmac.New(sha256.New, s.flowKey)
	m.Write([]byte(sessionID))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

func (s *Server) flowURL(sessionID string) string {
	return s.cfg.PublicURL + "/flow/" + s.flowToken(sessionID)
}

func (s *Server) getSession(w http.ResponseWriter, r *http.Request) {
	id := mux.Vars(r)["id"]
	sess, ok, err := s.store.Session(partnerID(r), id)
	if err != nil {
		writeError(w, r, err)
		return
	}
	if !ok {
		writeError(w, r, domain.NotFound("donor session", id))
		return
	}
	writeJSON(w, http.StatusOK, viewSession(sess, s.now()))
}

// loadSession folds a session's history.
func loadSession(h eventlog.History) domain.Session {
	var s domain.Session
	for _, e := range h.Events {
		s.Apply(e)
	}
	return s
}

// sessionCommand runs a decision on a session aggregate loaded from the
// ledger, and returns the session as it stands afterwards. When it appended,
// it waits for the local projections to apply the event, so that the page a
// donor is redirected to next already shows the new step.
func (s *Server) sessionCommand(ctx context.Context, partner, id string, decide func(*domain.Session) (*domain.Event, error)) (domain.Session, error) {
	var after domain.Session
	_, err := s.run(ctx, eventlog.Command{
		Partner: partner, Aggregate: id,
		Decide: func(_ context.Context, h eventlog.History) (*domain.Event, error) {
			cur := loadSession(h)
			if !cur.Exists() {
				return nil, domain.NotFound("donor session", id)
			}
			ev, err := decide(&cur)
			if ev != nil {
				cur.Apply(*ev)
			}
			after = cur
			return ev, err
		},
	})
	return after, err
}

// ensureEnrollment creates a completed session's enrollment unless it
// exists. Its id comes from the session's completion, so every caller (the
// flow, a retry, the sweeper) creates the same one, once.
func (s *Server) ensureEnrollment(ctx context.Context, sess domain.Session) error {
	if sess.Status != domain.SessionCompleted {
		return nil
	}
	n := sess.EnrollmentFor()
	_, err := s.run(ctx, eventlog.Command{
		Partner: n.PartnerID, Aggregate: n.ID, MsgID: "enroll:" + n.ID,
		Decide: func(_ context.Context, h eventlog.History) (*domain.Event, error) {
			var e domain.Enrollment
			for _, ev := range h.Events {
				e.Apply(ev)
			}
			if e.Exists() {
				return nil, nil
			}
			ev, err := domain.CreateEnrollment(&e, n, s.now())
			return &ev, err
		},
	})
	return err
}

// SweepSessions expires open sessions whose url ran out, emitting
// donor_session.expired for each, and creates the enrollments that completed
// sessions lack, until ctx ends. Every instance may sweep: the expiry is a
// conditional append, and an enrollment is created under the id its session
// names, once, so only one of them records each.
func (s *Server) SweepSessions(ctx context.Context, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		due, err := s.store.DueSessions(s.now(), 500)
		if err != nil {
			s.log.Error().Err(err).Msg("session sweep")
			continue
		}
		for _, ref := range due {
			_, err := s.sessionCommand(ctx, ref.PartnerID, ref.SessionID, func(cur *domain.Session) (*domain.Event, error) {
				return domain.Expire(cur, s.now()), nil
			})
			if err != nil && !errors.Is(err, context.Canceled) {
				s.log.Error().Err(err).Str("session_id", ref.SessionID).Msg("session expiry")
			}
		}
		s.sweepEnrollments(ctx)
	}
}

// enrollmentGrace is how long a completed session goes without its
// enrollment before the sweeper creates it: the flow creates it right after
// the completion and should be the one to.
const enrollmentGrace = 5 * time.Second

// sweepEnrollments creates the enrollment of every session that completed
// more than enrollmentGrace ago without one. The flow creates it right after
// the completion, but if that fails (the ledger out of reach, the process
// stopping) nothing else would until the donor reloads the done page.
func (s *Server) sweepEnrollments(ctx context.Context) {
	due, err := s.store.UnenrolledSessions(s.now().Add(-enrollmentGrace), 500)
	if err != nil {
		s.log.Error().Err(err).Msg("enrollment sweep")
		return
	}
	for _, ref := range due {
		sess, ok, err := s.store.Session(ref.PartnerID, ref.SessionID)
		if err == nil && ok {
			err = s.ensureEnrollment(ctx, sess)
		}
		if err != nil && !errors.Is(err, context.Canceled) {
			s.log.Error().Err(err).Str("session_id", ref.SessionID).Msg("enrollment creation")
		}
	}
}
