package increase

import (
	"encoding/json"
	"time"
)

// InboundACHTransfer is Increase's Inbound ACH Transfer object, as the API
// reference documents it: an ACH transfer initiated at another bank towards
// an Increase account number. Every documented top-level field is here, so
// that the fake serves the documented shape; the nested objects the
// normaliser does not read are kept as raw JSON (null when absent).
//
// Amount stays a json.Number so that it is read from its text into integer
// cents, never through a float.
type InboundACHTransfer struct {
	ID                                 string                `json:"id"`
	Acceptance                         *Acceptance           `json:"acceptance"`
	AccountID                          string                `json:"account_id"`
	AccountNumberID                    string                `json:"account_number_id"`
	Addenda                            json.RawMessage       `json:"addenda"`
	Amount                             json.Number           `json:"amount"`
	AutomaticallyResolvesAt            time.Time             `json:"automatically_resolves_at"`
	CreatedAt                          time.Time             `json:"created_at"`
	Decline                            json.RawMessage       `json:"decline"`
	Direction                          string                `json:"direction"`
	EffectiveDate                      string                `json:"effective_date"`
	InternationalAddenda               *InternationalAddenda `json:"international_addenda"`
	NotificationOfChange               json.RawMessage       `json:"notification_of_change"`
	OriginatorCompanyDescriptiveDate   *string               `json:"originator_company_descriptive_date"`
	OriginatorCompanyDiscretionaryData *string               `json:"originator_company_discretionary_data"`
	OriginatorCompanyEntryDescription  string                `json:"originator_company_entry_description"`
	OriginatorCompanyID                string                `json:"originator_company_id"`
	OriginatorCompanyName              string                `json:"originator_company_name"`
	OriginatorRoutingNumber            string                `json:"originator_routing_number"`
	ReceiverIDNumber                   *string               `json:"receiver_id_number"`
	ReceiverName                       *string               `json:"receiver_name"`
	Settlement                         Settlement            `json:"settlement"`
	StandardEntryClassCode             string                `json:"standard_entry_class_code"`
	Status                             string                `json:"status"`
	TraceNumber                        string                `json:"trace_number"`
	TransferReturn                     json.RawMessage       `json:"transfer_return"`
	Type                               string                `json:"type"` // always "inbound_ach_transfer"
}

// The documented values of InboundACHTransfer.Status and .Direction that the
// normaliser decides on.
const (
	StatusPending  = "pending"
	StatusAccepted = "accepted"
	StatusDeclined = "declined"
	StatusReturned = "returned"

	DirectionCredit = "credit"
	DirectionDebit  = "debit"
)

// Acceptance is set once Increase accepted the transfer and the money moved
// into the account as a Transaction.
type Acceptance struct {
	AcceptedAt    time.Time `json:"accepted_at"`
	TransactionID string    `json:"transaction_id"`
}

// InternationalAddenda is the part of an IAT entry's addenda that says which
// currencies it moves; only the destination currency is read.
type InternationalAddenda struct {
	DestinationCurrencyCode string `json:"destination_currency_code"`
	OriginatingCurrencyCode string `json:"originating_currency_code"`
}

// Settlement says when the funds settle at the Federal Reserve.
type Settlement struct {
	SettledAt          time.Time `json:"settled_at"`
	SettlementSchedule string    `json:"settlement_schedule"` // same_day | future_dated
}
