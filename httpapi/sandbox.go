package httpapi

import (
	"context"
	"encoding/json"
	"net/http"

	"github.com/partnergiving/giving/domain"
	"github.com/partnergiving/giving/simulators"
)

// The sandbox simulators. Each builds the vendor's webhook, signs it with the
// sandbox vendor secret and sends it over HTTP to the service's own edge;
// the answer's status_code is whatever the edge said, rejections included.
// They answer 200 when the edge was reached and 502 when it was not.

// ProblemEdgeUnreachable is a simulator that could not reach the edge.
var ProblemEdgeUnreachable = reg(ProblemType{"edge-unreachable", 502, "Edge unreachable",
	"The simulator could not reach the service's public webhook edge. Check the service's public URL (--public-url)."})

type simulatedAnswer struct {
	StatusCode int `json:"status_code"`
	Simulated  any `json:"simulated,omitempty"`
}

// ownChurch checks that a simulator request names one of the caller's
// churches; anything else is 404 and nothing is sent.
func (s *Server) ownChurch(r *http.Request, churchID string) error {
	if _, ok, err := s.store.Church(partnerID(r), churchID); err != nil || !ok {
		if err != nil {
			return err
		}
		return domain.NotFound("church", churchID)
	}
	return nil
}

// required reports missing string fields, given as name, value pairs.
func required(v *domain.Validation, pairs ...string) {
	for i := 0; i+1 < len(pairs); i += 2 {
		if pairs[i+1] == "" {
			v.Add(pairs[i], "is required")
		}
	}
}

// simulate runs one simulator request: decode it, check its fields (check
// returns the church it names), refuse a church that is not the caller's
// (404, nothing sent), send the vendor webhook, and answer with the edge's
// status code, or 502 when the edge could not be reached.
func simulate[T any](s *Server, w http.ResponseWriter, r *http.Request, check func(*T, *domain.Validation) string, send func(context.Context, *T) (int, any, error)) {
	var req T
	if err := decodeJSON(r, &req); err != nil {
		writeError(w, r, err)
		return
	}
	var v domain.Validation
	church := check(&req, &v)
	if err := v.Err(); err != nil {
		writeError(w, r, err)
		return
	}
	if err := s.ownChurch(r, church); err != nil {
		writeError(w, r, err)
		return
	}
	code, simulated, err := send(r.Context(), &req)
	if err != nil {
		logger(r.Context()).Warn().Err(err).Msg("simulator could not reach the edge")
		writeProblem(w, r, ProblemEdgeUnreachable, "", nil)
		return
	}
	writeJSON(w, http.StatusOK, simulatedAnswer{StatusCode: code, Simulated: simulated})
}

type payrollSimulation struct {
	EnrollmentID string `json:"enrollment_id"`
	ChurchID     string `json:"church_id"`
}

func (s *Server) simulatePayroll(w http.ResponseWriter, r *http.Request) {
	simulate(s, w, r, func(req *payrollSimulation, v *domain.Validation) string {
		required(v, "enrollment_id", req.EnrollmentID, "church_id", req.ChurchID)
		return req.ChurchID
	}, func(ctx context.Context, req *payrollSimulation) (int, any, error) {
		code, err := s.simulator.PayrollConnected(ctx, req.EnrollmentID, req.ChurchID)
		return code, nil, err
	})
}

type depositSimulation struct {
	ChurchID   string          `json:"church_id"`
	AccountRef string          `json:"account_ref"`
	Amount     json.RawMessage `json:"amount"`
	Trace      string          `json:"trace"`
}

func (s *Server) simulateDeposit(w http.ResponseWriter, r *http.Request) {
	simulate(s, w, r, func(req *depositSimulation, v *domain.Validation) string {
		required(v, "church_id", req.ChurchID, "account_ref", req.AccountRef)
		if len(req.Amount) == 0 || string(req.Amount) == "null" {
			v.Add("amount", "is required")
		}
		return req.ChurchID
	}, func(ctx context.Context, req *depositSimulation) (int, any, error) {
		res, err := s.simulator.Deposit(ctx, simulators.Deposit{ChurchID: req.ChurchID, AccountRef: req.AccountRef, Amount: req.Amount, Trace: req.Trace})
		return res.StatusCode, map[string]string{"event_type": "ach.credit.received", "trace": res.Trace, "bank_ts": res.BankTS}, err
	})
}

type kycSimulation struct {
	ChurchID string `json:"church_id"`
	DonorID  string `json:"donor_id"`
	Outcome  string `json:"outcome"`
}

func (s *Server) simulateKYC(w http.ResponseWriter, r *http.Request) {
	simulate(s, w, r, func(req *kycSimulation, v *domain.Validation) string {
		required(v, "church_id", req.ChurchID, "donor_id", req.DonorID)
		switch req.Outcome {
		case "":
			req.Outcome = domain.KYCPassed
		case domain.KYCPassed, domain.KYCReview, domain.KYCFailed:
		default:
			v.Add("outcome", "must be passed, review or failed")
		}
		return req.ChurchID
	}, func(ctx context.Context, req *kycSimulation) (int, any, error) {
		code, err := s.simulator.KYC(ctx, req.ChurchID, req.DonorID, req.Outcome)
		return code, req.Outcome, err
	})
}
