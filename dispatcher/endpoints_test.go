package dispatcher

import (
	"context"
	"testing"
	"time"

	"github.com/partnergiving/giving/domain"
	"github.com/partnergiving/giving/eventlog"
	"github.com/partnergiving/giving/projections"
)

// rec makes the ledger record of an event at seq, as the ledger hands it
// out.
func rec(t *testing.T, seq uint64, partner, aggregate string, p domain.Payload) eventlog.Record {
	t.Helper()
	ev := domain.NewEvent(partner, aggregate, "", time.Now(), p)
	data, err := ev.Envelope()
	if err != nil {
		t.Fatal(err)
	}
	spec, _ := domain.EventTypeSpec(ev.Type)
	return eventlog.Record{Seq: seq, Partner: partner, Aggregate: aggregate, Type: ev.Type, Public: spec.Public, Data: data}
}

func ids(eps []projections.WebhookEndpoint) []string {
	var out []string
	for _, ep := range eps {
		out = append(out, ep.ID)
	}
	return out
}

func TestEndpointTableFollowsTheLedger(t *testing.T) {
	tb := newEndpoints()
	loaded := projections.WebhookEndpoint{Seq: 3}
	loaded.ID, loaded.PartnerID, loaded.EventTypes = "we_old", "pt_a", []string{"*"}
	tb.load([]projections.WebhookEndpoint{loaded}, 5)

	// The fan-out waits until the table has followed past its batch.
	waited := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		waited <- tb.waitFor(ctx, 9)
	}()
	select {
	case err := <-waited:
		t.Fatalf("waitFor(9) returned %v at sequence 5", err)
	case <-time.After(20 * time.Millisecond):
	}
	created := &domain.WebhookEndpointCreated{URL: "https://example.com/h", EventTypes: []string{"deposit.received"}}
	err := tb.fold([]eventlog.Record{
		rec(t, 4, "pt_a", "we_stale", created), // already reflected: skipped
		rec(t, 6, "pt_a", "we_new", created),
		rec(t, 7, "pt_b", "we_b", created),
		rec(t, 8, "pt_a", "we_old", &domain.WebhookEndpointPaused{}),
		rec(t, 9, "pt_b", "we_b", &domain.WebhookEndpointDeleted{}),
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := <-waited; err != nil {
		t.Fatalf("waitFor(9) after the fold: %v", err)
	}
	got := tb.ofPartner("pt_a")
	if s := ids(got); len(s) != 2 || s[0] != "we_old" || s[1] != "we_new" {
		t.Fatalf("pt_a's endpoints %v, want [we_old we_new] in creation order", s)
	}
	if got[0].Enabled() || !got[1].Enabled() || got[1].Seq != 6 || got[1].URL != "https://example.com/h" {
		t.Fatalf("pt_a's endpoints %+v: want we_old paused, we_new enabled at seq 6 with its URL", got)
	}
	if s := tb.ofPartner("pt_b"); len(s) != 0 {
		t.Fatalf("pt_b's deleted endpoint still listed: %v", ids(s))
	}
	if _, _, _, ok := tb.get("pt_b", "we_new"); ok {
		t.Fatal("an endpoint was found under another partner")
	}
	tb.keepSigner("we_new", domain.NewWebhookSigner("whsec_x"))
	if _, _, signed, ok := tb.get("pt_a", "we_new"); !ok || !signed {
		t.Fatalf("we_new: ok %v, signer kept %v", ok, signed)
	}
	if err := tb.fold([]eventlog.Record{rec(t, 10, "pt_a", "we_new", &domain.WebhookEndpointDeleted{})}); err != nil {
		t.Fatal(err)
	}
	tb.keepSigner("we_new", domain.NewWebhookSigner("whsec_x"))
	if _, _, signed, ok := tb.get("pt_a", "we_new"); ok || signed {
		t.Fatalf("deleted we_new: found %v, signer kept %v", ok, signed)
	}
}

func TestLastSuccessEndsARunOfFailures(t *testing.T) {
	tb := newEndpoints()
	if !tb.lastSuccess("we_1").IsZero() {
		t.Fatal("a success before any attempt")
	}
	at := time.Now()
	tb.succeeded("we_1", at)
	tb.succeeded("we_1", at.Add(-time.Second)) // an older one arriving late changes nothing
	if got := tb.lastSuccess("we_1"); !got.Equal(at) {
		t.Fatalf("last success %v, want %v", got, at)
	}
}
