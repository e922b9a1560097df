// Package eventlog is the service's ledger: a NATS JetStream stream per
// environment that holds every domain event, plus the JetStream key-value
// buckets that carry state which must be shared by every instance
// (idempotency records, rate-limit buckets).
//
// With no NATS URL it starts an embedded nats-server that stores under the
// data directory and syncs every write to disk before acknowledging it; with
// a URL the same code talks to an external server or cluster.
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
