package domain

// DepositReceived is the public deposit.received event: a bank credit for
// one of the partner's churches was reconciled. It carries no bank account
// data.
type DepositReceived struct {
	DepositID string     `json:"deposit_id"`
	Amount    Hundredths `json:"amount"`
	Currency  string     `json:"currency"`
	Trace     string     `json:"trace"`
	BankTS    string     `json:"bank_ts"`
}

func (*DepositReceived) EventType() string { return "deposit.received" }

func init() {
	register[DepositReceived](true, "A bank credit for one of the partner's churches arrived and was reconciled.")
}
