package simulators

import (
	"context"
	"fmt"

	"github.com/partnergiving/giving/vendors/truv"
)

// The payroll vendor's webhooks, as Truv sends them: the switch's task
// and link events, whose tracking_info is the enrollment the switch
// created, signed with the sandbox's Truv secret.

// PayrollConnected sends Truv's word that the payroll provider confirmed
// the donor's switch: task-status-updated with status done.
func (s *Simulator) PayrollConnected(ctx context.Context, enrollmentID string) (Answer, error) {
	return s.truv(ctx, truv.Event{Type: truv.SwitchConfirmed, Reference: enrollmentID, TaskID: truv.NewID()})
}

// PayrollReverted sends Truv's word that the connection behind the switch
// is gone: link-deleted.
func (s *Simulator) PayrollReverted(ctx context.Context, enrollmentID string) (Answer, error) {
	return s.truv(ctx, truv.Event{Type: truv.SwitchReverted, Reference: enrollmentID})
}

// truv builds, signs and sends one Truv webhook.
func (s *Simulator) truv(ctx context.Context, e truv.Event) (Answer, error) {
	e.UserID, e.LinkID = truv.NewID(), truv.NewID()
	body, err := truv.BuildEvent(e)
	if err != nil {
		return Answer{}, fmt.Errorf("simulate payroll: %w", err)
	}
	return s.post(ctx, "payroll", body, truv.Sign(string(s.secrets.Payroll), body))
}
