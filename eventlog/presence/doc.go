// Package presence counts the instances sharing a ledger, from a
// memory-backed KV bucket each instance renews its entry in, so that rules
// splitting a budget between instances (the per-key rate limit) know how
// many there are without asking on the request path.
package presence
