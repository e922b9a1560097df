// Package increase receives incoming ACH credits from Increase
// (increase.com), the banking API whose account numbers receive the
// churches' deposits: it verifies Increase's webhooks, fetches the Inbound
// ACH Transfer an event points at, and turns an accepted credit into a
// Credit in exact cents.
// It also builds and signs those webhooks, so that the sandbox's simulated
// deposits travel the production path. The sub-package increasefake is a
// local Increase for tests and for the sandbox.
//
// # Why Increase
//
// Of the banks and payments-operations vendors considered (Increase, Modern
// Treasury, Column), Increase is the one whose wire format could be read
// end to end: its API reference publishes the Inbound ACH Transfer object
// with an example, its guides describe the transfer's lifecycle and its
// events, and its official Go SDK (github.com/Increase/increase-go) shows
// the exact types, paths, authentication and webhook verification. Its
// webhook carries only an event id, so the design also covers the harder
// shape (fetch the object), and its sandbox API can simulate an inbound ACH
// transfer, which the fake mirrors.
//
// # How a credit arrives
//
//  1. Increase POSTs an Event to the event subscription's URL. The body is the
//     Event object and nothing more: id, created_at, category,
//     associated_object_type, associated_object_id, type "event". An inbound
//     ACH transfer raises inbound_ach_transfer.created when it arrives
//     (pending) and inbound_ach_transfer.updated when it changes (accepted,
//     declined, returned).
//  2. The receiver verifies the signature (Verify), decodes the Event
//     (ParseEvent) and fetches the transfer: GET /inbound_ach_transfers/{id}
//     with "Authorization: Bearer <API key>" (Client).
//  3. Normalise keeps accepted credits only. Money moves into the account when
//     the transfer is accepted; a pending one is ignored and its later
//     updated event brings it back, a declined or returned one never credits.
//     Amounts are integer USD cents on the wire and are read from their text.
//
// Receiver does the three steps for one request.
//
// # Signature
//
// Increase's current SDKs (Go and Python, since January 2026) verify webhooks with the Standard Webhooks scheme, so that is what Verify
// implements: headers webhook-id, webhook-timestamp (Unix seconds) and
// webhook-signature (space-separated "v1,<base64>" entries); the signed
// content is "<webhook-id>.<webhook-timestamp>.<raw body>"; the MAC is
// HMAC-SHA256 keyed with the event subscription's shared secret taken as its
// raw bytes (Increase's Go SDK passes "whsec_"+base64(secret) to the Standard
// Webhooks library, which decodes it back); the timestamp must be within five
// minutes of the receiver's clock, either way. The shared secret is the one
// shown for the event subscription in Increase's dashboard, or the
// shared_secret given when creating it through the API.
//
// # What to answer
//
// Increase counts a webhook delivered when it gets a 2xx and sends it again
// otherwise. The errors are grouped so that the edge can decide once:
//
//   - nil: a Credit. Answer 2xx once the credit is durably recorded. A
//     second delivery of the same event, or the other event of the same
//     transfer, yields the same Credit (but for EventID) and must be
//     recognised as a repeat by its trace or transfer id.
//   - ErrInvalidSignature (any of the signature errors): refuse with 401, and
//     log the reason, never the body or the secret.
//   - ErrMalformedEvent: refuse with 400.
//   - ErrIgnored: authentic but nothing to credit; answer 2xx so that it is
//     not sent again.
//   - ErrInvalidCredit: the transfer can never be credited as it stands
//     (fractional, non-positive, non-USD, malformed); refuse with 422 and
//     alert an operator, since the money is in the account but no church was
//     credited. Retries read the same transfer and are refused alike.
//   - ErrUnavailable or ErrRejected from the fetch: answer 503, so Increase
//     sends the event again once its API, or the API key, works. ErrRejected
//     also needs an operator (wrong or revoked key, other environment).
//
// # Identity and reconciliation
//
// Credit.Trace is the ACH trace number, the deposit's identity in the
// service. Increase notes that trace numbers are not unique across
// originators (with the originating routing number and the effective date
// they identify an entry); TransferID is unique at Increase. The church is
// found from Credit.AccountNumberID: the service opens one Increase Account
// Number per church (CreateAccountNumber, under an Idempotency-Key that names
// the church, so one church gets one number however often it is asked) and
// records its id with the church before handing the number out
// (increasebank, eventlog/accountnumbers).
//
// # Sandbox
//
// The sandbox stack runs its own Increase (increasesandbox): a simulated
// deposit's transfer is sealed into its id, the simulator signs and sends the
// Event naming it with Sign, and the edge "fetches" the transfer from the
// sandbox's Increase (a Transfers) exactly where production fetches it from
// Increase's API. AcceptedTransfer (Normalise read backwards) and
// TransferCreated describe what Increase would hold and send for a credit:
// the sandbox's Increase, the simulator and the fake (increasefake) all
// serve and send what they describe, so none keeps its own copy of those
// shapes.
//
// # Documentation followed
//
//   - Events and webhooks: https://increase.com/documentation/webhooks
//     (the webhook body is the Event; fetch the associated object for details).
//   - Receiving ACH transfers: https://increase.com/documentation/receiving-ach-transfers
//     (statuses pending, accepted, declined, returned; money moves on acceptance;
//     automatic resolution after an hour).
//   - Inbound ACH Transfers: https://increase.com/documentation/api/inbound-ach-transfers
//     (the object and its example; event categories inbound_ach_transfer.created
//     and .updated).
//   - Event Subscriptions: https://increase.com/documentation/api/event-subscriptions
//     (shared_secret signs the webhooks).
//   - Account Numbers: https://increase.com/documentation/api/account-numbers
//     (the object and its example; POST /account_numbers with account_id,
//     name, inbound_ach.debit_status), and Accounts and Account Numbers:
//     https://increase.com/documentation/accounts-and-account-numbers (one
//     account, many account numbers, to reconcile inbound payments).
//   - Idempotency keys: https://increase.com/documentation/idempotency-keys
//     (Idempotency-Key header on POST, up to 200 characters, one object per
//     key, a 409 idempotency_key_already_used_error naming the object's id in
//     resource_id when the key is reused with other arguments).
//   - Accounts: the Account object's bank, and the names of its values in the
//     SDKs (accountnumber.go, account.go of the Go SDK; the Ruby SDK's
//     Increase::Models::Account::Bank).
//   - The Go SDK, github.com/Increase/increase-go: event.go (EventService.Unwrap,
//     the Event and its categories), inboundachtransfer.go (types and paths),
//     simulationinboundachtransfer.go (the sandbox simulation), option/requestoption.go
//     (bearer key, base URLs), internal/apierror (the error object),
//     internal/requestconfig (statuses the SDK retries). The Python SDK's README,
//     "Webhook verification", github.com/Increase/increase-python.
//   - Standard Webhooks: https://github.com/standard-webhooks/standard-webhooks
//     (headers, signed content, tolerance).
//
// # Not verifiable without Increase's servers
//
//   - The webhooks guide's own text on signatures could not be read; the
//     scheme comes from Increase's SDKs. Earlier SDK versions verified another
//     header, Increase-Webhook-Signature: t=<RFC 3339 time>,v1=<hex HMAC-SHA256
//     of "<t>.<body>">. Whether Increase still sends it, alone or beside the
//     Standard Webhooks headers, was not checked; it is not accepted here.
//   - What webhook-id holds (the Event id, or an id per delivery): nothing
//     here depends on it; the fake uses the Event id.
//   - Increase's retry schedule, delivery timeout, ordering and source IP
//     addresses: not in the pages read. The fake's schedule is its own.
//   - The titles and details of Increase's error objects; their fields come
//     from the SDK.
//   - Whether the created event of a transfer is delivered before or after
//     acceptance in production: the receiver reads the transfer's state when
//     it fetches, so either order credits once the transfer is accepted.
//   - A transfer returned after acceptance reads as ErrNotAccepted: this
//     package does not report the reversal of a credit already made.
//
// What it may import is checked by TestImportRules (internal/imports).
package increase
