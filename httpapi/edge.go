package httpapi

import (
	"context"
	"encoding/json"
	"net/http"
	"regexp"
	"time"

	"github.com/partnergiving/giving/domain"
	"github.com/partnergiving/giving/eventlog"
)

// The vendor edge: one inbound webhook route per vendor kind. Vendors sign
// each request like the service signs its own webhooks (Vendor-Signature:
// t=<unix>,v1=<hex HMAC-SHA256 of "<t>.<raw body>">) with their own secret.
// A request is verified on its raw body, normalised into a domain command,
// appended, and acknowledged with 2xx only once the append is durable. A
// vendor event id seen before is acknowledged again without a second effect.

// VendorSecrets are the signing secrets of the three vendors.
type VendorSecrets struct {
	Payroll []byte
	Bank    []byte
	KYC     []byte
}

// The edge's own problem types.
var (
	ProblemInvalidSignature = reg(ProblemType{"invalid-signature", 401, "Invalid signature",
		"The vendor webhook's Vendor-Signature header is missing, malformed, older than 300 seconds, or does not match the raw body."})
	ProblemUnknownReference = reg(ProblemType{"unknown-reference", 422, "Unknown reference",
		"The vendor webhook names a church, enrollment or donor that does not exist, or that belong to different partners."})
	ProblemTraceConflict = reg(ProblemType{"trace-conflict", 409, "Trace already used",
		"The bank trace was already credited with a different church, account or amount. It is not credited again."})
)

// vendorEnvelope is the common shape of every vendor webhook.
type vendorEnvelope struct {
	ID        string          `json:"id"`
	Type      string          `json:"type"`
	CreatedAt string          `json:"created_at"`
	Data      json.RawMessage `json:"data"`
}

// vendorAck is the edge's answer to an accepted webhook.
type vendorAck struct {
	Status string `json:"status"` // accepted | duplicate
}

var vendorIDForm = regexp.MustCompile(`^[!-~]{1,255}$`)

// vendorRoute describes one vendor kind.
type vendorRoute struct {
	kind   string
	typ    string
	secret func(*Server) []byte
	handle func(s *Server, ctx context.Context, msgID string, data json.RawMessage) (bool, error)
}

var vendorRoutes = []vendorRoute{
	{kind: "payroll", typ: "deposit_switch.confirmed", secret: func(s *Server) []byte { return s.cfg.Vendors.Payroll }, handle: (*Server).payrollConfirmed},
	{kind: "bank", typ: "ach.credit.received", secret: func(s *Server) []byte { return s.cfg.Vendors.Bank }, handle: (*Server).bankCredit},
	{kind: "kyc", typ: "identity.verification.completed", secret: func(s *Server) []byte { return s.cfg.Vendors.KYC }, handle: (*Server).kycCompleted},
}

// edge serves one vendor kind's webhooks.
func (s *Server) edge(v vendorRoute) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		body, err := readBody(w, r)
		if err != nil {
			writeError(w, r, err)
			return
		}
		if err := domain.VerifySignature(r.Header.Get("Vendor-Signature"), v.secret(s), body, time.Now()); err != nil {
			writeProblem(w, r, ProblemInvalidSignature, "", nil)
			return
		}
		var env vendorEnvelope
		if err := decodeStrict(body, &env); err != nil {
			writeError(w, r, err)
			return
		}
		var val domain.Validation
		if !vendorIDForm.MatchString(env.ID) {
			val.Add("id", "must be 1 to 255 visible ASCII characters")
		}
		if env.Type != v.typ {
			val.Add("type", "must be %q on this route", v.typ)
		}
		if len(env.Data) == 0 || env.Data[0] != '{' {
			val.Add("data", "must be an object")
		}
		if err := val.Err(); err != nil {
			writeError(w, r, err)
			return
		}
		msgID := "vendor:" + v.kind + ":" + env.ID
		seen, err := s.vendorEvents.Has(r.Context(), msgID)
		if err != nil {
			writeError(w, r, err)
			return
		}
		if seen {
			writeJSON(w, http.StatusOK, vendorAck{Status: "duplicate"})
			return
		}
		changed, err := v.handle(s, r.Context(), msgID, env.Data)
		if err != nil {
			writeError(w, r, err)
			return
		}
		// Only a fully handled event is remembered: a retry after a failure
		// part-way runs again, and the domain finishes what is missing.
		if err := s.vendorEvents.Add(r.Context(), msgID); err != nil {
			writeError(w, r, err)
			return
		}
		ack := vendorAck{Status: "accepted"}
		if !changed {
			ack.Status = "duplicate"
		}
		writeJSON(w, http.StatusOK, ack)
	}
}

