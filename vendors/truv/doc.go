// Package truv is the service's adapter to Truv, the payroll-connectivity
// vendor that moves part of a donor's paycheck into a church's account by
// a direct deposit switch. It holds Truv's API client (the one call the
// service needs: open Truv Bridge on a switch), Truv's webhook signature
// scheme, and the reduction of Truv's webhooks to four outcomes. The
// sub-package truvfake is a local Truv written from the same pages, for
// tests and for the sandbox's stand-in.
//
// # Why Truv
//
// Of the four payroll vendors considered (Pinwheel, Atomic, Argyle, Truv),
// Truv is the one whose own reference pages could be read for every detail
// used here, next to Truv's own quickstart and demo applications; Pinwheel,
// the closest alternative, could be read only through third-party copies
// of its API description. Truv's
// bridge token carries the whole switch server-side: the target account
// (routing and account number, type, bank name) and the allocation
// (deposit_type percent or amount, deposit_value), so the donor cannot
// change where the money goes or how much. The donor signs in to payroll
// inside Truv Bridge, Truv's hosted widget, and the service never sees the
// credentials. Truv signs every webhook with HMAC-SHA256 over the raw body.
//
// # The flow
//
//  1. StartSwitch: POST /v1/users/ with external_user_id (the donor id, and
//     nothing else about the donor), then POST /v1/users/{user_id}/tokens/
//     with product_type deposit_switch, client_name, tracking_info (the
//     caller's Reference, e.g. the enrollment id) and the account block.
//  2. The flow page loads Truv Bridge (BridgeScriptURL) and calls
//     TruvBridge.init({bridgeToken, onSuccess, onClose}). The donor signs
//     in; Truv writes the allocation into the payroll provider.
//  3. Truv POSTs webhooks to the edge. Verifier checks X-WEBHOOK-SIGN and
//     ParseEvent reduces each to one outcome.
//
// # Event mapping
//
//	Truv webhook (product deposit_switch)        outcome          service event
//	task-status-updated, status switch_deposit   SwitchSubmitted  enrollment.created
//	task-status-updated, status done             SwitchConfirmed  enrollment.activated
//	task-status-updated, a terminal error status SwitchFailed     payroll step failed
//	link-deleted                                 SwitchReverted   enrollment.ended
//	anything else                                ErrIgnored       none (answer 2xx)
//
// # Pages followed
//
//   - API introduction and authentication (X-Access-Client-Id,
//     X-Access-Secret; one host for every environment):
//     https://docs.truv.com/reference
//   - Create a user: https://docs.truv.com/api-reference/users/users_create
//     and The Users object: https://docs.truv.com/api-reference/users/object
//   - Create a bridge token: https://docs.truv.com/reference/users_tokens,
//     The Bridge Token object: https://docs.truv.com/api-reference/bridge-token/object
//   - Direct Deposit Switch (required account fields):
//     https://docs.truv.com/docs/user-experience-dds,
//     https://docs.truv.com/banking/integration/dds and
//     Direct Deposit Switch Testing:
//     https://docs.truv.com/developers/testing/direct-deposit-switch
//   - Errors & Rate Limits (error object, 404 detail, 429, 300/minute):
//     https://docs.truv.com/api-reference/errors
//   - Webhooks (headers, X-WEBHOOK-SIGN, v1= prefix, HMAC-SHA256 of the raw
//     body with the access secret): https://docs.truv.com/api-reference/webhooks
//   - Task Webhook Events: https://docs.truv.com/api-reference/tasks/events;
//     Task Lifecycle (statuses, switch_deposit, error states):
//     https://docs.truv.com/api-reference/tasks/lifecycle;
//     Account Link Webhook Events: https://docs.truv.com/api-reference/links/events
//   - Bridge Events (TruvBridge.init callbacks):
//     https://docs.truv.com/developers/sdks/bridge-events
//   - Truv's own code: github.com/truvhq/quickstart (golang/truv.go: field
//     names, deposit_value as a string) and github.com/truvhq/demo-apps
//     (server/webhooks.js: the signature; the Bridge script URL; deposit
//     types "percent" and "amount").
//
// # Not checked without Truv's servers
//
//   - Whether production Truv accepts a user with external_user_id alone:
//     the Users page marks first_name and last_name with an asterisk that
//     its note ties to document processing only.
//   - Truv documents no idempotency key. A retry passes the Truv user id
//     from the first attempt (SwitchRequest.UserID); a bridge token is
//     short-lived and safe to mint again.
//   - Which error.code strings Truv sends on 403 (refused credentials) and
//     429: the page's table was not readable in full. The client relies on
//     the status only, and the fake marks its own codes "fake_...".
//   - The exact form of event_created_at and whether every task event
//     carries tracking_info (link, employment and bank-account events list
//     it; the task events table was cut off, and Truv's demo application
//     reports task events without user_id). ParseEvent also returns UserID
//     and LinkID, so the edge can find the enrollment without tracking_info.
//   - Whether Truv percent allocations accept two decimals: Truv reports a
//     per-provider percent_precision. The client sends what the donor chose.
//   - Truv's retry schedule for webhooks and which status it expects on a
//     refused one; the edge should answer 401 to a bad signature, like
//     Truv's demo application.
//   - Bridge's locale field name: the bridge token takes a locale (ISO 639),
//     but the field's name was not visible, so none is sent.
//   - Which origins Truv Bridge loads frames from; a CSP must allow at least
//     BridgeOrigin for the script.
//   - A switch undone at the payroll provider: Truv documents no webhook
//     for it (see SwitchReverted).
package truv

// BridgeScriptURL is Truv Bridge's web script, as Truv's demo application
// loads it. The flow page that opens Bridge loads this and nothing else.
const BridgeScriptURL = "https://cdn.truv.com/bridge.js"

// BridgeOrigin is the origin of BridgeScriptURL, for the page's CSP.
const BridgeOrigin = "https://cdn.truv.com"
