// Package eventlogtest starts real ledgers for tests: an embedded nats-server
// with JetStream storing under the test's temporary directory (Open), a
// separate server that several instances share (StartServer), or the
// deployed cluster's configuration run on loopback (StartCluster). Like
// eventlog, and for the same reason, it is where tests outside eventlog get
// what they need of NATS: they import neither nats.go nor nats-server.
package eventlogtest

import (
	"context"
	"testing"
	"time"

	"github.com/partnergiving/giving/domain"
	"github.com/partnergiving/giving/eventlog"
)

// Open starts an embedded ledger for env in a fresh temporary directory and
// closes it when the test ends.
func Open(tb testing.TB, env domain.Environment) *eventlog.Ledger {
	tb.Helper()
	return OpenAt(tb, env, tb.TempDir())
}

// OpenAt starts an embedded ledger on an existing data directory, for tests
// that restart the service.
func OpenAt(tb testing.TB, env domain.Environment, dir string) *eventlog.Ledger {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	l, err := eventlog.Open(ctx, eventlog.Config{Env: env, DataDir: dir})
	if err != nil {
		tb.Fatalf("open ledger: %v", err)
	}
	tb.Cleanup(l.Close)
	return l
}

// WaitFor polls cond until it holds or the timeout passes, then fails the
// test with msg. Tests use it instead of sleeping.
func WaitFor(tb testing.TB, timeout time.Duration, msg string, cond func() bool) {
	tb.Helper()
	deadline := time.Now().Add(timeout)
	for {
		if cond() {
			return
		}
		if time.Now().After(deadline) {
			tb.Fatalf("timed out after %s: %s", timeout, msg)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
