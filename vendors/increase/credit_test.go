package increase_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/partnergiving/giving/vendors/increase"
	"github.com/partnergiving/giving/vendors/increase/increasefake"
)

func TestParseCents(t *testing.T) {
	tests := []struct {
		in   string
		want int64
		err  error
	}{
		{"1", 1, nil},
		{"100", 100, nil},
		{"2500075", 2500075, nil},
		// Above 2^53 a float64 would round it; read from the text, it is exact.
		{"9007199254740993", 9007199254740993, nil},
		{"9223372036854775807", 9223372036854775807, nil},
		{"9223372036854775808", 0, increase.ErrMalformedAmount},
		{"0", 0, increase.ErrAmountNotPositive},
		{"-0", 0, increase.ErrAmountNotPositive},
		{"-100", 0, increase.ErrAmountNotPositive},
		{"100.5", 0, increase.ErrFractionalAmount},
		{"100.00", 0, increase.ErrFractionalAmount},
		{"0.01", 0, increase.ErrFractionalAmount},
		{"1e2", 0, increase.ErrMalformedAmount},
		{"1E2", 0, increase.ErrMalformedAmount},
		{"+100", 0, increase.ErrMalformedAmount},
		{"0100", 0, increase.ErrMalformedAmount},
		{"", 0, increase.ErrMalformedAmount},
		{"ten", 0, increase.ErrMalformedAmount},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := increase.ParseCents(json.Number(tt.in))
			if !errors.Is(err, tt.err) || got != tt.want {
				t.Fatalf("ParseCents(%q) = %d, %v; want %d, %v", tt.in, got, err, tt.want, tt.err)
			}
			if tt.err != nil && !errors.Is(err, increase.ErrInvalidCredit) {
				t.Fatalf("%v is not an ErrInvalidCredit", err)
			}
			if tt.err != nil && len(tt.in) > 1 && strings.Contains(err.Error(), tt.in) {
				t.Fatalf("%q repeats the amount, which would reach the logs", err)
			}
		})
	}
}

// documentedTransfer is the API reference's example Inbound ACH Transfer.
func documentedTransfer(t *testing.T) increase.InboundACHTransfer {
	t.Helper()
	var tr increase.InboundACHTransfer
	if err := json.Unmarshal(increasefake.ExampleInboundACHTransfer(), &tr); err != nil {
		t.Fatal(err)
	}
	return tr
}

func TestNormaliseDocumentedExample(t *testing.T) {
	got, err := increase.Normalise("event_001dzz0r20rzr4zrhrr1364hy80", documentedTransfer(t))
	if err != nil {
		t.Fatal(err)
	}
	at := time.Date(2020, 1, 31, 23, 59, 59, 0, time.UTC)
	want := increase.Credit{
		EventID:                 "event_001dzz0r20rzr4zrhrr1364hy80",
		TransferID:              "inbound_ach_transfer_tdrwqr3fq9gnnq49odev",
		TransactionID:           "transaction_uyrp7fld2ium70oa7oi",
		Trace:                   "021000038461022",
		AmountCents:             100,
		Currency:                "USD",
		AccountID:               "account_in71c4amph0vgo2qllky",
		AccountNumberID:         "account_number_v18nkfqm6afpsrvy82b2",
		OriginatorRoutingNumber: "101050001",
		OriginatorName:          "PAYROLL COMPANY",
		OriginatorCompanyID:     "0987654321",
		EntryDescription:        "INVOICE 2468",
		EffectiveDate:           "2023-04-02",
		ReceivedAt:              at,
		AcceptedAt:              at,
	}
	if got != want {
		t.Fatalf("Normalise =\n%+v\nwant\n%+v", got, want)
	}
}

