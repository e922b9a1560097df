package dispatcher

import (
	"path/filepath"
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

func TestEndpointTableFollowsTheProjections(t *testing.T) {
	tb := newEndpoints()
	store, err := projections.Open(filepath.Join(t.TempDir(), "projections.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	apply := func(recs ...eventlog.Record) {
		t.Helper()
		if err := store.Apply(recs); err != nil {
			t.Fatal(err)
		}
	}
	sync := func(want uint64) {
		t.Helper()
		if err := tb.sync(store); err != nil {
			t.Fatal(err)
		}
		if tb.seen != want {
			t.Fatalf("the table reflects sequence %d, want %d", tb.seen, want)
		}
	}
	created := &domain.WebhookEndpointCreated{URL: "https://example.com/h", EventTypes: []string{"deposit.received"}}
	apply(rec(t, 1, "pt_a", "we_old", created))
	sync(1)
	old, _, _, _ := tb.get("pt_a", "we_old")
	tb.keepSigner(old, domain.NewWebhookSigner("whsec_x"))

	apply(
		rec(t, 2, "pt_a", "we_new", created),
		rec(t, 3, "pt_b", "we_b", created),
		rec(t, 4, "pt_a", "we_old", &domain.WebhookEndpointPaused{}),
		rec(t, 5, "pt_b", "we_b", &domain.WebhookEndpointDeleted{}),
	)
	if s := ids(tb.ofPartner("pt_a")); len(s) != 1 {
		t.Fatalf("pt_a's endpoints %v before the table is brought up to date, want [we_old]", s)
	}
	sync(5)
	got := tb.ofPartner("pt_a")
	if s := ids(got); len(s) != 2 || s[0] != "we_old" || s[1] != "we_new" {
		t.Fatalf("pt_a's endpoints %v, want [we_old we_new] in creation order", s)
	}
	if got[0].Enabled() || !got[1].Enabled() || got[1].Seq != 2 || got[1].URL != "https://example.com/h" {
		t.Fatalf("pt_a's endpoints %+v: want we_old paused, we_new enabled at seq 2 with its URL", got)
	}
	if s := tb.ofPartner("pt_b"); len(s) != 0 {
		t.Fatalf("pt_b's deleted endpoint still listed: %v", ids(s))
	}
	if _, _, _, ok := tb.get("pt_b", "we_new"); ok {
		t.Fatal("an endpoint was found under another partner")
	}
	if _, _, signed, ok := tb.get("pt_a", "we_old"); !ok || !signed {
		t.Fatalf("we_old after a reload: ok %v, signer kept %v", ok, signed)
	}

	// An event about no endpoint moves the table on without changing it.
	apply(rec(t, 6, "pt_a", "pt_a", &domain.PartnerCreated{Name: "A"}))
	sync(6)
	if s := ids(tb.ofPartner("pt_a")); len(s) != 2 {
		t.Fatalf("pt_a's endpoints %v after an unrelated event", s)
	}

	// A change of the endpoint's keys drops its signer; a change of
	// anything else keeps it.
	apply(rec(t, 7, "pt_a", "we_old", &domain.WebhookEndpointUpdated{URL: "https://example.com/moved"}))
	sync(7)
	if ep, _, signed, _ := tb.get("pt_a", "we_old"); !signed || ep.URL != "https://example.com/moved" {
		t.Fatalf("we_old after a move: URL %s, signer kept %v", ep.URL, signed)
	}
	apply(rec(t, 8, "pt_a", "we_old", &domain.WebhookEndpointUpdated{Scheme: domain.SchemeEd25519, SigningKey: &domain.SealedSigningKey{Sealed: []byte("k"), PublicKey: "whpk_x"}}))
	sync(8)
	if _, _, signed, _ := tb.get("pt_a", "we_old"); signed {
		t.Fatal("we_old's signer was kept after its keys changed")
	}

	ep, _, _, _ := tb.get("pt_a", "we_new")
	tb.keepSigner(ep, domain.NewWebhookSigner("whsec_y"))
	apply(rec(t, 9, "pt_a", "we_new", &domain.WebhookEndpointDeleted{}))
	sync(9)
	if _, _, signed, ok := tb.get("pt_a", "we_new"); ok || signed {
		t.Fatalf("deleted we_new: found %v, signer kept %v", ok, signed)
	}
	tb.keepSigner(ep, domain.NewWebhookSigner("whsec_y"))
	if _, ok := tb.signers["we_new"]; ok {
		t.Fatal("a deleted endpoint's signer was kept")
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
