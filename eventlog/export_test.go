package eventlog

import "github.com/nats-io/nats.go/jetstream"

// JetStreamForTest lets the package's black-box tests look at what a bucket
// stores on the server.
func (l *Ledger) JetStreamForTest() jetstream.JetStream { return l.js }
