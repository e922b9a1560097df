package app

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/partnergiving/giving/domain"
	"github.com/partnergiving/giving/simulators"
)

// The sandbox simulators. Each builds the vendor's webhook, signs it with
// the sandbox vendor secret and sends it over HTTP to the service's own
// edge; the answer is whatever the edge said, rejections included, with the
// edge's problem body when it refused. A church
// that is not the caller's is not found, and nothing is sent.

// ErrEdgeUnreachable means a simulator could not reach the service's own
// public edge (a wrong --public-url).
var ErrEdgeUnreachable = domain.ProblemEdgeUnreachable.New("The simulator could not reach the service's public webhook edge. Check the service's public URL (--public-url).")

// ErrNoSimulators means the stack has no simulators (production).
var ErrNoSimulators = errors.New("this stack has no sandbox simulators")

// HasSimulators reports whether the stack runs the sandbox simulators.
func (s *Service) HasSimulators() bool {
	return s.cfg.Env == domain.Sandbox && s.simulator != nil
}

func (s *Service) simulate(ctx context.Context, partner, churchID string) error {
	if !s.HasSimulators() {
		return ErrNoSimulators
	}
	_, ok, err := s.writtenChurch(ctx, partner, churchID)
	if err == nil && !ok {
		err = domain.NotFound("church", churchID)
	}
	return err
}

func (s *Service) unreachable(err error) error {
	s.log.Warn().Err(err).Msg("simulator could not reach the edge")
	return ErrEdgeUnreachable
}

// simulateAnswer runs a simulator whose answer is the edge's: its status
// code and, for a refusal, its problem body.
func (s *Service) simulateAnswer(ctx context.Context, partner, churchID string, send func(*simulators.Simulator) (simulators.Answer, error)) (simulators.Answer, error) {
	if err := s.simulate(ctx, partner, churchID); err != nil {
		return simulators.Answer{}, err
	}
	answer, err := send(s.simulator)
	if err != nil {
		return answer, s.unreachable(err)
	}
	return answer, edgeFailed(answer)
}

// edgeFailed refuses an edge answer of 5xx as the simulation's answer: the
// edge is this service, and its failure leaves the webhook's outcome
// unknown. The simulation is then a 503 to retry with its key, and the
// retry sends the same webhook again (a deposit's, at least, is derived from
// the key), instead of a 200 recording "status_code: 503" for good.
func edgeFailed(a simulators.Answer) error {
	if a.StatusCode >= 500 {
		return fmt.Errorf("%w: the edge answered %d", domain.ErrUnavailable, a.StatusCode)
	}
	return nil
}

// SimulatePayrollConnected sends the payroll vendor's confirmation of a
// donor's switch (enrollment.activated) and returns the edge's answer.
func (s *Service) SimulatePayrollConnected(ctx context.Context, partner, enrollmentID, churchID string) (simulators.Answer, error) {
	return s.simulatePayroll(ctx, partner, enrollmentID, churchID, (*simulators.Simulator).PayrollConnected)
}

// SimulatePayrollEnded sends the payroll vendor's word that the donor's
// switch was undone (enrollment.ended, deposit_switch_reverted) and
// returns the edge's answer. Truv, the payroll vendor, reports no end of
// employment, so left_employer has no webhook to simulate.
func (s *Service) SimulatePayrollEnded(ctx context.Context, partner, enrollmentID, churchID, reason string) (simulators.Answer, error) {
	if err := s.simulate(ctx, partner, churchID); err != nil {
		return simulators.Answer{}, err
	}
	if reason != domain.EndSwitchReverted {
		var v domain.Validation
		v.Add("reason", "must be %s: the payroll vendor reports no end of employment", domain.EndSwitchReverted)
		return simulators.Answer{}, v.Err()
	}
	return s.simulatePayroll(ctx, partner, enrollmentID, churchID, (*simulators.Simulator).PayrollReverted)
}

