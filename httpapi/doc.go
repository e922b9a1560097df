// Package httpapi is the service's HTTP face: the partner API under /v1, the
// sandbox simulators under /sandbox (sandbox stack only), health checks and
// the OpenAPI document.
//
// Every /v1 and /sandbox request passes one middleware chain: request id and
// access log, API-key authentication, per-key rate limiting, and for POSTs the
// Idempotency-Key contract. Every error leaves through one writer as
// application/problem+json with a type from one catalogue (problem.go).
// Handlers decide nothing themselves: they decode, run a domain command
// through the ledger's command helper, wait for the local projections to see
// the write, and encode.
package httpapi
