package httpapi

import (
	"context"
	"encoding/json"
	"net/http"

	"github.com/partnergiving/giving/app"
	"github.com/partnergiving/giving/domain"
)

// The sandbox simulators' routes (app's Simulate* use cases). Each answers
// 200 with the edge's status code (and its problem body when it refused the
// webhook) when the edge decided, 503 when the edge failed (5xx: retry with
// the key), and 502 when it was not reached.

type simulatedAnswer struct {
	StatusCode int             `json:"status_code"`
	Simulated  any             `json:"simulated,omitempty"`
	Problem    json.RawMessage `json:"problem,omitempty"`
}

// required reports missing string fields, given as name, value pairs.
func required(v *domain.Validation, pairs ...string) {
	for i := 0; i+1 < len(pairs); i += 2 {
		if pairs[i+1] == "" {
			v.Add(pairs[i], "is required")
		}
	}
}

// simulate runs one simulator request: decode it, check its fields, run the
// simulation and answer with the edge's answer.
func simulate[T any](w http.ResponseWriter, r *http.Request, check func(*T, *domain.Validation), send func(context.Context, *T) (simulatedAnswer, error)) {
	var req T
	if err := decodeJSON(r, &req); err != nil {
		writeError(w, r, err)
		return
	}
	var v domain.Validation
	check(&req, &v)
	if err := v.Err(); err != nil {
		writeError(w, r, err)
		return
	}
	answer, err := send(r.Context(), &req)
	if err != nil {
		writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, answer)
}

type payrollSimulation struct {
	EnrollmentID string `json:"enrollment_id"`
	ChurchID     string `json:"church_id"`
}

func (s *Server) simulatePayroll(w http.ResponseWriter, r *http.Request, claimed *app.Request) {
	simulate(w, r, func(req *payrollSimulation, v *domain.Validation) {
		required(v, "enrollment_id", req.EnrollmentID, "church_id", req.ChurchID)
	}, func(ctx context.Context, req *payrollSimulation) (simulatedAnswer, error) {
		a, err := s.app.Under(claimed).SimulatePayrollConnected(ctx, partnerID(r), req.EnrollmentID, req.ChurchID)
		return simulatedAnswer{StatusCode: a.StatusCode, Problem: a.Problem}, err
	})
}

type payrollEndSimulation struct {
	EnrollmentID string `json:"enrollment_id"`
	ChurchID     string `json:"church_id"`
	Reason       string `json:"reason"`
}

func (s *Server) simulatePayrollEnded(w http.ResponseWriter, r *http.Request, claimed *app.Request) {
	simulate(w, r, func(req *payrollEndSimulation, v *domain.Validation) {
		required(v, "enrollment_id", req.EnrollmentID, "church_id", req.ChurchID, "reason", req.Reason)
	}, func(ctx context.Context, req *payrollEndSimulation) (simulatedAnswer, error) {
		a, err := s.app.Under(claimed).SimulatePayrollEnded(ctx, partnerID(r), req.EnrollmentID, req.ChurchID, req.Reason)
		return simulatedAnswer{StatusCode: a.StatusCode, Problem: a.Problem}, err
	})
}

type depositSimulation struct {
	ChurchID   string          `json:"church_id"`
	AccountRef string          `json:"account_ref"`
	Amount     json.RawMessage `json:"amount"`
	Trace      string          `json:"trace"`
}

func (s *Server) simulateDeposit(w http.ResponseWriter, r *http.Request, claimed *app.Request) {
	simulate(w, r, func(req *depositSimulation, v *domain.Validation) {
		required(v, "church_id", req.ChurchID, "account_ref", req.AccountRef)
		if len(req.Amount) == 0 || string(req.Amount) == "null" {
			v.Add("amount", "is required")
		}
	}, func(ctx context.Context, req *depositSimulation) (simulatedAnswer, error) {
		res, err := s.app.Under(claimed).SimulateDeposit(ctx, partnerID(r), app.SimulatedDeposit(*req))
		return simulatedAnswer{StatusCode: res.StatusCode, Problem: res.Problem,
			Simulated: map[string]string{"event_type": "ach.credit.received", "trace": res.Trace, "bank_ts": res.BankTS}}, err
	})
}

type kycSimulation struct {
	ChurchID string `json:"church_id"`
	DonorID  string `json:"donor_id"`
	Outcome  string `json:"outcome"`
}

func (s *Server) simulateKYC(w http.ResponseWriter, r *http.Request, claimed *app.Request) {
	simulate(w, r, func(req *kycSimulation, v *domain.Validation) {
		required(v, "church_id", req.ChurchID, "donor_id", req.DonorID)
		if req.Outcome == "" {
			req.Outcome = domain.KYCPassed
		}
	}, func(ctx context.Context, req *kycSimulation) (simulatedAnswer, error) {
		a, err := s.app.Under(claimed).SimulateKYC(ctx, partnerID(r), req.ChurchID, req.DonorID, req.Outcome)
		return simulatedAnswer{StatusCode: a.StatusCode, Problem: a.Problem, Simulated: req.Outcome}, err
	})
}
