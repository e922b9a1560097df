package httpapi

import (
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/partnergiving/giving/app"
	"github.com/partnergiving/giving/domain"
	"github.com/partnergiving/giving/vendors/truv"
)

// parseTruv reads the payroll vendor's webhook at /edge/payroll: Truv's
// X-Webhook-Sign over the raw body (401 when it does not verify, as
// Truv's own example answers), then the body reduced to the switch's
// outcome. tracking_info carries the enrollment the switch creates.
// Authentic webhooks the service does not act on (other products, tasks
// still in progress) are acknowledged.
func parseTruv(s *Server, r *http.Request, body []byte) (app.VendorEvent, error) {
	v := truv.Verifier{Secrets: []string{string(s.cfg.Vendors.Payroll)}}
	if err := v.Verify(r.Header, body); err != nil {
		return app.VendorEvent{}, refuseSignature(http.StatusUnauthorized, err)
	}
	e, err := truv.ParseEvent(body)
	switch {
	case errors.Is(err, truv.ErrIgnored):
		return app.VendorEvent{}, errVendorIgnored
	case err != nil:
		return app.VendorEvent{}, domain.ProblemMalformedJSON.New("The body is not a Truv webhook: %v.", err)
	}
	if age := time.Since(e.OccurredAt); age > truvMaxAge {
		return app.VendorEvent{}, refuseSignature(http.StatusUnauthorized, fmt.Errorf("a replay? event_created_at is %s old", age.Round(time.Minute)))
	}
	outcome, ok := truvOutcomes[e.Type]
	if !ok || e.Reference == "" {
		// No switch of the service's (each carries its enrollment as
		// tracking_info): another product of the same Truv account.
		return app.VendorEvent{}, errVendorIgnored
	}
	return app.VendorEvent{ID: e.ID, Payroll: &app.PayrollReport{EnrollmentID: e.Reference, Outcome: outcome, Reason: e.Reason}}, nil
}

// truvMaxAge refuses a signed Truv webhook whose event_created_at is older:
// Truv signs no timestamp, so a captured webhook could be replayed once the
// vendor event ids it carries are forgotten (after 30 days). A week is well
// past any retry of Truv's.
const truvMaxAge = 7 * 24 * time.Hour

// truvOutcomes maps Truv's outcomes onto the service's.
var truvOutcomes = map[truv.EventType]app.PayrollOutcome{
	truv.SwitchSubmitted: app.SwitchSubmitted,
	truv.SwitchConfirmed: app.SwitchConfirmed,
	truv.SwitchFailed:    app.SwitchFailed,
	truv.SwitchReverted:  app.SwitchReverted,
}
