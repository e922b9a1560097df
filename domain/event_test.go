package domain_test

import (
	"encoding/json"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/partnergiving/giving/domain"
)

var occurredAt = regexp.MustCompile(`"occurred_at":"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z"`)

func TestEnvelopeFormat(t *testing.T) {
	at := time.Date(2026, 11, 21, 10, 4, 5, 123_999_999, time.FixedZone("CET", 3600))
	ev := domain.NewEvent("pt_a", "en_1", "ch_1", at, &domain.EnrollmentActivated{EnrollmentID: "en_1"})
	data, err := ev.Envelope()
	if err != nil {
		t.Fatal(err)
	}
	want := `{"event_id":"` + ev.ID + `","event_type":"enrollment.activated","occurred_at":"2026-11-21T09:04:05.123Z","church_id":"ch_1","payload":{"enrollment_id":"en_1"}}`
	if string(data) != want {
		t.Fatalf("envelope\n got %s\nwant %s", data, want)
	}
	if !domain.ValidID(domain.PrefixEvent, ev.ID) {
		t.Fatalf("event id %q", ev.ID)
	}
	h, err := domain.ReadEnvelopeHeader(data)
	if err != nil || h != (domain.EnvelopeHeader{ID: ev.ID, Type: "enrollment.activated", OccurredAt: "2026-11-21T09:04:05.123Z"}) {
		t.Fatalf("header %+v, %v", h, err)
	}
	if _, err := domain.ReadEnvelopeHeader([]byte(`{"event_id":`)); err == nil {
		t.Fatal("a truncated envelope's header decoded")
	}
}

func TestEnvelopeOccurredAtAlwaysHasMilliseconds(t *testing.T) {
	for _, at := range []time.Time{
		time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC),
		time.Date(2026, 1, 1, 0, 0, 0, 100_000_000, time.UTC),
		time.Date(2026, 1, 1, 0, 0, 0, 999_999, time.UTC),
		time.Now(),
	} {
		ev := domain.NewEvent("pt_a", "dep_1", "ch_1", at, &domain.DepositReceived{DepositID: "dep_1", Amount: 1010, Currency: "USD"})
		data, err := ev.Envelope()
		if err != nil {
			t.Fatal(err)
		}
		if !occurredAt.Match(data) {
			t.Errorf("occurred_at of %v: %s", at, data)
		}
		if !strings.Contains(string(data), `"amount":10.10`) {
			t.Errorf("amount is not an exact decimal: %s", data)
		}
	}
	if got := domain.FormatTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)); got != "2026-01-01T00:00:00.000Z" {
		t.Fatalf("FormatTime = %s", got)
	}
}

func TestPublicEnvelopesAlwaysCarryChurchID(t *testing.T) {
	// A public event always has the church_id member, even if empty, so
	// partners can rely on the shape; internal ones carry null.
	pub := domain.NewEvent("pt_a", "en_1", "", time.Now(), &domain.EnrollmentActivated{EnrollmentID: "en_1"})
	data, err := pub.Envelope()
	if err != nil || !strings.Contains(string(data), `"church_id":""`) {
		t.Fatalf("public envelope %s, %v", data, err)
	}
	internal := domain.NewEvent("pt_a", "pt_a", "", time.Now(), &domain.KeyRevoked{KeyID: "key_1"})
	data, err = internal.Envelope()
	if err != nil || !strings.Contains(string(data), `"church_id":null`) {
		t.Fatalf("internal envelope %s, %v", data, err)
	}
}

func TestEnvelopeRoundTrip(t *testing.T) {
	ev := domain.NewEvent("pt_a", "en_1", "ch_1", time.Now(), &domain.EnrollmentCreated{
		EnrollmentID: "en_1", DonorSessionID: "ds_1", Status: domain.EnrollmentPending, Mode: domain.ModeFixed, Value: 2550,
	})
	data, err := ev.Envelope()
	if err != nil {
		t.Fatal(err)
	}
	back, err := domain.DecodeEnvelope("pt_a", "en_1", data)
	if err != nil {
		t.Fatal(err)
	}
	if back.ID != ev.ID || back.Type != ev.Type || !back.OccurredAt.Equal(ev.OccurredAt) || back.ChurchID != "ch_1" || back.PartnerID != "pt_a" || back.AggregateID != "en_1" {
		t.Fatalf("decoded %+v from %+v", back, ev)
	}
	if *back.Payload.(*domain.EnrollmentCreated) != *ev.Payload.(*domain.EnrollmentCreated) {
		t.Fatalf("payload %+v", back.Payload)
	}
	again, err := back.Envelope()
	if err != nil || string(again) != string(data) {
		t.Fatalf("re-encoded envelope differs:\n%s\n%s", again, data)
	}
}

