package eventlog

import (
	"context"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/partnergiving/giving/domain"
)

// NATSErr annotates a failed NATS operation with what was being done. A
// failure to reach the server (connection closed or lost, no responders, a
// timeout) is also marked domain.ErrUnavailable, so the layers above can
// answer "retry later" without knowing how the ledger is reached.
func NATSErr(op string, err error) error {
	if unreachable(err) {
		return fmt.Errorf("%s: %w: %w", op, domain.ErrUnavailable, err)
	}
	return fmt.Errorf("%s: %w", op, err)
}

func unreachable(err error) bool {
	return errors.Is(err, nats.ErrConnectionClosed) || errors.Is(err, nats.ErrNoResponders) ||
		errors.Is(err, nats.ErrTimeout) || errors.Is(err, jetstream.ErrNoStreamResponse) ||
		errors.Is(err, nats.ErrDisconnected) || errors.Is(err, nats.ErrConnectionReconnecting) ||
		errors.Is(err, context.DeadlineExceeded)
}
