package eventlog

import (
	"context"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// JetStreamForTest lets the package's black-box tests look at what a bucket
// stores on the server.
func (l *Ledger) JetStreamForTest() jetstream.JetStream { return l.js }

// DirectLastForTest runs the ledger's direct get of the last message on
// subject in stream.
func (l *Ledger) DirectLastForTest(ctx context.Context, stream, subject string) (int, error) {
	msgs, _, err := l.directMsgs(ctx, stream, directGetRequest{LastFor: subject})
	return len(msgs), err
}

// SetGatherWaitForTest sets how long Follow waits for the rest of a backlog,
// until the returned function restores it.
func SetGatherWaitForTest(d time.Duration) (restore func()) {
	old := gatherWait
	gatherWait = d
	return func() { gatherWait = old }
}