func unknownReference(format string, args ...any) error {
	return domain.Errorf(domain.KindInvalid, ProblemUnknownReference.Slug, format, args...)
}

// churchOwner is the partner of a church named by a vendor.
func (s *Server) churchOwner(churchID string) (string, error) {
	if !domain.ValidID(domain.PrefixChurch, churchID) {
		return "", unknownReference("church_id %q is not a church.", churchID)
	}
	partner, ok, err := s.store.ChurchPartner(churchID)
	if err != nil {
		return "", err
	}
	if !ok {
		return "", unknownReference("church_id %q is not a church.", churchID)
	}
	return partner, nil
}

// runVendor runs one command of a vendor webhook and reports whether it
// changed anything.
func (s *Server) runVendor(ctx context.Context, cmd eventlog.Command) (bool, error) {
	out, err := s.run(ctx, cmd)
	return err == nil && out.Record != nil && !out.Replayed, err
}

type payrollData struct {
	EnrollmentID string `json:"enrollment_id"`
	ChurchID     string `json:"church_id"`
}

// payrollConfirmed activates a pending enrollment: exactly once, however
// often and wherever the confirmation arrives, because activation is a
// conditional append on the enrollment and an active enrollment decides
// nothing more.
func (s *Server) payrollConfirmed(ctx context.Context, msgID string, raw json.RawMessage) (bool, error) {
	var d payrollData
	if err := decodeStrict(raw, &d); err != nil {
		return false, err
	}
	partner, err := s.churchOwner(d.ChurchID)
	if err != nil {
		return false, err
	}
	if !domain.ValidID(domain.PrefixEnrollment, d.EnrollmentID) {
		return false, unknownReference("enrollment_id %q is not an enrollment of this church.", d.EnrollmentID)
	}
	return s.runVendor(ctx, eventlog.Command{
		Partner: partner, Aggregate: d.EnrollmentID, MsgID: msgID + ":0",
		Decide: func(_ context.Context, h eventlog.History) (*domain.Event, error) {
			var e domain.Enrollment
			for _, ev := range h.Events {
				e.Apply(ev)
			}
			if !e.Exists() || e.ChurchID != d.ChurchID {
				return nil, unknownReference("enrollment_id %q is not an enrollment of this church.", d.EnrollmentID)
			}
			return domain.ActivateEnrollment(&e, s.now())
		},
	})
}

type bankData struct {
	Trace      string          `json:"trace"`
	AccountRef string          `json:"account_ref"`
	Amount     json.RawMessage `json:"amount"`
	Currency   string          `json:"currency"`
	BankTS     string          `json:"bank_ts"`
	ChurchID   string          `json:"church_id"`
}

// bankCredit reconciles an ACH credit: it is credited to the church and its
// account once per trace, then announced to the partner as deposit.received.
// Both steps are conditional appends on the deposit, whose id derives from
// the trace; a retried webhook finishes whatever a crash left undone.
func (s *Server) bankCredit(ctx context.Context, msgID string, raw json.RawMessage) (bool, error) {
	var d bankData
	if err := decodeStrict(raw, &d); err != nil {
		return false, err
	}
	c, err := s.parseCredit(d)
	if err != nil {
		return false, err
	}
	loadDeposit := func(h eventlog.History) domain.Deposit {
		var dep domain.Deposit
		for _, ev := range h.Events {
			dep.Apply(ev)
		}
		return dep
	}
	id := domain.DepositIDForTrace(c.Trace)
	credited, err := s.runVendor(ctx, eventlog.Command{
		Partner: c.PartnerID, Aggregate: id, MsgID: msgID + ":0",
		Decide: func(_ context.Context, h eventlog.History) (*domain.Event, error) {
			dep := loadDeposit(h)
			return domain.CreditDeposit(&dep, c, s.now())
		},
	})
	if err != nil {
		return false, err
	}
	_, err = s.runVendor(ctx, eventlog.Command{
		Partner: c.PartnerID, Aggregate: id, MsgID: msgID + ":1",
		Decide: func(_ context.Context, h eventlog.History) (*domain.Event, error) {
			dep := loadDeposit(h)
			return domain.AnnounceDeposit(&dep, c.PartnerID, s.now()), nil
		},
	})
	return credited, err
}

