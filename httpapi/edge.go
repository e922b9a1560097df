package httpapi

import (
	"encoding/json"
	"errors"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/partnergiving/giving/app"
	"github.com/partnergiving/giving/domain"
	"github.com/partnergiving/giving/telemetry"
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

// vendorRoute describes one vendor kind: its secret, its event types, and
// how each type's data decodes into the use case's input.
type vendorRoute struct {
	kind   string
	secret func(*Server) []byte
	types  []vendorType
}

type vendorType struct {
	typ    string
	decode func(data json.RawMessage, ev *app.VendorEvent) error
}

var vendorRoutes = []vendorRoute{
	{kind: "payroll", secret: func(s *Server) []byte { return s.cfg.Vendors.Payroll }, types: []vendorType{
		{typ: "deposit_switch.confirmed", decode: decodePayroll},
		{typ: "deposit_switch.ended", decode: decodePayrollEnd},
	}},
	{kind: "bank", secret: func(s *Server) []byte { return s.cfg.Vendors.Bank }, types: []vendorType{{typ: "ach.credit.received", decode: decodeBank}}},
	{kind: "kyc", secret: func(s *Server) []byte { return s.cfg.Vendors.KYC }, types: []vendorType{{typ: "identity.verification.completed", decode: decodeKYC}}},
}

// typeOf finds how the route decodes an event type.
func (v vendorRoute) typeOf(typ string) (vendorType, bool) {
	for _, t := range v.types {
		if t.typ == typ {
			return t, true
		}
	}
	return vendorType{}, false
}

// typeNames lists the route's event types, quoted, for an error.
func (v vendorRoute) typeNames() string {
	names := make([]string, len(v.types))
	for i, t := range v.types {
		names[i] = strconv.Quote(t.typ)
	}
	return strings.Join(names, " or ")
}

// edge serves one vendor kind's webhooks, counts each by result, and logs
// every rejection with its reason: the error's code, detail and fields,
// never the body or the secret. Only the signature's reason is logged for an
// unauthenticated request.
func (s *Server) edge(v vendorRoute) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		result, err := s.receiveVendor(w, r, v)
		s.cfg.Metrics.VendorWebhook(v.kind, result)
		if err != nil {
			logger(r.Context()).Warn().Str("vendor", v.kind).Str("result", result).Str("reason", err.Error()).Msg("vendor webhook rejected")
		}
	}
}

// receiveVendor answers one vendor webhook and says how it went: a result
// for the metrics and, when it was not accepted, why.
func (s *Server) receiveVendor(w http.ResponseWriter, r *http.Request, v vendorRoute) (string, error) {
	body, err := readBody(w, r)
	if err != nil {
		writeError(w, r, err)
		return telemetry.VendorInvalid, err
	}
	if err := domain.VerifySignature(r.Header.Get(domain.VendorSignatureHeader), v.secret(s), body, time.Now()); err != nil {
		writeProblem(w, r, domain.ProblemInvalidSignature, "", nil)
		return telemetry.VendorInvalidSignature, err
	}
	var env vendorEnvelope
	if err := decodeStrict(body, &env); err != nil {
		writeError(w, r, err)
		return telemetry.VendorInvalid, err
	}
	var val domain.Validation
	if !vendorIDForm.MatchString(env.ID) {
		val.Add("id", "must be 1 to 255 visible ASCII characters")
	}
	vt, known := v.typeOf(env.Type)
	if !known {
		val.Add("type", "must be %s on this route", v.typeNames())
	}
	if len(env.Data) == 0 || env.Data[0] != '{' {
		val.Add("data", "must be an object")
	}
	if err := val.Err(); err != nil {
		writeError(w, r, err)
		return telemetry.VendorInvalid, err
	}
	ev := app.VendorEvent{Kind: v.kind, ID: env.ID}
	if err := vt.decode(env.Data, &ev); err != nil {
		writeError(w, r, err)
		return telemetry.VendorInvalid, err
	}
	changed, err := s.app.ReceiveVendorEvent(r.Context(), ev)
	if err != nil {
		writeError(w, r, err)
		var de *domain.Error
		if errors.As(err, &de) && de.Kind != domain.KindUnavailable && !errors.Is(err, domain.ErrUnavailable) {
			return telemetry.VendorRefused, err
		}
		return telemetry.VendorFailed, err
	}
	if !changed {
		writeJSON(w, http.StatusOK, vendorAck{Status: "duplicate"})
		return telemetry.VendorDuplicate, nil
	}
	writeJSON(w, http.StatusOK, vendorAck{Status: "accepted"})
	return telemetry.VendorAccepted, nil
}

type payrollData struct {
	EnrollmentID string `json:"enrollment_id"`
	ChurchID     string `json:"church_id"`
}

func decodePayroll(raw json.RawMessage, ev *app.VendorEvent) error {
	var d payrollData
	if err := decodeStrict(raw, &d); err != nil {
		return err
	}
	ev.Payroll = &app.PayrollConfirmation{EnrollmentID: d.EnrollmentID, ChurchID: d.ChurchID}
	return nil
}

type payrollEndData struct {
	EnrollmentID string `json:"enrollment_id"`
	ChurchID     string `json:"church_id"`
	Reason       string `json:"reason"`
}

func decodePayrollEnd(raw json.RawMessage, ev *app.VendorEvent) error {
	var d payrollEndData
	if err := decodeStrict(raw, &d); err != nil {
		return err
	}
	ev.PayrollEnd = &app.PayrollEnd{EnrollmentID: d.EnrollmentID, ChurchID: d.ChurchID, Reason: d.Reason}
	return nil
}

type bankData struct {
	Trace      string          `json:"trace"`
	AccountRef string          `json:"account_ref"`
	Amount     json.RawMessage `json:"amount"`
	Currency   string          `json:"currency"`
	BankTS     string          `json:"bank_ts"`
	ChurchID   string          `json:"church_id"`
}

func decodeBank(raw json.RawMessage, ev *app.VendorEvent) error {
	var d bankData
	if err := decodeStrict(raw, &d); err != nil {
		return err
	}
	ev.Bank = &app.BankCredit{Trace: d.Trace, AccountRef: d.AccountRef, Amount: d.Amount, Currency: d.Currency, BankTS: d.BankTS, ChurchID: d.ChurchID}
	return nil
}

type kycData struct {
	DonorID  string `json:"donor_id"`
	ChurchID string `json:"church_id"`
	Outcome  string `json:"outcome"`
}

func decodeKYC(raw json.RawMessage, ev *app.VendorEvent) error {
	var d kycData
	if err := decodeStrict(raw, &d); err != nil {
		return err
	}
	ev.KYC = &app.KYCResult{DonorID: d.DonorID, ChurchID: d.ChurchID, Outcome: d.Outcome}
	return nil
}
