package eventlog

import "github.com/nats-io/nats.go/jetstream"

// JetStreamForTest lets the package's black-box tests look at what a bucket
// stores on the server.
func (l *Ledger) JetStreamForTest() jetstream.JetStream { return l.js }

// GroupCommitAtForTest sets how many appends may be in flight before the
// next ones wait to share a batch: 1 makes every append that finds another
// under way join a batch; a large number turns group commit off.
func (l *Ledger) GroupCommitAtForTest(n int64) { l.commit.at = n }
