package domain_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/partnergiving/giving/domain"
)

func TestReconcileCredit(t *testing.T) {
	now := time.Date(2026, 11, 24, 1, 2, 3, 0, time.UTC)
	c := domain.Credit{PartnerID: "pt_a", ChurchID: "ch_1", Trace: "TRC-1", AccountRef: "acct_9", Amount: 1250, BankTS: now}

	// A new credit: one public deposit.received on the partner's book,
	// carrying the credit; its envelope never names the account.
	ev, err := domain.ReconcileCredit(domain.Deposit{}, c, now)
	if err != nil || ev == nil {
		t.Fatalf("a new credit: %v, %v", ev, err)
	}
	received, ok := ev.Payload.(*domain.DepositReceived)
	credit, carried := ev.Internal.(*domain.DepositCredited)
	if ev.Type != "deposit.received" || ev.AggregateID != domain.DepositBook || ev.ChurchID != "ch_1" || !ok || !carried ||
		received.DepositID != domain.DepositIDForTrace("TRC-1") || received.Amount != 1250 || credit.AccountRef != "acct_9" || credit.Amount != 1250 || credit.Trace != "TRC-1" {
		t.Fatalf("a new credit decided %+v (payload %+v, internal %+v)", ev, ev.Payload, ev.Internal)
	}
	env, err := ev.Envelope()
	if err != nil || bytes.Contains(env, []byte("acct_9")) {
		t.Fatalf("envelope %s (%v) must not name the account", env, err)
	}
	internal, err := ev.InternalData()
	if err != nil || !bytes.Contains(internal, []byte(`"account_ref":"acct_9"`)) {
		t.Fatalf("internal data %s, %v", internal, err)
	}
	decoded, err := domain.DecodeStoredAs("pt_a", domain.DepositBook, "deposit.received", true, env)
	if err == nil {
		err = domain.DecodeInternal(&decoded, internal)
	}
	if err != nil || !reflect.DeepEqual(decoded.Internal, ev.Internal) || !reflect.DeepEqual(decoded.Payload, ev.Payload) {
		t.Fatalf("stored and decoded: %+v, %v", decoded, err)
	}
	inner, ok := decoded.InternalFact()
	if !ok || inner.Type != "deposit.credited" || inner.ID != ev.ID || inner.Internal != nil || inner.Payload != decoded.Internal {
		t.Fatalf("the carried fact %+v", inner)
	}

	known := domain.Deposit{ChurchID: "ch_1", AccountRef: "acct_9", Amount: 1250, BankTS: domain.FormatTime(now), Credited: true, Announced: true}
	if ev, err := domain.ReconcileCredit(known, c, now); ev != nil || err != nil {
		t.Fatalf("the same credit again: %+v, %v; want nothing", ev, err)
	}
	for _, other := range []domain.Credit{
		{PartnerID: "pt_a", ChurchID: "ch_2", Trace: "TRC-1", AccountRef: "acct_9", Amount: 1250, BankTS: now},
		{PartnerID: "pt_a", ChurchID: "ch_1", Trace: "TRC-1", AccountRef: "acct_8", Amount: 1250, BankTS: now},
		{PartnerID: "pt_a", ChurchID: "ch_1", Trace: "TRC-1", AccountRef: "acct_9", Amount: 1251, BankTS: now},
	} {
		if _, err := domain.ReconcileCredit(known, other, now); !errors.Is(err, domain.ErrTraceReused) {
			t.Fatalf("trace reused with %+v: %v", other, err)
		}
	}

	// Credited by an earlier build and never announced: announced, with
	// the credit's own amount and bank time, carrying nothing.
	half := known
	half.Announced, half.BankTS = false, "2026-11-20T00:00:00.000Z"
	ev, err = domain.ReconcileCredit(half, c, now)
	if err != nil || ev == nil || ev.Internal != nil || ev.Payload.(*domain.DepositReceived).BankTS != half.BankTS {
		t.Fatalf("an unannounced credit: %+v, %v", ev, err)
	}

	bad := c
	bad.Amount = 0
	if _, err := domain.ReconcileCredit(domain.Deposit{}, bad, now); err == nil {
		t.Fatal("a credit of 0 was decided")
	}
}