func TestNormaliseRefuses(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(tr *increase.InboundACHTransfer)
		want   error
		kind   error
	}{
		{"debit", func(tr *increase.InboundACHTransfer) { tr.Direction = "debit" }, increase.ErrNotCredit, increase.ErrIgnored},
		{"pending", func(tr *increase.InboundACHTransfer) { tr.Status = "pending"; tr.Acceptance = nil }, increase.ErrNotAccepted, increase.ErrIgnored},
		{"declined", func(tr *increase.InboundACHTransfer) { tr.Status = "declined"; tr.Acceptance = nil }, increase.ErrNotAccepted, increase.ErrIgnored},
		{"returned after acceptance", func(tr *increase.InboundACHTransfer) { tr.Status = "returned" }, increase.ErrNotAccepted, increase.ErrIgnored},
		{"fractional cents", func(tr *increase.InboundACHTransfer) { tr.Amount = "100.5" }, increase.ErrFractionalAmount, increase.ErrInvalidCredit},
		{"negative", func(tr *increase.InboundACHTransfer) { tr.Amount = "-100" }, increase.ErrAmountNotPositive, increase.ErrInvalidCredit},
		{"zero, a prenote", func(tr *increase.InboundACHTransfer) { tr.Amount = "0" }, increase.ErrAmountNotPositive, increase.ErrInvalidCredit},
		{"no amount", func(tr *increase.InboundACHTransfer) { tr.Amount = "" }, increase.ErrMalformedAmount, increase.ErrInvalidCredit},
		{"international to a euro account", func(tr *increase.InboundACHTransfer) {
			tr.StandardEntryClassCode = "international_ach_transaction"
			tr.InternationalAddenda = &increase.InternationalAddenda{DestinationCurrencyCode: "EUR", OriginatingCurrencyCode: "USD"}
		}, increase.ErrCurrency, increase.ErrInvalidCredit},
		{"no trace", func(tr *increase.InboundACHTransfer) { tr.TraceNumber = "" }, increase.ErrMalformedTransfer, increase.ErrInvalidCredit},
		{"trace with a space", func(tr *increase.InboundACHTransfer) { tr.TraceNumber = "0210000 3846102" }, increase.ErrMalformedTransfer, increase.ErrInvalidCredit},
		{"accepted without acceptance", func(tr *increase.InboundACHTransfer) { tr.Acceptance = nil }, increase.ErrMalformedTransfer, increase.ErrInvalidCredit},
		{"no account number", func(tr *increase.InboundACHTransfer) { tr.AccountNumberID = "" }, increase.ErrMalformedTransfer, increase.ErrInvalidCredit},
		{"effective date with a time", func(tr *increase.InboundACHTransfer) { tr.EffectiveDate = "2023-04-02T00:00:00Z" }, increase.ErrMalformedTransfer, increase.ErrInvalidCredit},
		{"another object", func(tr *increase.InboundACHTransfer) { tr.Type = "ach_transfer" }, increase.ErrMalformedTransfer, increase.ErrInvalidCredit},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr := documentedTransfer(t)
			tt.mutate(&tr)
			_, err := increase.Normalise("event_1", tr)
			if !errors.Is(err, tt.want) || !errors.Is(err, tt.kind) {
				t.Fatalf("Normalise = %v, want %v (a %v)", err, tt.want, tt.kind)
			}
		})
	}
}

func TestNormaliseInternationalInDollars(t *testing.T) {
	tr := documentedTransfer(t)
	tr.StandardEntryClassCode = "international_ach_transaction"
	tr.InternationalAddenda = &increase.InternationalAddenda{DestinationCurrencyCode: "USD", OriginatingCurrencyCode: "CAD"}
	c, err := increase.Normalise("event_1", tr)
	if err != nil || c.AmountCents != 100 || c.Currency != "USD" {
		t.Fatalf("Normalise = %+v, %v; want 100 USD cents", c, err)
	}
}

