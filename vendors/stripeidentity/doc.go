// Package stripeidentity is the service's adapter for Stripe Identity, the
// identity-verification vendor of the donor flow: it creates and reads
// VerificationSessions, verifies and normalises Stripe's webhooks about
// them, and builds and signs those webhooks for the sandbox, which must
// speak Stripe's wire format through the same edge production uses.
//
// # Why Stripe Identity
//
// The donor flow pages carry no JavaScript, and the service must not see
// identity documents. Stripe Identity offers a hosted redirect: the service
// creates a session server-side, sends the donor's browser to the session's
// url, and Stripe sends the donor back to a return_url the service chose.
// The result arrives asynchronously in webhooks signed with an HMAC over
// the raw body, the same scheme the service already uses for its own
// webhooks. Persona offers a similar hosted flow; Stripe's API reference,
// its official Go SDK and its signature scheme are public and complete
// enough to build against and to fake faithfully.
//
// # What the service calls
//
//   - New(Config) and Client.CreateSession: a document check with a
//     return_url, the service's reference in metadata[reference], and an
//     Idempotency-Key; redirect the donor to Session.URL and neither store
//     nor log it (Stripe documents it as single-use and short-lived).
//   - Client.RetrieveSession when the donor comes back: Session.Outcome
//     says where the flow stands (the webhook may not have arrived yet), and
//     while the session requires input Stripe returns a fresh URL for a
//     retry. Client.CancelSession when the donor session expires first.
//   - ParseWebhook at the edge: verify Stripe-Signature on the raw body,
//     then normalise to a Result (Outcome Passed, Review, Failed or Pending,
//     keyed by EventID for deduplication, Reference to find the donor
//     session). ErrIgnored marks events to acknowledge with 2xx and drop;
//     every signature failure wraps ErrSignature (ErrNotSigned,
//     ErrInvalidHeader, ErrNoValidSignature, ErrTooOld) and, like
//     ErrInvalidEvent, is a refusal: Stripe's own examples answer 400 and
//     Stripe retries anything that is not 2xx.
//   - NewVerifier(Client): the service's identity port on the client. It
//     names the donor by the service's opaque ids only (the donor id as the
//     reference, the church and donor session in metadata), reads a
//     session as the flow needs it (domain.IdentityCheck: still open with a
//     page to go back to, or decided), and gives the hosted pages' origin,
//     which the flow's CSP allows its identity form to lead to.
//   - BuildEvent (with OutcomeEvent) and Sign in the sandbox's stand-in and
//     POST /sandbox/simulate/kyc, so that the simulator sends what Stripe
//     sends through the production edge.
//
// Errors from the client are *Error values: errors.Is(err, ErrRefused)
// when Stripe said no (a 4xx with Stripe's type, code, message and param),
// errors.Is(err, ErrUnavailable) for 5xx, 409, 429, network failures,
// timeouts and undecodable answers; ErrInvalidParams when a call was
// refused before it was sent. Decide documents how statuses and last_error
// codes become outcomes, and why.
//
// The reference travels in metadata, which every version of the object
// carries; client_reference_id, a newer field for the same purpose, is left
// unset. Stripe appends nothing documented to return_url, so the service
// puts whatever it needs to recognise the returning donor in the URL
// itself.
//
// No personal data goes to Stripe from the service: CreateParams has no
// field for a phone, an email or a name, and metadata values that look
// like a phone number or an email address are refused. Stripe collects the
// document from the donor directly; the package decodes none of the
// verified outputs.
//
// # Documentation followed
//
//   - docs.stripe.com/identity/verify-identity-documents (web, redirect):
//     create a session server-side, redirect to its url, return_url.
//   - docs.stripe.com/identity/how-sessions-work: the four statuses, the
//     return to requires_input with last_error on failure, retrieve for a
//     fresh URL, cancel only before processing or verified.
//   - docs.stripe.com/identity/handle-verification-outcomes: listen for
//     identity.verification_session.verified and .requires_input.
//   - docs.stripe.com/api/identity/verification_sessions (create, retrieve,
//     cancel, the object, the event list) and the object's last_error.code
//     enumeration.
//   - docs.stripe.com/api/events/object: the Event envelope.
//   - docs.stripe.com/webhooks, "Verify webhook signatures manually": the
//     Stripe-Signature header, the signed payload "<t>.<body>", HMAC-SHA256
//     with the endpoint secret, several v1 values while a secret rolls, a
//     tolerance against replays (300 seconds in Stripe's libraries).
//   - docs.stripe.com/api/authentication (bearer key),
//     docs.stripe.com/api/idempotent_requests (Idempotency-Key, up to 255
//     characters, same parameters), docs.stripe.com/api/errors (status
//     codes and the error object), docs.stripe.com/api/versioning
//     (Stripe-Version), docs.stripe.com/metadata (limits, no sensitive
//     data).
//   - github.com/stripe/stripe-go: identity_verificationsession.go for the
//     object's fields and enumerations, webhook/client.go for the exact
//     signature computation (the whole whsec_ secret is the HMAC key), and
//     stripe.go for how errors, Request-Id and Stripe-Should-Retry are read.
//
// # What could not be checked without Stripe's servers
//
//   - The exact JSON Stripe puts in a live identity event: the fixtures in
//     testdata are written from the documented object and event shapes, not
//     captured; in particular whether url and client_secret are null in
//     events, and which optional fields appear, is not documented.
//   - The hosted page itself, what it does when the donor leaves it, and
//     the delay between submission, the return to return_url and the
//     webhooks; the fake redirects at once and sends its webhooks first.
//   - Which last_error codes test-mode sessions produce, and whether a
//     session Stripe's reviewers later verify emits a second event.
//   - The precise error bodies (messages, codes) Stripe returns for each bad
//     parameter, and the headers Stripe's webhook deliveries carry besides
//     Stripe-Signature and the JSON content type.
//   - Whether the pinned APIVersion is accepted by a given account; it is
//     configurable for that reason.
//   - The hosted pages' origin, https://verify.stripe.com: Stripe's reference
//     gives the url as an opaque string; the origin is the one every
//     published integration's session urls have.
package stripeidentity