// simulatePayroll sends a payroll vendor webhook about the switch that
// names enrollmentID. The webhook names the enrollment alone, so the
// simulator first refuses one that is another church's or another
// partner's switch (422, as the edge would for a reference it does not
// know); an id no switch names goes to the edge, which refuses it.
func (s *Service) simulatePayroll(ctx context.Context, partner, enrollmentID, churchID string, send func(*simulators.Simulator, context.Context, string) (simulators.Answer, error)) (simulators.Answer, error) {
	if err := s.simulate(ctx, partner, churchID); err != nil {
		return simulators.Answer{}, err
	}
	sess, ok, err := s.store.SessionBySwitch(enrollmentID)
	if err != nil {
		return simulators.Answer{}, err
	}
	if ok && (sess.PartnerID != partner || sess.ChurchID != churchID) {
		return simulators.Answer{}, unknownReference("enrollment_id %q is not an enrollment of this church.", enrollmentID)
	}
	return s.simulateAnswer(ctx, partner, churchID, func(sim *simulators.Simulator) (simulators.Answer, error) {
		return send(sim, ctx, enrollmentID)
	})
}

// SimulatedDeposit is a bank credit to simulate; Amount is passed to the
// bank webhook as given, so the edge's own checks decide.
type SimulatedDeposit struct {
	ChurchID   string
	AccountRef string
	Amount     json.RawMessage
	Trace      string
}

// SimulateDeposit sends the bank's ACH credit notification. Under an
// Idempotency-Key the trace (unless given) and the bank's event id derive
// from the key, and a trace the ledger already holds keeps the bank
// timestamp it was credited with: a retry after a lost answer sends the same
// webhook, which the edge credits once, and answers what the first run did.
func (s *Service) SimulateDeposit(ctx context.Context, partner string, d SimulatedDeposit) (simulators.DepositResult, error) {
	if err := s.simulate(ctx, partner, d.ChurchID); err != nil {
		return simulators.DepositResult{}, err
	}
	if err := checkSimulatedDeposit(d); err != nil {
		return simulators.DepositResult{}, err
	}
	sim := simulators.Deposit{ChurchID: d.ChurchID, AccountRef: d.AccountRef, Amount: d.Amount, Trace: d.Trace, Request: s.requestName()}
	if sim.Trace == "" && sim.Request != "" {
		sim.Trace = simulators.DerivedTrace(sim.Request)
	}
	if sim.Trace != "" {
		ts, err := s.creditedAt(ctx, partner, sim.Trace)
		if err != nil {
			return simulators.DepositResult{}, err
		}
		sim.BankTS = ts
		if ts != "" && d.Trace == "" {
			// The key's own deposit is credited already: this is a retry
			// whose first answer (and key record) was lost.
			s.req.markReplayed()
		}
	}
	res, err := s.simulator.Deposit(ctx, sim)
	if err != nil {
		return res, s.unreachable(err)
	}
	return res, edgeFailed(res.Answer)
}

// creditedAt is the bank timestamp the partner's deposit with trace was
// credited with, or "" when it was not credited.
func (s *Service) creditedAt(ctx context.Context, partner, trace string) (string, error) {
	// A credit answers before its event is applied: one this instance
	// made a moment ago is read once the projections hold it.
	if err := s.SeeWrites(ctx); err != nil {
		return "", err
	}
	dep, err := s.deposit(ctx, partner, trace)
	if err != nil || !dep.Credited {
		return "", err
	}
	return dep.BankTS, nil
}

// SimulateKYC sends the identity vendor's decision about a donor (passed,
// review or failed), as the vendor's own webhook. The edge refuses it (409)
// unless one of the donor's sessions is waiting for identity verification.
func (s *Service) SimulateKYC(ctx context.Context, partner, churchID, donorID, outcome string) (simulators.Answer, error) {
	switch outcome {
	case domain.KYCPassed, domain.KYCReview, domain.KYCFailed:
	default:
		var v domain.Validation
		v.Add("outcome", "must be passed, review or failed")
		return simulators.Answer{}, v.Err()
	}
	return s.simulateAnswer(ctx, partner, churchID, func(sim *simulators.Simulator) (simulators.Answer, error) {
		return sim.KYC(ctx, churchID, donorID, outcome)
	})
}
