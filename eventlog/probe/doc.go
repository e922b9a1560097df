// Package probe is what giving bench (internal/bench) measures of NATS
// itself, with nothing of the service around it: the raw synced publish
// limit, raw paced appends and their reads, a fast fill of a ledger with
// real events, and raw reads and feeds of it, each the floor the service's
// own figures are set beside. It sits under eventlog because only packages
// under eventlog may use NATS; internal/bench holds the rest of the bench.
package probe
