package domain

import (
	"fmt"
	"sort"
)

// Code names one rule that failed. The codes of public problems are the
// slugs of the problem types partners receive (type: /problems/<code>); they
// are stable, because partners branch on them.
type Code string

// Problem is one entry of the service's error catalogue: the failure's code,
// its kind, the HTTP status a partner receives, a title, and an explanation
// served at /problems/<code>. Every *Error the service makes comes from an
// entry, so a code, its status and its documentation are declared once.
type Problem struct {
	Code   Code
	Kind   Kind
	Status int
	Title  string
	// About explains, for the catalogue page, when it happens and what to do.
	About string
	// Flow marks codes of the hosted flow: shown to donors as pages or form
	// messages, never sent to partners as problem+json.
	Flow bool
	// Field and Message are, for a flow code shown on the donor's form,
	// the form field it is about ("" for the page as a whole) and what the
	// donor reads, in the donor's words. A flow code without a Message is
	// not shown: the donor is taken to where they stand.
	Field, Message string
}

// TypeURI is the problem's type member, relative to the service, which
// serves its description at that address.
func (p Problem) TypeURI() string { return "/problems/" + string(p.Code) }

// New makes an error of this problem with a sentence for the caller.
func (p Problem) New(format string, args ...any) *Error {
	return &Error{Kind: p.Kind, Code: p.Code, Detail: fmt.Sprintf(format, args...)}
}

var problems = map[Code]Problem{}

func define(p Problem) Problem {
	if _, dup := problems[p.Code]; dup {
		panic("domain: problem defined twice: " + string(p.Code))
	}
	problems[p.Code] = p
	return p
}

// ProblemFor returns the catalogue entry of code.
func ProblemFor(code Code) (Problem, bool) {
	p, ok := problems[code]
	return p, ok
}

// Problems lists the problem types partners can receive, sorted by code.
func Problems() []Problem {
	out := make([]Problem, 0, len(problems))
	for _, p := range problems {
		if !p.Flow {
			out = append(out, p)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Code < out[j].Code })
	return out
}

