package app

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"net/url"
	"regexp"
	"slices"

	"github.com/nyaruka/phonenumbers"

	"github.com/partnergiving/giving/domain"
	"github.com/partnergiving/giving/eventlog"
	"github.com/partnergiving/giving/telemetry"
)

// SessionRequest is a partner's request for a donor session, as sent: a nil
// field was not sent. Value is the JSON text of the value field.
type SessionRequest struct {
	ChurchID    *string
	DonorPhone  *string
	Mode        *string
	Value       json.RawMessage
	RedirectURL *string
}

// CreatedSession is a new donor session and its hosted-flow url, which is
// shown once.
type CreatedSession struct {
	Session domain.Session
	URL     string
}

// CreateSession opens a donor session. Every field is checked and all the
// faults are reported at once; the phone is never echoed in an error. The
// session's event carries the phone sealed by the vault (one synced write
// for the two), and the donor's id.
func (s *Service) CreateSession(ctx context.Context, partner string, req SessionRequest) (CreatedSession, error) {
	s = s.as("app.CreateSession")
	n, phone, err := s.validateSession(ctx, partner, req)
	if err != nil {
		return CreatedSession{}, err
	}
	n.DonorID = s.vault.DonorID(partner, phone)
	sctx, span := telemetry.Start(ctx, "vault.seal")
	sealed, storeBy, err := s.vault.SealPhone(sctx, n.DonorID, phone)
	telemetry.End(span, err)
	if err != nil {
		return CreatedSession{}, err
	}
	n.Phone = &sealed
	// The phone key may be erased once storeBy has passed: an append still
	// under way then is given up, and a retry seals with the next key.
	ctx, cancel := context.WithDeadline(ctx, storeBy)
	defer cancel()
	n.ID = domain.NewID(domain.PrefixSession)
	out, err := s.runAnswered(ctx, eventlog.Command{
		Partner: partner, Aggregate: n.ID, New: true,
		Decide: func(_ context.Context, h eventlog.History) (*domain.Event, error) {
			cur := domain.Fold[domain.Session](h.Events)
			n.TokenHash = domain.HashSecret(s.flowToken(n.ID))
			ev, err := domain.CreateSession(&cur, n, s.Now())
			return &ev, err
		},
	})
	if err != nil {
		return CreatedSession{}, err
	}
	// After a crash takeover the session may be the one an earlier run
	// created; answer with that one.
	ev, err := out.Record.Event()
	if err != nil {
		return CreatedSession{}, err
	}
	created := domain.Fold[domain.Session]([]domain.Event{ev})
	return CreatedSession{Session: created, URL: s.flowURL(created.ID)}, nil
}

var e164Form = regexp.MustCompile(`^\+[1-9][0-9]{6,14}$`)

func (s *Service) validateSession(ctx context.Context, partner string, req SessionRequest) (domain.NewSession, string, error) {
	var v domain.Validation
	n := domain.NewSession{PartnerID: partner}
	switch {
	case req.ChurchID == nil:
		v.Add("church_id", "is required")
	case !domain.ValidID(domain.PrefixChurch, *req.ChurchID):
		v.Add("church_id", "is not a church id of this partner")
	default:
		c, ok, err := s.writtenChurch(ctx, partner, *req.ChurchID)
		if err != nil {
			return n, "", err
		}
		if !ok {
			v.Add("church_id", "is not a church id of this partner")
		}
		if c.ArchivedAt != nil {
			return n, "", domain.ProblemChurchArchived.New("Church %s is archived and takes no new donor sessions.", c.ID)
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
	} else if !IsJSONNumber(req.Value) {
		v.Add("value", "must be a number")
	} else if g, fe := domain.ParseGiving(*req.Mode, json.Number(req.Value)); fe != nil {
		v.Add(fe.Field, "%s", fe.Detail)
	} else {
		n.Giving = g
	}
	if req.RedirectURL == nil {
		v.Add("redirect_url", "is required")
	} else if detail := s.checkRedirect(partner, *req.RedirectURL); detail != "" {
		v.Add("redirect_url", "%s", detail)
	} else {
		n.RedirectURL = *req.RedirectURL
	}
	return n, phone, v.Err()
}

// IsJSONNumber reports whether raw JSON text is a number.
func IsJSONNumber(raw json.RawMessage) bool {
	if len(raw) == 0 {
		return false
	}
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
func (s *Service) checkRedirect(partner, raw string) string {
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
	p, ok, err := s.store.Partner(partner)
	if err != nil || !ok || !slices.Contains(p.RedirectOrigins, domain.OriginOf(u)) {
		return "must be on one of the partner's allowlisted origins"
	}
	return ""
}

// flowToken is the secret in a session's hosted-flow url: 256 bits derived
// from the session id with a server key. Only its hash is stored. Deriving it
// (rather than drawing it at random) lets an idempotent replay of the
// creation answer with the same url.
func (s *Service) flowToken(sessionID string) string {
	m := hmac.New(sha256.New, s.flowKey)
	m.Write([]byte(sessionID))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

func (s *Service) flowURL(sessionID string) string {
	return s.cfg.PublicURL + "/flow/" + s.flowToken(sessionID)
}

// updateSession runs a decision on a session loaded from the ledger and
// returns the session as it stands afterwards. When it appended, it waits
// for the local projections to apply the event, so that the page a donor is
// redirected to next already shows the new step.
func (s *Service) updateSession(ctx context.Context, partner, id string, decide func(*domain.Session) (*domain.Event, error)) (domain.Session, error) {
	var after domain.Session
	_, err := s.run(ctx, eventlog.Command{
		Partner: partner, Aggregate: id,
		Decide: func(_ context.Context, h eventlog.History) (*domain.Event, error) {
			cur := domain.Fold[domain.Session](h.Events)
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
func (s *Service) ensureEnrollment(ctx context.Context, sess domain.Session) error {
	if sess.Status != domain.SessionCompleted {
		return nil
	}
	n := sess.EnrollmentFor()
	_, err := s.run(ctx, eventlog.Command{
		Partner: n.PartnerID, Aggregate: n.ID, MsgID: "enroll:" + n.ID,
		Decide: func(_ context.Context, h eventlog.History) (*domain.Event, error) {
			e := domain.Fold[domain.Enrollment](h.Events)
			if e.Exists() {
				return nil, nil
			}
			ev, err := domain.CreateEnrollment(&e, n, s.Now())
			return &ev, err
		},
	})
	return err
}
