// Package eventlog is the service's ledger: a NATS JetStream stream per
// environment that holds every domain event. It opens the embedded
// nats-server (or connects to a cluster), appends (Append, with group
// commit), runs commands (Execute: load, decide, append under optimistic
// concurrency), reads (Read, Get, LastSeq) and follows (Follow for the
// projector, SharedReader for the dispatcher's fan-out), and watches the
// store's health.
//
// The other stored nouns live in sibling packages under it, each owning its
// bucket or stream on the same JetStream: vault (donor phones and phone
// keys), idempotency (Idempotency-Key records), delivery (webhook queue,
// attempt log, recoveries), dashboard (sign-in links and sessions),
// presence, seen (vendor events handled), keyuse (API keys' last use),
// accountnumbers (the churches' bank account numbers), and probe (what the
// bench measures of NATS itself). Beside them, control carries operator
// requests to running instances on the ledger's connection, storing nothing.
// They open their buckets through the small surface in siblings.go. Only
// packages under eventlog import NATS (TestImportRules in internal/imports
// checks it). A failure to reach NATS is reported as domain.ErrUnavailable,
// so callers can answer "retry later" without knowing what NATS is.
//
// With no NATS URL it starts an embedded nats-server that stores under the
// data directory and syncs every write to disk before acknowledging it; with
// a URL the same code talks to an external server or cluster. The embedded
// server's data directory is one process's at a time: it holds a lock there
// and records where operator commands reach it (RunningInstance).
//
// Subjects are laid out as
//
//	ledger.<env>.<partner>.<aggregate>.<pub|int>.<noun>.<verb>
//
// so that one partner's public events of one type are a subject filter the
// server answers from its index (ledger.<env>.<partner>.*.pub.<noun>.<verb>),
// and one aggregate's events are a literal-prefix filter
// (ledger.<env>.<partner>.<aggregate>.>) that guards optimistic concurrency
// through JetStream's expected-last-subject-sequence check.
package eventlog
