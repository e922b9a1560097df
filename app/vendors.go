package app

import (
	"context"
	"fmt"

	"github.com/partnergiving/giving/domain"
	"github.com/partnergiving/giving/eventlog"
	"github.com/partnergiving/giving/telemetry"
)

// Vendor webhooks, once the edge has verified their signature and decoded
// them. A vendor event id seen before is acknowledged again without a second
// effect; an event is remembered only once fully handled, so a retry after a
// failure part-way runs again and the domain finishes what is missing.

// VendorEvent is one verified vendor webhook. Exactly one of Payroll,
// Bank and KYC is set, matching Kind.
type VendorEvent struct {
	Kind    string // payroll | bank | kyc
	ID      string // the vendor's event id
	Payroll *PayrollReport
	Bank    *BankCredit
	KYC     *KYCResult
}

// KYCResult is the identity verifier's decision about a donor.
type KYCResult struct {
	DonorID  string
	ChurchID string
	Outcome  string
}

// ReceiveVendorEvent handles a verified vendor webhook and reports whether
// it changed anything (false: a repeat, acknowledged without effect).
func (s *Service) ReceiveVendorEvent(ctx context.Context, ev VendorEvent) (changed bool, err error) {
	s = s.as("app.ReceiveVendorEvent")
	msgID := "vendor:" + ev.Kind + ":" + ev.ID
	if ev.Bank != nil {
		// A credit keeps no record of the vendor events handled: its
		// append's dedup id (the trace) and the projections already make
		// a repeat change nothing, and the record cost two writes a
		// credit.
		return s.bankCredit(ctx, msgID, *ev.Bank)
	}
	sctx, span := telemetry.Start(ctx, "vendor.seen")
	seen, err := s.vendorSet.Has(sctx, msgID)
	telemetry.End(span, err)
	if err != nil || seen {
		return false, err
	}
	switch {
	case ev.Payroll != nil:
		changed, err = s.payrollReported(ctx, msgID, *ev.Payroll)
	case ev.KYC != nil:
		changed, err = s.kycCompleted(ctx, msgID, *ev.KYC)
	default:
		var v domain.Validation
		v.Add("data", "must be an object")
		return false, v.Err()
	}
	if err != nil {
		return false, err
	}
	actx, span := telemetry.Start(ctx, "vendor.remember")
	err = s.vendorSet.Add(actx, msgID)
	telemetry.End(span, err)
	if err != nil {
		return false, err
	}
	return changed, nil
}

func unknownReference(format string, args ...any) error {
	return domain.ProblemUnknownReference.New(format, args...)
}

// churchOwner is the partner of a church named by a vendor.
func (s *Service) churchOwner(churchID string) (string, error) {
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
func (s *Service) runVendor(ctx context.Context, cmd eventlog.Command) (bool, error) {
	out, err := s.run(ctx, cmd)
	return err == nil && out.Record != nil && !out.Replayed, err
}

// bankCredit reconciles an ACH credit: it is credited to the church and its
// account once per trace and announced to the partner as deposit.received,
// in one append that carries the credit. What keeps a trace to one credit
// is a reservation keyed by the trace, not a turn on the partner's whole
// deposit book: the append's dedup id is the partner's trace
// (creditMsgID), so of every delivery of a trace, wherever and however
// many at once, the ledger stores one credit and answers the others with
// it (compared with theirs: another church, account or amount is a reused
// trace); a trace credited longer ago than the dedup window remembers, the
// projections hold (deposit). Credits of different traces neither wait for
// nor conflict with one another.
//
// A deposit an earlier build credited and never announced (it recorded the
// two apart, under the vendor event's ids ":0" and ":1", and could stop
// between them) is announced by a second command under ":1", as that build
// would have.
func (s *Service) bankCredit(ctx context.Context, msgID string, d BankCredit) (bool, error) {
	c, err := s.parseCredit(ctx, d)
	if err != nil {
		return false, err
	}
	reconcile := func(ctx context.Context, _ eventlog.History) (*domain.Event, error) {
		dep, err := s.deposit(ctx, c.PartnerID, c.Trace)
		if err != nil {
			return nil, err
		}
		return domain.ReconcileCredit(dep, c, s.Now())
	}
	unannounced := false
	out, err := s.runAnswered(ctx, eventlog.Command{
		Partner: c.PartnerID, Aggregate: domain.DepositBook, Unordered: true, MsgID: creditMsgID(c),
		Decide: func(ctx context.Context, h eventlog.History) (*domain.Event, error) {
			ev, err := reconcile(ctx, h)
			if unannounced = ev != nil && ev.Internal == nil; unannounced {
				return nil, nil
			}
			return ev, err
		},
	})
	if err == nil && out.Replayed {
		err = sameCredit(*out.Record, c)
	}
	if err != nil || !unannounced {
		return err == nil && out.Record != nil && !out.Replayed, err
	}
	return s.runVendor(ctx, eventlog.Command{
		Partner: c.PartnerID, Aggregate: domain.DepositBook, Unordered: true, MsgID: msgID + ":1", Decide: reconcile,
	})
}

// creditMsgID is the dedup id of a credit's append: one per trace of a
// partner.
func creditMsgID(c domain.Credit) string {
	return "credit:" + c.PartnerID + ":" + c.Trace
}

// sameCredit refuses a credit whose trace the ledger holds a credit of
// with another church, account or amount.
func sameCredit(stored eventlog.Record, c domain.Credit) error {
	ev, err := stored.Event()
	if err != nil {
		return err
	}
	credit, ok := ev.Internal.(*domain.DepositCredited)
	if !ok || ev.ChurchID != c.ChurchID || credit.AccountRef != c.AccountRef || credit.Amount != c.Amount {
		return domain.ErrTraceReused
	}
	return nil
}

// deposit is what is known of the partner's deposit with trace, from the
// projections once they hold every credit older than the ledger's dedup
// window (pastWindow): a newer one the credit's dedup id finds.
func (s *Service) deposit(ctx context.Context, partner, trace string) (domain.Deposit, error) {
	wctx, cancel := context.WithTimeout(ctx, readWait)
	defer cancel()
	if err := s.pastWindow(wctx); err != nil {
		return domain.Deposit{}, fmt.Errorf("deposit %s: %w", trace, err)
	}
	return s.store.Deposit(partner, trace)
}

// kycCompleted moves the donor's sessions waiting for identity
// verification on: passed to payroll, review to the in-review screen, failed
// to the declined screen.
func (s *Service) kycCompleted(ctx context.Context, msgID string, d KYCResult) (bool, error) {
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
	if err == nil && len(ids) == 0 {
		// The session may have been opened a moment ago, on this instance
		// or another, and not be applied here yet.
		if err = s.caughtUp(ctx); err == nil {
			ids, err = s.store.DonorSessions(partner, d.DonorID)
		}
	}
	if err != nil {
		return false, err
	}
	changed, waiting := false, false
	for _, id := range ids {
		did, err := s.runVendor(ctx, eventlog.Command{
			Partner: partner, Aggregate: id, MsgID: msgID + ":" + id,
			Decide: func(_ context.Context, h eventlog.History) (*domain.Event, error) {
				cur := domain.Fold[domain.Session](h.Events)
				if cur.ChurchID != d.ChurchID || (cur.Step(s.Now()) != domain.StepKYC && cur.KYC != d.Outcome) {
					return nil, nil
				}
				waiting = true
				return domain.DecideKYC(&cur, d.Outcome, "vendor", s.Now())
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
		return false, domain.ProblemConflict.New("No session of this donor is waiting for identity verification.")
	}
	return changed, nil
}
