package increasefake

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
	"time"

	"github.com/partnergiving/giving/vendors/increase"
)

// accountNumberParams are the documented parameters of
// POST /account_numbers.
type accountNumberParams struct {
	AccountID  string `json:"account_id"`
	Name       string `json:"name"`
	InboundACH *struct {
		DebitStatus string `json:"debit_status"`
	} `json:"inbound_ach"`
	InboundChecks *struct {
		Status string `json:"status"`
	} `json:"inbound_checks"`
}

// routingNumber is the routing number of the documented example Account
// Number.
const routingNumber = "101050001"

// createAccountNumber opens an account number under a known account, with
// the documented defaults (inbound ACH debits allowed, checks only from
// check transfers) where the request leaves them out.
func (f *Fake) createAccountNumber(body []byte) (int, []byte) {
	var p accountNumberParams
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&p); err != nil {
		return apiError(http.StatusBadRequest, "malformed_request_error", "", "The body is not a JSON object of the documented parameters.", err.Error())
	}
	var invalid []string
	if p.AccountID == "" {
		invalid = append(invalid, "account_id")
	}
	if p.Name == "" || len(p.Name) > 200 {
		invalid = append(invalid, "name")
	}
	debits, checks := "allowed", "check_transfers_only"
	if p.InboundACH != nil {
		debits = p.InboundACH.DebitStatus
		if debits != "allowed" && debits != "blocked" {
			invalid = append(invalid, "inbound_ach.debit_status")
		}
	}
	if p.InboundChecks != nil {
		checks = p.InboundChecks.Status
		if checks != "allowed" && checks != "check_transfers_only" {
			invalid = append(invalid, "inbound_checks.status")
		}
	}
	if len(invalid) > 0 {
		return apiError(http.StatusBadRequest, "invalid_parameters_error", "", "Some parameters are missing or invalid.", strings.Join(invalid, ", "))
	}
	f.mu.Lock()
	_, known := f.accounts[p.AccountID]
	f.mu.Unlock()
	if !known {
		return notFound(p.AccountID)
	}
	n := increase.AccountNumber{
		ID:            "account_number_" + randomID(),
		AccountID:     p.AccountID,
		AccountNumber: randomDigits(12),
		CreatedAt:     f.opts.Now().UTC().Truncate(time.Second),
		Name:          p.Name,
		RoutingNumber: routingNumber,
		Status:        "active",
		Type:          "account_number",
	}
	n.InboundACH.DebitStatus = debits
	n.InboundChecks.Status = checks
	f.mu.Lock()
	f.accountNumbers[n.ID] = n
	f.mu.Unlock()
	return ok200(n)
}
