// Package simulators plays the sandbox's vendors: the payroll provider, the
// bank and the identity verifier. Each simulation builds the webhook the real
// vendor would send, signs it with the sandbox vendor secret, and POSTs it
// over HTTP(S) to the service's own public edge — the production path — then
// reports the edge's answer as it is: its status and, when it refused the
// webhook, its problem+json body. Nothing here calls a handler directly.
//
// The identity verifier speaks Stripe Identity's wire format (kyc.go), and
// IdentityStandin is the sandbox's identity vendor itself: a stateless
// stand-in of Stripe's hosted page, which the flow sends donors to
// (identity.go).
//
// What it may import is checked by TestImportRules (internal/imports).
package simulators
