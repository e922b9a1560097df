// Package domain holds the Partner Giving service's vocabulary: identifiers,
// value types, the event catalogue, and each aggregate's rules written as
// pure functions. Every state change the service makes is decided here, from
// an aggregate's past events and a command, and returned as a new event for
// the ledger to store.
//
// It also holds the service's one error catalogue (problems.go: every
// problem type partners can receive, with its code, status and text), the
// one signer of webhooks (signature.go), the cursor codec and Fold, which
// rebuilds any aggregate from its events.
//
// The package does no I/O: it never logs, never talks to NATS, bbolt or HTTP,
// and can be read and tested on its own. It imports nothing of this module;
// everything above it (eventlog, projections, app, httpapi, dispatcher)
// depends on it, never the other way round.
package domain