func TestEnvelopeRefusals(t *testing.T) {
	bad := domain.Event{ID: "evt_x", Type: "nope.nope", OccurredAt: time.Now(), Payload: &domain.KeyRevoked{}}
	if _, err := bad.Envelope(); err == nil {
		t.Error("unknown type enveloped")
	}
	mismatch := domain.Event{ID: "evt_x", Type: "enrollment.activated", OccurredAt: time.Now(), Payload: &domain.KeyRevoked{}}
	if _, err := mismatch.Envelope(); err == nil {
		t.Error("mismatched payload enveloped")
	}
	for _, data := range []string{
		`not json`,
		`{"event_id":"evt_x","event_type":"nope.nope","occurred_at":"2026-01-01T00:00:00.000Z","church_id":null,"payload":{}}`,
		`{"event_id":"evt_x","event_type":"partner.key_revoked","occurred_at":"yesterday","church_id":null,"payload":{}}`,
		`{"event_id":"evt_x","event_type":"partner.key_revoked","occurred_at":"2026-01-01T00:00:00.000Z","church_id":null,"payload":[]}`,
	} {
		if _, err := domain.DecodeEnvelope("pt_a", "pt_a", []byte(data)); err == nil {
			t.Errorf("decoded %s", data)
		}
	}
}

func TestEventCatalogue(t *testing.T) {
	public := domain.PublicEventTypes()
	want := []string{"deposit.received", "enrollment.activated", "enrollment.created"}
	for _, w := range want {
		found := false
		for _, p := range public {
			found = found || p == w
		}
		if !found {
			t.Errorf("public event types %v lack %s", public, w)
		}
	}
	for _, internal := range []string{"partner.created", "partner.key_issued", "partner.key_revoked", "church.imported"} {
		spec, ok := domain.EventTypeSpec(internal)
		if !ok || spec.Public || spec.Summary == "" {
			t.Errorf("%s: %+v, %v; want a documented internal type", internal, spec, ok)
		}
	}
	for i := 1; i < len(public); i++ {
		if public[i-1] >= public[i] {
			t.Fatalf("public types not sorted: %v", public)
		}
	}
	// Payload structs are the allowlist: an enrollment payload has no room
	// for a phone number or an amount of pay.
	data, _ := json.Marshal(&domain.EnrollmentCreated{})
	for _, forbidden := range []string{"phone", "bank", "salary", "pay_amount"} {
		if strings.Contains(string(data), forbidden) {
			t.Errorf("enrollment.created payload has %s: %s", forbidden, data)
		}
	}
}

func TestIDs(t *testing.T) {
	id := domain.NewID(domain.PrefixChurch)
	if !domain.ValidID(domain.PrefixChurch, id) {
		t.Fatalf("%q not valid", id)
	}
	for _, bad := range []string{"", "ch_", id[:len(id)-1], "en_" + id[3:], id + "x", "ch_" + strings.Repeat("!", 27)} {
		if domain.ValidID(domain.PrefixChurch, bad) {
			t.Errorf("%q accepted", bad)
		}
	}
	if domain.NewID(domain.PrefixChurch) == id {
		t.Fatal("ids repeat")
	}
}

