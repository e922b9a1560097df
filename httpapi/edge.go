package httpapi

import (
	"errors"
	"net/http"

	"github.com/partnergiving/giving/app"
	"github.com/partnergiving/giving/domain"
	"github.com/partnergiving/giving/telemetry"
)

// The vendor edge: one inbound webhook route per vendor kind, each taking
// its vendor's own format and signature scheme: Truv's (edge_payroll.go),
// Increase's (edge_bank.go) and Stripe Identity's (edge_kyc.go).
// A request is verified on its raw body, normalised into a domain command,
// appended, and acknowledged with 2xx only once the append is durable. A
// vendor event id seen before is acknowledged again without a second effect.

// VendorSecrets are the signing secrets of the three vendors. Bank is the
// shared secret of the Increase event subscription that sends /edge/bank
// its webhooks (edge_bank.go).
type VendorSecrets struct {
	Payroll []byte
	Bank    []byte
	KYC     []byte
}

// vendorAck is the edge's answer to an accepted webhook.
type vendorAck struct {
	Status string `json:"status"` // accepted | duplicate
}

// vendorRoute is one vendor's webhook route, /edge/<kind>. parse verifies
// the request the vendor's way and reduces it to the use case's input. Its
// errors say how to answer: a *vendorRefusal with the status the vendor
// expects (a bad signature, a body that is not the vendor's), errVendorIgnored
// for an authentic event the service does not need (2xx, so the vendor does
// not send it again), a domain error as the problem it is, anything else a
// failure of ours (5xx, so the vendor sends it again).
type vendorRoute struct {
	kind  string // payroll | bank | kyc: the path and the metrics label
	parse func(s *Server, r *http.Request, body []byte) (app.VendorEvent, error)
}

// vendorRefusal is a webhook refused before it reached a use case.
type vendorRefusal struct {
	problem domain.Problem
	err     error
}

func (e *vendorRefusal) Error() string { return e.err.Error() }
func (e *vendorRefusal) Unwrap() error { return e.err }

// refuseSignature refuses a webhook whose signature does not verify, with
// the status the vendor expects (Stripe's examples answer 400, Truv's and
// Increase's 401).
func refuseSignature(status int, err error) error {
	p := domain.ProblemInvalidSignature
	p.Status = status
	return &vendorRefusal{problem: p, err: err}
}

// errVendorIgnored marks an authentic webhook the service has no use for.
var errVendorIgnored = errors.New("vendor event not used by the service")

var vendorRoutes = []vendorRoute{
	{kind: "payroll", parse: parseTruv},
	{kind: "bank", parse: parseBank},
	{kind: "kyc", parse: parseStripeIdentity},
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
	ev, err := v.parse(s, r, body)
	var refusal *vendorRefusal
	switch {
	case errors.Is(err, errVendorIgnored):
		writeJSON(w, http.StatusOK, vendorAck{Status: "ignored"})
		return telemetry.VendorIgnored, nil
	case errors.As(err, &refusal):
		writeProblem(w, r, refusal.problem, "", nil)
		if refusal.problem.Code == domain.ProblemInvalidSignature.Code {
			return telemetry.VendorInvalidSignature, err
		}
		return telemetry.VendorInvalid, err
	case err != nil:
		writeError(w, r, err)
		if isUnavailable(err) {
			return telemetry.VendorFailed, err
		}
		return telemetry.VendorInvalid, err
	}
	ev.Kind = v.kind
	changed, err := s.app.ReceiveVendorEvent(r.Context(), ev)
	if err != nil {
		writeError(w, r, err)
		if isUnavailable(err) {
			return telemetry.VendorFailed, err
		}
		return telemetry.VendorRefused, err
	}
	if !changed {
		writeJSON(w, http.StatusOK, vendorAck{Status: "duplicate"})
		return telemetry.VendorDuplicate, nil
	}
	writeJSON(w, http.StatusOK, vendorAck{Status: "accepted"})
	return telemetry.VendorAccepted, nil
}

// isUnavailable reports whether err is a failure to retry (ours or a
// vendor's API), not a refusal of the request.
func isUnavailable(err error) bool {
	var de *domain.Error
	return !errors.As(err, &de) || de.Kind == domain.KindUnavailable || errors.Is(err, domain.ErrUnavailable)
}