// The catalogue of problems partners can receive.
var (
	ProblemUnauthorized = define(Problem{Code: "unauthorized", Kind: KindUnauthorized, Status: 401, Title: "Unauthorized",
		About: "The request has no valid API key for this stack. Send Authorization: Bearer sk_test_... on the sandbox or sk_live_... in production. Missing, malformed, unknown, revoked and wrong-stack keys all get this same answer."})
	ProblemNotFound = define(Problem{Code: "not-found", Kind: KindNotFound, Status: 404, Title: "Not found",
		About: "No such route, or no such resource visible to this partner. A resource of another partner is reported the same way as one that does not exist."})
	ProblemMethodNotAllowed = define(Problem{Code: "method-not-allowed", Kind: KindInvalid, Status: 405, Title: "Method not allowed",
		About: "The route exists but not for this method. The Allow header lists the methods it takes."})
	ProblemMalformedRequest = define(Problem{Code: "malformed-request", Kind: KindInvalid, Status: 400, Title: "Malformed request",
		About: "The HTTP request itself could not be parsed, before any route saw it: a malformed request line, path or header, a bad Content-Length, an unsupported Transfer-Encoding or HTTP version. The detail says which when it is known. Fix the client's request; retrying it unchanged fails the same way."})
	ProblemHeadersTooLarge = define(Problem{Code: "headers-too-large", Kind: KindInvalid, Status: 431, Title: "Request headers too large",
		About: "The request's headers exceed 1 MiB in all. Send fewer or shorter headers."})
	ProblemMalformedJSON = define(Problem{Code: "malformed-json", Kind: KindInvalid, Status: 400, Title: "Malformed JSON",
		About: "The request body is not a single valid JSON value of the expected shape."})
	ProblemUnsupportedMedia = define(Problem{Code: "unsupported-media-type", Kind: KindInvalid, Status: 415, Title: "Unsupported media type",
		About: "Request bodies must be sent with Content-Type: application/json."})
	ProblemPayloadTooLarge = define(Problem{Code: "payload-too-large", Kind: KindInvalid, Status: 413, Title: "Payload too large",
		About: "The request body exceeds 1 MiB."})
	ProblemBatchTooLarge = define(Problem{Code: "batch-too-large", Kind: KindInvalid, Status: 413, Title: "Batch too large",
		About: "A church import holds at most 1000 rows. Split the batch."})
	ProblemValidation = define(Problem{Code: "validation-error", Kind: KindInvalid, Status: 422, Title: "Validation failed",
		About: "One or more fields are invalid. The errors list names each field and what is wrong with it."})
	ProblemInvalidRow = define(Problem{Code: "invalid-row", Kind: KindInvalid, Status: 422, Title: "Invalid row",
		About: "One row of a batch is invalid. The row is rejected on its own and the rest of the batch goes ahead."})
	ProblemExternalIDTaken = define(Problem{Code: "external-id-taken", Kind: KindConflict, Status: 409, Title: "external_id already used",
		About: "The partner already has a church with this external_id, or the batch repeats it. The row is rejected on its own."})
	ProblemChurchArchived = define(Problem{Code: "church-archived", Kind: KindConflict, Status: 409, Title: "Church archived",
		About: "The church is archived: it stays readable, but takes no new donor sessions and cannot be changed. Its existing enrollments go on."})
	ProblemIdempotencyKeyMissing = define(Problem{Code: "idempotency-key-missing", Kind: KindInvalid, Status: 400, Title: "Idempotency-Key required",
		About: "Every POST and PATCH must carry an Idempotency-Key header of 1 to 255 visible ASCII characters."})
	ProblemIdempotencyKeyInvalid = define(Problem{Code: "idempotency-key-invalid", Kind: KindInvalid, Status: 400, Title: "Idempotency-Key invalid",
		About: "The Idempotency-Key header must be 1 to 255 visible ASCII characters (0x21 to 0x7E)."})
	ProblemIdempotencyKeyReused = define(Problem{Code: "idempotency-key-reused", Kind: KindInvalid, Status: 422, Title: "Idempotency-Key reused",
		About: "This key was already used with a different request (method, path or body). Use a new key for a new request."})
	ProblemIdempotencyInFlight = define(Problem{Code: "idempotency-key-in-use", Kind: KindConflict, Status: 409, Title: "Request in progress",
		About: "A request with this key is still running. Retry after the time in Retry-After to get its result."})
	ProblemRateLimited = define(Problem{Code: "rate-limited", Kind: KindInvalid, Status: 429, Title: "Too many requests",
		About: "The API key exceeded its rate limit. Wait for the time in Retry-After; RateLimit and RateLimit-Policy describe the budget."})
	ProblemConflict = define(Problem{Code: "conflict", Kind: KindConflict, Status: 409, Title: "Conflict",
		About: "The request clashes with the resource's current state."})
	ProblemInvalidTransition = define(Problem{Code: "invalid-transition", Kind: KindConflict, Status: 409, Title: "Not allowed in the current status",
		About: "The enrollment's current status does not allow this move; the detail names the status and what it allows. A pending enrollment can be canceled or updated; an active one paused, canceled or updated; a paused one resumed, canceled or updated; while the donor's consent to a higher value is pending (pending_consent) only a cancel is allowed; canceled and ended are final. A move to the status the enrollment already has is not an error: it answers 200 and changes nothing."})
	ProblemNotSubscribed = define(Problem{Code: "not-subscribed", Kind: KindInvalid, Status: 422, Title: "Not subscribed",
		About: "The webhook endpoint does not subscribe to the event's type. Resend and recover send an endpoint only the events it would have received."})
	ProblemEndpointDisabled = define(Problem{Code: "endpoint-disabled", Kind: KindConflict, Status: 409, Title: "Endpoint disabled",
		About: "The webhook endpoint is disabled, so nothing is sent to it. Enable it first (POST /v1/webhook_endpoints/{id}/enable)."})
	ProblemKeyInUse = define(Problem{Code: "key-in-use", Kind: KindConflict, Status: 409, Title: "Key in use",
		About: "An API key cannot revoke itself: the request would lock its own caller out. Revoke it with another of your keys, or roll it (POST /v1/api_keys/roll) with expire_current_in 0."})
	ProblemInvalidRange = define(Problem{Code: "invalid-range", Kind: KindInvalid, Status: 400, Title: "Invalid range",
		About: "A recovery needs exactly one of since (an RFC 3339 time within the last 30 days) and since_cursor (a next_cursor of GET /v1/events), and an optional until after the start. Nothing older than 30 days is recovered."})
	ProblemInvalidCursor = define(Problem{Code: "invalid-cursor", Kind: KindInvalid, Status: 400, Title: "Invalid cursor",
		About: "The cursor was not issued by this service to this partner, or was altered. Use a next_cursor exactly as returned, or omit it to start over."})
	ProblemInternal = define(Problem{Code: "internal-error", Kind: KindInternal, Status: 500, Title: "Internal error",
		About: "Something failed on our side. Nothing about it is in this response; quote request_id to support. The request may be retried with the same Idempotency-Key."})
	ProblemUnavailable = define(Problem{Code: "service-unavailable", Kind: KindUnavailable, Status: 503, Title: "Service unavailable",
		About: "The service cannot reach its ledger right now. Retry later with the same Idempotency-Key."})
	ProblemOutcomeUnknown = define(Problem{Code: "outcome-unknown", Kind: KindUnavailable, Status: 503, Title: "Outcome not recorded",
		About: "The request ran, or may have, but its answer could not be recorded safely: the service lost its ledger or its key store meanwhile, or the request ran past its time limit. Retry after the time in Retry-After with the same Idempotency-Key and the same request: the retry answers with the original result and never makes a second effect."})

	// The vendor edge's problems.
	ProblemInvalidSignature = define(Problem{Code: "invalid-signature", Kind: KindUnauthorized, Status: 401, Title: "Invalid signature",
		About: "The vendor webhook's signature, in the vendor's own header (X-Webhook-Sign for Truv at /edge/payroll, webhook-signature for Increase at /edge/bank, Stripe-Signature for Stripe Identity at /edge/kyc), is missing, malformed, too old where the vendor signs a time (five minutes for Increase and Stripe), or does not match the raw body. The status is the one the vendor expects: 400 for Stripe, 401 for the others."})
	ProblemUnknownReference = define(Problem{Code: "unknown-reference", Kind: KindInvalid, Status: 422, Title: "Unknown reference",
		About: "The vendor webhook names a church, enrollment or donor that does not exist, or that belong to different partners."})
	ProblemTraceConflict = define(Problem{Code: "trace-conflict", Kind: KindConflict, Status: 409, Title: "Trace already used",
		About: "The bank trace was already credited with a different church, account or amount. It is not credited again."})

	// The sandbox simulators' problem.
	ProblemEdgeUnreachable = define(Problem{Code: "edge-unreachable", Kind: KindUnavailable, Status: 502, Title: "Edge unreachable",
		About: "The simulator could not reach the service's public webhook edge. Check the service's public URL (--public-url)."})
)