func TestEnvelopeEventID(t *testing.T) {
	ev := domain.NewEvent("pt_a", "dep_1", "ch_1", time.Now(), &domain.DepositReceived{DepositID: "dep_1", Amount: 1010, Currency: "USD"})
	data, err := ev.Envelope()
	if err != nil {
		t.Fatal(err)
	}
	// As Envelope writes it, and reordered (read by decoding the id).
	reordered := `{"event_type":"deposit.received","event_id":"` + ev.ID + `","payload":{}}`
	for _, in := range [][]byte{data, []byte(reordered), []byte(` {"event_id":"a\u0062c"}`)} {
		want := ev.ID
		if strings.Contains(string(in), `\u0062`) {
			want = "abc"
		}
		if got, err := domain.EnvelopeEventID(in); err != nil || got != want {
			t.Errorf("EnvelopeEventID(%s) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, bad := range []string{`{"event_id":"abc`, `{}`, `not json`} {
		if got, err := domain.EnvelopeEventID([]byte(bad)); err == nil {
			t.Errorf("EnvelopeEventID(%s) = %q, want an error", bad, got)
		}
	}
}

// DecodeStoredAs decodes in one pass what DecodeStored decodes in two: the
// same event from the same bytes, and the same refusal of bad ones.
func TestDecodeStoredAsMatchesDecodeStored(t *testing.T) {
	at := "2026-01-01T00:00:00.000Z"
	enrollment := domain.NewEvent("pt_a", "en_1", "ch_1", time.Now(), &domain.EnrollmentCreated{
		EnrollmentID: "en_1", DonorSessionID: "ds_1", Status: domain.EnrollmentPending, Mode: domain.ModeFixed, Value: 2550,
	})
	data, keyData := mustEnvelope(t, enrollment), keyRevokedEnvelope(t)
	for _, c := range []struct {
		name, typ, data string
		public          bool
	}{
		{"public", "enrollment.created", string(data), true},
		{"internal", "partner.key_revoked", string(keyData), false},
		{"retired internal type", "donor_session.locked", `{"event_id":"evt_2","event_type":"donor_session.locked","occurred_at":"` + at + `","church_id":"ch_1","payload":{}}`, false},
		{"the public type of that name", "donor_session.locked", `{"event_id":"evt_4","event_type":"donor_session.locked","occurred_at":"` + at + `","church_id":"ch_1","payload":{"donor_session_id":"ds_1"}}`, true},
		{"stored with another visibility", "enrollment.created", string(data), false},
		{"subject and envelope disagree", "partner.key_issued", string(keyData), false},
		{"no payload", "partner.key_revoked", `{"event_id":"evt_x","event_type":"partner.key_revoked","occurred_at":"` + at + `","church_id":null}`, false},
		{"no payload, its name in a string", "partner.key_revoked", `{"event_id":"evt_x","event_type":"partner.key_revoked","occurred_at":"` + at + `","church_id":"\"payload\":{}"}`, false},
		{"null payload", "partner.key_revoked", `{"event_id":"evt_x","event_type":"partner.key_revoked","occurred_at":"` + at + `","church_id":null,"payload":null}`, false},
		{"payload of another shape", "partner.key_revoked", `{"event_id":"evt_x","event_type":"partner.key_revoked","occurred_at":"` + at + `","church_id":null,"payload":[]}`, false},
		{"bad time", "partner.key_revoked", `{"event_id":"evt_x","event_type":"partner.key_revoked","occurred_at":"yesterday","church_id":null,"payload":{}}`, false},
		{"not json", "partner.key_revoked", `not json "payload":`, false},
		{"unknown type", "nope.nope", `{"event_id":"evt_x","event_type":"nope.nope","occurred_at":"` + at + `","church_id":null,"payload":{}}`, false},
	} {
		want, wantErr := domain.DecodeStored("pt_a", "ag_1", c.public, []byte(c.data))
		got, err := domain.DecodeStoredAs("pt_a", "ag_1", c.typ, c.public, []byte(c.data))
		if (err == nil) != (wantErr == nil) || (err != nil && err.Error() != wantErr.Error()) {
			t.Errorf("%s: error %v, DecodeStored's %v", c.name, err, wantErr)
			continue
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s: decoded %+v, DecodeStored %+v", c.name, got, want)
		}
	}
}

// DecodeStoredHeader reads what DecodeStoredAs reads, but the payload: from
// the envelope's start when it is laid out as Envelope writes it, else by
// decoding; and it refuses what does not match the subject.
func TestDecodeStoredHeaderIsDecodeStoredAsWithoutThePayload(t *testing.T) {
	at := "2026-01-01T00:00:00.000Z"
	deposit, err := domain.ReconcileCredit(domain.Deposit{}, domain.Credit{PartnerID: "pt_a", ChurchID: "ch_1", Trace: "T-1", AccountRef: "acct", Amount: 100, BankTS: time.Now()}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	data, keyData := mustEnvelope(t, *deposit), keyRevokedEnvelope(t)
	for _, c := range []struct {
		name, typ, data string
		public, ok      bool
	}{
		{"as Envelope writes it", "deposit.received", string(data), true, true},
		{"no church", "partner.key_revoked", string(keyData), false, true},
		{"fields in another order", "partner.key_revoked", `{"event_type":"partner.key_revoked","event_id":"evt_x","church_id":null,"occurred_at":"` + at + `","payload":{"key_id":"k"}}`, false, true},
		{"an escaped church", "deposit.received", `{"event_id":"evt_x","event_type":"deposit.received","occurred_at":"` + at + `","church_id":"ch_\u0031","payload":{}}`, true, true},
		{"stored with another visibility", "deposit.received", string(data), false, false},
		{"subject and envelope disagree", "partner.key_issued", string(keyData), false, false},
		{"bad time", "partner.key_revoked", `{"event_id":"evt_x","event_type":"partner.key_revoked","occurred_at":"yesterday","church_id":null,"payload":{}}`, false, false},
		{"not json", "partner.key_revoked", `{"event_id":"evt_x","event_type":"partner.key_revoked"`, false, false},
		{"unknown type", "nope.nope", `{"event_id":"evt_x","event_type":"nope.nope","occurred_at":"` + at + `","church_id":null,"payload":{}}`, false, false},
	} {
		got, err := domain.DecodeStoredHeader("pt_a", "ag_1", c.typ, c.public, []byte(c.data))
		if (err == nil) != c.ok {
			t.Errorf("%s: error %v, want ok %v", c.name, err, c.ok)
			continue
		}
		if !c.ok {
			continue
		}
		want, err := domain.DecodeStoredAs("pt_a", "ag_1", c.typ, c.public, []byte(c.data))
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		want.Payload = nil
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s: decoded %+v, want %+v", c.name, got, want)
		}
	}
}

func mustEnvelope(t *testing.T, ev domain.Event) []byte {
	t.Helper()
	data, err := ev.Envelope()
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// keyRevokedEnvelope is an internal event's envelope, without a church.
func keyRevokedEnvelope(t *testing.T) []byte {
	return mustEnvelope(t, domain.NewEvent("pt_a", "pt_a", "", time.Now(), &domain.KeyRevoked{KeyID: "key_1"}))
}
