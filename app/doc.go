// Package app holds the service's use cases: one exported method per thing a
// partner, a donor, a vendor or an operator can do (import churches, open a
// donor session, show a page of the hosted flow or submit one of its forms, cancel, pause or update an
// enrollment, register, edit or rotate a webhook endpoint, roll an API key,
// handle a vendor webhook, onboard a partner, ...), and the background processes (the sweeper: session
// expiry, enrollments a failure left uncreated, waits for a donor's consent
// that ran out).
//
// A use case takes plain inputs and returns plain results or typed domain
// errors. It loads what it needs, lets domain decide, appends through the
// ledger (eventlog) and waits until this instance's projections show the
// write, so the answer and any read after it agree. It knows nothing of
// HTTP, HTML or flags: the transports (httpapi, the CLI) decode, call and
// encode.
//
// What it may import is checked by TestImportRules (internal/imports).
package app