// parseCredit normalises a bank credit. The amount must be a JSON number
// with at most two decimals and above 0; it is read from its text into
// integer cents.
func (s *Server) parseCredit(d bankData) (domain.Credit, error) {
	var v domain.Validation
	c := domain.Credit{Trace: d.Trace, AccountRef: d.AccountRef, ChurchID: d.ChurchID}
	if amount, ok := domain.ParseHundredths(json.Number(d.Amount)); !ok || len(d.Amount) == 0 || !isJSONNumber(d.Amount) || amount <= 0 {
		v.Add("amount", "must be a JSON number above 0 with at most two decimals")
	} else {
		c.Amount = amount
	}
	if d.Currency != "" && d.Currency != "USD" {
		v.Add("currency", "must be USD")
	}
	ts, err := time.Parse(time.RFC3339Nano, d.BankTS)
	if err != nil {
		v.Add("bank_ts", "must be an RFC 3339 timestamp")
	}
	c.BankTS = ts
	if err := v.Err(); err != nil {
		return c, err
	}
	if err := domain.ValidateCredit(c); err != nil {
		return c, err
	}
	partner, err := s.churchOwner(d.ChurchID)
	c.PartnerID = partner
	return c, err
}

type kycData struct {
	DonorID  string `json:"donor_id"`
	ChurchID string `json:"church_id"`
	Outcome  string `json:"outcome"`
}

// kycCompleted moves the donor's sessions waiting for identity
// verification on: passed to payroll, review to the in-review screen, failed
// to the declined screen.
func (s *Server) kycCompleted(ctx context.Context, msgID string, raw json.RawMessage) (bool, error) {
	var d kycData
	if err := decodeStrict(raw, &d); err != nil {
		return false, err
	}
	switch d.Outcome {
	case domain.KYCPassed, domain.KYCReview, domain.KYCFailed:
	default:
		var v domain.Validation
		v.Add("outcome", "must be passed, review or failed")
		return false, v.Err()
	}
	partner, err := s.churchOwner(d.ChurchID)
	if err != nil {
		return false, err
	}
	if !domain.ValidID(domain.PrefixDonor, d.DonorID) {
		return false, unknownReference("donor_id %q is not a donor of this church.", d.DonorID)
	}
	ids, err := s.store.DonorSessions(partner, d.DonorID)
	if err != nil {
		return false, err
	}
	changed, waiting := false, false
	for _, id := range ids {
		did, err := s.runVendor(ctx, eventlog.Command{
			Partner: partner, Aggregate: id, MsgID: msgID + ":" + id,
			Decide: func(_ context.Context, h eventlog.History) (*domain.Event, error) {
				cur := loadSession(h)
				if cur.ChurchID != d.ChurchID || (cur.Step(s.now()) != domain.StepKYC && cur.KYC != d.Outcome) {
					return nil, nil
				}
				waiting = true
				return domain.DecideKYC(&cur, d.Outcome, "vendor", s.now())
			},
		})
		if err != nil {
			return false, err
		}
		changed = changed || did
	}
	if !waiting {
		if len(ids) == 0 {
			return false, unknownReference("donor_id %q is not a donor of this church.", d.DonorID)
		}
		return false, domain.Errorf(domain.KindConflict, "conflict", "No session of this donor is waiting for identity verification.")
	}
	return changed, nil
}
