package increase

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"
)

// AccountNumber is Increase's Account Number object: one of an Account's
// account and routing number pairs. Increase recommends one per payer "to
// seamlessly reconcile inbound payments": the service opens one per church,
// and an Inbound ACH Transfer's account_number_id then names the church.
//
// AccountNumber and RoutingNumber are bank data: never logged, never shown to
// partners.
type AccountNumber struct {
	ID             string    `json:"id"`
	AccountID      string    `json:"account_id"`
	AccountNumber  string    `json:"account_number"`
	CreatedAt      time.Time `json:"created_at"`
	IdempotencyKey *string   `json:"idempotency_key"`
	InboundACH     struct {
		DebitStatus string `json:"debit_status"` // allowed | blocked
	} `json:"inbound_ach"`
	InboundChecks struct {
		Status string `json:"status"` // allowed | check_transfers_only
	} `json:"inbound_checks"`
	Name          string `json:"name"`
	RoutingNumber string `json:"routing_number"`
	Status        string `json:"status"` // active | disabled | canceled
	Type          string `json:"type"`   // always "account_number"
}

// NewAccountNumber is the body of POST /account_numbers. Inbound ACH debits
// are blocked: a church's deposit account only ever receives.
type NewAccountNumber struct {
	AccountID  string `json:"account_id"`
	Name       string `json:"name"`
	InboundACH struct {
		DebitStatus string `json:"debit_status"`
	} `json:"inbound_ach"`
}

// Account is the part of Increase's Account object the service reads: the
// bank that holds it, whose name a payroll provider shows the donor.
type Account struct {
	ID     string `json:"id"`
	Bank   string `json:"bank"`   // core_bank | first_internet_bank | grasshopper_bank | ...
	Status string `json:"status"` // open | closed
	Type   string `json:"type"`   // always "account"
}

// bankNames are the documented names of Account.Bank's values (the SDKs'
// descriptions of the enum).
var bankNames = map[string]string{
	"core_bank":           "Core Bank",
	"first_internet_bank": "First Internet Bank of Indiana",
	"grasshopper_bank":    "Grasshopper Bank",
}

// BankName is the name of the bank holding a: the documented name, or for
// a value added since, its words capitalised ("increase_bank" is "Increase
// Bank").
func (a Account) BankName() string {
	if n, ok := bankNames[a.Bank]; ok {
		return n
	}
	words := strings.Fields(strings.ReplaceAll(a.Bank, "_", " "))
	for i, w := range words {
		words[i] = strings.ToUpper(w[:1]) + w[1:]
	}
	return strings.Join(words, " ")
}

// maxIdempotencyKey is the longest Idempotency-Key Increase takes.
const maxIdempotencyKey = 200

// CreateAccountNumber opens an account number: POST /account_numbers under
// idempotencyKey. Increase creates at most one object per key and answers a
// second request with the same key and arguments with the first object, so
// a caller that derives the key from what the number is for (a church) may
// call it any number of times, from any instance, and gets one number.
// When the key is already bound to an object created with other arguments
// (Increase's 409 idempotency_key_already_used_error), that object is
// retrieved and returned: the key names what the number is for.
func (c *Client) CreateAccountNumber(ctx context.Context, p NewAccountNumber, idempotencyKey string) (AccountNumber, error) {
	var n AccountNumber
	if idempotencyKey == "" || len(idempotencyKey) > maxIdempotencyKey {
		return n, fmt.Errorf("%w: an Idempotency-Key has 1 to %d characters", ErrRejected, maxIdempotencyKey)
	}
	if !idForm.MatchString(p.AccountID) {
		return n, fmt.Errorf("%w: account id %q is not an Increase id", ErrRejected, p.AccountID)
	}
	p.InboundACH.DebitStatus = "blocked"
	err := c.do(ctx, http.MethodPost, "/account_numbers", p, idempotencyKey, &n)
	var apiErr *APIError
	if errors.As(err, &apiErr) && apiErr.Type == "idempotency_key_already_used_error" && apiErr.ResourceID != "" {
		return c.AccountNumber(ctx, apiErr.ResourceID)
	}
	if err != nil {
		return n, fmt.Errorf("create account number: %w", err)
	}
	return n, nil
}

// AccountNumber retrieves an Account Number: GET /account_numbers/{id}.
func (c *Client) AccountNumber(ctx context.Context, id string) (AccountNumber, error) {
	var n AccountNumber
	if !idForm.MatchString(id) {
		return n, fmt.Errorf("%w: account number id %q is not an Increase id", ErrRejected, id)
	}
	if err := c.get(ctx, "/account_numbers/"+id, &n); err != nil {
		return n, fmt.Errorf("retrieve account number %s: %w", id, err)
	}
	return n, nil
}

// Account retrieves an Account: GET /accounts/{id}.
func (c *Client) Account(ctx context.Context, id string) (Account, error) {
	var a Account
	if !idForm.MatchString(id) {
		return a, fmt.Errorf("%w: account id %q is not an Increase id", ErrRejected, id)
	}
	if err := c.get(ctx, "/accounts/"+id, &a); err != nil {
		return a, fmt.Errorf("retrieve account %s: %w", id, err)
	}
	return a, nil
}
