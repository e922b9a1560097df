// Package stripefake is a local stand-in for Stripe Identity, written from
// Stripe's public documentation, for tests of the stripeidentity adapter
// and end-to-end tests of the service. It is a normal package so that e2e
// tests can start one.
//
// It serves, on loopback:
//
//   - the VerificationSession API (create, retrieve, cancel under
//     /v1/identity/verification_sessions), checking every request as Stripe
//     would and more strictly where the service has its own rules: the
//     bearer key, the form encoding, the documented parameters (unknown ones
//     are refused), Stripe-Version's form when one is sent, and an
//     Idempotency-Key on every POST (Stripe makes it optional; the service
//     always sends one). A key reused with the same parameters replays the
//     first answer; with other parameters it is an idempotency_error.
//     Answers are Stripe's objects and error bodies, with a Request-Id.
//   - a minimal hosted verification page at each session's url, made of
//     plain forms (no JavaScript), whose buttons end the session verified,
//     not verified (requires_input, document_unverified_other), declined
//     (requires_input, consent_declined) or canceled, or leave it
//     undecided. The url is single-use, as Stripe's is; retrieving a session
//     that requires input again gives a fresh one.
//   - webhooks: each status change is rendered as a Stripe Event, signed
//     with stripeidentity.Sign (the one signer) and POSTed to the configured
//     URL with Stripe-Signature, before the browser is redirected to the
//     session's return_url with 303 See Other.
//
// Everything it received and sent is recorded (Requests, Deliveries) so
// tests can assert on it, and FailNext makes the next API call fail the way
// Stripe fails, to exercise the adapter's error mapping.
//
// Where Stripe's behaviour is not documented the fake picks the simplest
// reading and says so: error messages are its own wording; webhooks are
// sent synchronously and never retried (Resend redelivers one); Stripe
// appends nothing to return_url; the cancel button stands in for a cancel
// made through the API or the Dashboard, which the real hosted page does
// not offer.
package stripefake
