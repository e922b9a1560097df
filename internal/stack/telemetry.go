package stack

import (
	"context"

	"github.com/partnergiving/giving/domain"
	"github.com/partnergiving/giving/telemetry"
)

// state answers the metrics read at scrape time from the instance's parts.
type state struct{ s *Stack }

func (st state) LedgerLastSeq(ctx context.Context) (uint64, error) { return st.s.Ledger.LastSeq(ctx) }

func (st state) ProjectorApplied() uint64 { return st.s.Store.Applied() }

func (st state) WebhookBacklog(ctx context.Context) (telemetry.Backlog, error) {
	return st.s.Dispatcher.Backlog(ctx)
}

// WebhookEndpoints counts this instance's view of the endpoints by status:
// enabled or disabled (a deleted one is gone).
func (st state) WebhookEndpoints() (map[string]int, error) {
	endpoints, err := st.s.Store.AllWebhookEndpoints()
	if err != nil {
		return nil, err
	}
	out := map[string]int{domain.WebhookEndpointEnabled: 0, domain.WebhookEndpointDisabled: 0}
	for _, ep := range endpoints {
		out[ep.Status()]++
	}
	return out, nil
}