func TestOnlyDeclaredTypesCarryAnInternalFact(t *testing.T) {
	ev := domain.NewEvent("pt_a", "en_1", "ch_1", time.Now(), &domain.EnrollmentActivated{EnrollmentID: "en_1"})
	ev.Internal = &domain.DepositCredited{Trace: "x"}
	if _, err := ev.InternalData(); err == nil {
		t.Fatal("enrollment.activated carried a deposit.credited")
	}
	if err := domain.DecodeInternal(&ev, []byte(`{"trace":"x"}`)); err == nil {
		t.Fatal("an internal fact decoded onto enrollment.activated")
	}
	dep := domain.NewEvent("pt_a", domain.DepositBook, "ch_1", time.Now(), &domain.DepositReceived{DepositID: "dep_x"})
	dep.Internal = &domain.EnrollmentActivated{EnrollmentID: "en_1"}
	if _, err := dep.InternalData(); err == nil {
		t.Fatal("deposit.received carried an enrollment.activated")
	}
}

// A deposit.credited fact reads as encoding/json reads it, whether its
// bytes are laid out as the service writes them (read without a decoder)
// or not: the same value, or an error for both.
func FuzzDepositCreditedDecodesAsEncodingJSON(f *testing.F) {
	for _, seed := range []string{
		`{"trace":"TRC-1","account_ref":"acct_9","amount":12.50,"currency":"USD","bank_ts":"2026-11-24T01:02:03.000Z"}`,
		`{"trace":"","account_ref":"","amount":0,"currency":"","bank_ts":""}`,
		`{"trace":"T","account_ref":"a","amount":-3,"currency":"USD","bank_ts":"x"}`,
		`{"trace":"T","account_ref":"a","amount":12.345,"currency":"USD","bank_ts":"x"}`,
		`{"trace":"T","account_ref":"a","amount":12.340,"currency":"USD","bank_ts":"x"}`,
		`{"trace":"T","account_ref":"a","amount":01,"currency":"USD","bank_ts":"x"}`,
		`{"trace":"T","account_ref":"a","amount":1e2,"currency":"USD","bank_ts":"x"}`,
		`{"trace":"T","account_ref":"a","amount":"12","currency":"USD","bank_ts":"x"}`,
		`{"trace":"T","account_ref":"a","amount":null,"currency":"USD","bank_ts":"x"}`,
		`{"trace":"T","account_ref":"a","amount":1 ,"currency":"USD","bank_ts":"x"}`,
		`{"trace":"T\u0031","account_ref":"a\"b","amount":1,"currency":"USD","bank_ts":"x"}`,
		"{\"trace\":\"T\x01\",\"account_ref\":\"a\",\"amount\":1,\"currency\":\"USD\",\"bank_ts\":\"x\"}",
		"{\"trace\":\"T\xff\",\"account_ref\":\"a\",\"amount\":1,\"currency\":\"USD\",\"bank_ts\":\"x\"}",
		`{"trace":"Tré","account_ref":"a","amount":1,"currency":"USD","bank_ts":"x"}`,
		`{"account_ref":"a","trace":"T","amount":1,"currency":"USD","bank_ts":"x"}`,
		`{"trace":"T","account_ref":"a","amount":1,"currency":"USD","bank_ts":"x","trace":"U"}`,
		`{"trace":"T","account_ref":"a","amount":1,"currency":"USD","bank_ts":"x"} `,
		`{"trace":"T","account_ref":"a","amount":1,"currency":"USD","bank_ts":"x"}}`,
		`{"trace":"T","account_ref":"a","amount":1,"currency":"USD"}`,
		`{"TRACE":"T","account_ref":"a","amount":1,"currency":"USD","bank_ts":"x"}`,
		`{"trace":"T","account_ref":"a","amount":99999999999999999999,"currency":"USD","bank_ts":"x"}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var want domain.DepositCredited
		wantErr := json.Unmarshal(data, &want)
		ev := domain.NewEvent("pt_a", domain.DepositBook, "ch_1", time.Now(), &domain.DepositReceived{DepositID: "dep_x"})
		err := domain.DecodeInternal(&ev, data)
		if (err != nil) != (wantErr != nil) {
			t.Fatalf("%q: error %v, encoding/json's %v", data, err, wantErr)
		}
		if err == nil && !reflect.DeepEqual(ev.Internal, &want) {
			t.Fatalf("%q: read %+v, encoding/json %+v", data, ev.Internal, want)
		}
	})
}
