// Package truvfake is a local Truv, written from Truv's public pages (named
// in package truv's documentation and on each handler here), for tests and
// for the sandbox's stand-in payroll vendor.
//
// It serves, on one origin:
//
//   - POST /v1/users/ and POST /v1/users/{user_id}/tokens/: the two API calls
//     the service makes. Each request is checked as Truv documents it
//     (X-Access-Client-Id and X-Access-Secret, a JSON body, product_type
//     from Truv's list, the account block a deposit switch requires, a
//     deposit_type of entire, percent or amount with a deposit_value in
//     range), answered with Truv's success bodies or its error object (the
//     {"detail": "Not Found."} shape on a 404), and recorded with its
//     headers and raw body so a test can assert what left the service.
//   - /bridge.js: a stand-in of Truv Bridge's script with the same
//     TruvBridge.init and open/close, so a flow page works unchanged
//     against the fake.
//   - /bridge/{bridge_token}: the stand-in widget. It shows the switch the
//     token carries and a sign-in form; user_good succeeds and user_bad
//     fails. On completion it sends Truv's webhooks for the task, signed
//     with the account's secret, to the configured webhook URL: the
//     service's production edge route.
//
// User ids and bridge tokens are sealed with the account's secret rather
// than looked up, so every service instance that mounts the fake (with
// Config.PublicURL when under a path) accepts what another issued.
//
// Send builds, signs and POSTs any of the four outcomes, which is what the
// sandbox simulators need. FailNext and SetDelay make Truv refuse, fall
// over or slow down.
//
// Where Truv's pages do not say something the fake has to answer (the
// error.code on a 403, a 5xx body), the fake's answer is marked as its own
// ("fake_..." codes), so no test comes to depend on it.
package truvfake