// The hosted flow's codes: each is a page or a message on the donor's form.
// The flow's pages name them in their address (?e=<code>) after a form, so
// that a refresh shows the same message; every message the flow shows is
// one of these.
var (
	flowLinkUsed      = define(Problem{Code: "link-used", Kind: KindForbidden, Status: 403, Title: "Link already used", Flow: true})
	flowSessionClosed = define(Problem{Code: "session-closed", Kind: KindConflict, Status: 409, Title: "Session closed", Flow: true})
	flowWrongStep     = define(Problem{Code: "wrong-step", Kind: KindConflict, Status: 409, Title: "Wrong step", Flow: true})
	flowResendTooSoon = define(Problem{Code: "resend-too-soon", Kind: KindConflict, Status: 409, Title: "Resend too soon", Flow: true,
		Field: "send", Message: "Please wait a few seconds before asking for another code."})
	flowCodeExpired = define(Problem{Code: "code-expired", Kind: KindInvalid, Status: 422, Title: "Code expired", Flow: true,
		Field: "code", Message: "That code has expired. Send a new code."})
	flowNoCode = define(Problem{Code: "no-code", Kind: KindInvalid, Status: 422, Title: "No code sent", Flow: true,
		Field: "send", Message: "Send a code to your phone first."})

	// FlowCodeFormat and the codes after it are the flow's own checks of a
	// form, made before any rule of the session's.
	FlowCodeFormat = define(Problem{Code: "code-format", Kind: KindInvalid, Status: 422, Title: "Code malformed", Flow: true,
		Field: "code", Message: "Enter the 6-digit code from the text message."})
	FlowCodeWrong = define(Problem{Code: "code-wrong", Kind: KindInvalid, Status: 422, Title: "Code wrong", Flow: true,
		Field: "code", Message: "That code is not right."})
	FlowSMSFailed = define(Problem{Code: "sms-failed", Kind: KindUnavailable, Status: 503, Title: "Text message service unreachable", Flow: true,
		Field: "send", Message: "We could not reach the text message service. Please try again in a moment."})
	FlowConsentMissing = define(Problem{Code: "consent-missing", Kind: KindInvalid, Status: 422, Title: "Consent missing", Flow: true,
		Field: "consent", Message: "Tick both boxes to continue."})
	FlowConsentChanged = define(Problem{Code: "consent-changed", Kind: KindConflict, Status: 409, Title: "Consent text changed", Flow: true,
		Field: "consent", Message: "The terms were updated. Please read them again."})
	FlowPayrollUnavailable = define(Problem{Code: "payroll-unavailable", Kind: KindUnavailable, Status: 503, Title: "Payroll connection service unreachable", Flow: true,
		Field: "connect", Message: "We could not open the payroll connection just now. Please try again in a moment."})
	FlowIdentityUnavailable = define(Problem{Code: "identity-unavailable", Kind: KindUnavailable, Status: 503, Title: "Identity check unreachable", Flow: true,
		Field: "identity", Message: "We could not reach the identity check. Please try again in a moment."})
)

// FlowMessage is the message the flow shows for code, if it shows one.
func FlowMessage(code Code) (Problem, bool) {
	p, ok := problems[code]
	return p, ok && p.Flow && p.Message != ""
}
