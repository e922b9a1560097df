// Package eventlog is the service's ledger: a NATS JetStream stream per
// environment that holds every domain event, plus the JetStream key-value
// buckets and streams that carry state which must be shared by every
// instance (idempotency records, rate-limit buckets, the PII vault, the
// webhook delivery queue, attempt log and recoveries, the hour each API key
// was last used, the control plane).
//
// It is the only package that imports NATS (nats.go and nats-server). What
// the others need of JetStream they get as eventlog types: Follow for the
// projector, SharedReader and DeliveryQueue for the dispatcher, Listen and
// Request for operator requests. A failure to reach NATS is reported as
// domain.ErrUnavailable, so callers can answer "retry later" without knowing
// what NATS is. Imports: domain, telemetry. Imported by projections, app, dispatcher
// and the wiring.
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
