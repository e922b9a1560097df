package stack

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"fmt"

	"github.com/partnergiving/giving/app"
)

// sandboxBank is the sandbox's bank: every church's deposit account is
// derived from its id, so any instance gives the same one.
type sandboxBank struct{}

func (sandboxBank) DepositAccount(_ context.Context, churchID string) (app.DepositAccount, error) {
	sum := sha256.Sum256([]byte("sandbox deposit account\x00" + churchID))
	return app.DepositAccount{
		RoutingNumber: "011000015",
		AccountNumber: fmt.Sprintf("9%011d", binary.BigEndian.Uint64(sum[:8])%100_000_000_000),
		BankName:      "Sandbox Bank",
	}, nil
}
