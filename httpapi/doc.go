// Package httpapi is the service's HTTP face, and transport only: the
// partner API under /v1, the sandbox simulators under /sandbox (sandbox stack
// only), the hosted donor flow's pages under /flow, the vendor edge under
// /edge, health checks, the problem catalogue pages, the OpenAPI document
// and its rendered reference at /docs (Redoc, embedded), and a landing page
// at / for browsers.
//
// Every /v1 and /sandbox request passes one middleware chain: request id and
// access log, API-key authentication (a live key: neither revoked nor past a
// roll's expiry), per-key rate limiting, and for POSTs and PATCHes the
// Idempotency-Key contract. A handler decides nothing itself: it decodes the
// request, calls one use case of package app, and encodes the result; every
// error leaves through one function (writeError) that turns a domain error
// into application/problem+json with the status its catalogue entry names.
// Reads that need no rule (get and list) come straight from the projections.
//
// The ledger is reached only through the use cases: never eventlog or NATS
// from here, as TestImportRules (internal/imports) checks.
package httpapi