func TestParseEventDocumentedExample(t *testing.T) {
	e, err := increase.ParseEvent(increasefake.ExampleEvent())
	if err != nil {
		t.Fatal(err)
	}
	want := increase.Event{
		ID:                   "event_001dzz0r20rzr4zrhrr1364hy80",
		CreatedAt:            time.Date(2020, 1, 31, 23, 59, 59, 0, time.UTC),
		Category:             increase.CategoryInboundACHTransferCreated,
		AssociatedObjectType: "inbound_ach_transfer",
		AssociatedObjectID:   "inbound_ach_transfer_tdrwqr3fq9gnnq49odev",
		Type:                 "event",
	}
	if !e.CreatedAt.Equal(want.CreatedAt) {
		t.Fatalf("created_at = %v", e.CreatedAt)
	}
	e.CreatedAt = want.CreatedAt
	if e != want {
		t.Fatalf("ParseEvent = %+v, want %+v", e, want)
	}
}

func TestParseEventRefuses(t *testing.T) {
	for name, body := range map[string]string{
		"not JSON":           `event_1`,
		"an array":           `[{"id":"event_1"}]`,
		"not an event":       `{"id":"event_1","created_at":"2020-01-31T23:59:59Z","category":"x.created","type":"inbound_ach_transfer"}`,
		"no id":              `{"created_at":"2020-01-31T23:59:59Z","category":"x.created","type":"event"}`,
		"id with a slash":    `{"id":"event_1/../x","created_at":"2020-01-31T23:59:59Z","category":"x.created","type":"event"}`,
		"no category":        `{"id":"event_1","created_at":"2020-01-31T23:59:59Z","type":"event"}`,
		"no created_at":      `{"id":"event_1","category":"x.created","type":"event"}`,
		"two objects":        `{"id":"event_1","created_at":"2020-01-31T23:59:59Z","category":"x.created","type":"event"}{}`,
		"created_at as unix": `{"id":"event_1","created_at":1580515199,"category":"x.created","type":"event"}`,
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := increase.ParseEvent([]byte(body)); !errors.Is(err, increase.ErrMalformedEvent) {
				t.Fatalf("ParseEvent = %v, want ErrMalformedEvent", err)
			}
		})
	}
}

// TestBuildThenNormalise is the sandbox's path without HTTP: what the
// simulator builds is what the receiver reads back, to the cent.
func TestBuildThenNormalise(t *testing.T) {
	in := increase.Credit{
		EventID:         "event_sim0001",
		TransferID:      "inbound_ach_transfer_sim0001",
		Trace:           "091000019999999",
		AmountCents:     123456789,
		AccountID:       "account_church0001",
		AccountNumberID: "account_number_church0001",
		ReceivedAt:      time.Date(2026, 11, 28, 22, 0, 0, 0, time.UTC),
	}
	wire, err := json.Marshal(increase.AcceptedTransfer(in))
	if err != nil {
		t.Fatal(err)
	}
	var read increase.InboundACHTransfer
	if err := json.Unmarshal(wire, &read); err != nil {
		t.Fatal(err)
	}
	body, err := increase.MarshalEvent(increase.TransferCreated(in.EventID, in.TransferID, in.ReceivedAt))
	if err != nil {
		t.Fatal(err)
	}
	ev, err := increase.ParseEvent(body)
	if err != nil {
		t.Fatal(err)
	}
	if ev.AssociatedObjectID != in.TransferID || ev.Category != increase.CategoryInboundACHTransferCreated {
		t.Fatalf("event = %+v", ev)
	}
	got, err := increase.Normalise(ev.ID, read)
	if err != nil {
		t.Fatal(err)
	}
	if got.Trace != in.Trace || got.AmountCents != in.AmountCents || got.Currency != "USD" ||
		got.AccountNumberID != in.AccountNumberID || got.EventID != in.EventID || got.TransferID != in.TransferID ||
		got.EffectiveDate != "2026-11-28" || !got.ReceivedAt.Equal(in.ReceivedAt) || got.TransactionID == "" {
		t.Fatalf("round trip = %+v", got)
	}
}
