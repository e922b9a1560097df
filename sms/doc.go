// Package sms verifies donor phones with a one-time code: the hosted flow's
// outbound adapter to an SMS verification vendor. Verifier is the small
// interface the flow's use cases (package app) call; Sandbox sends nothing
// and accepts 000000; Twilio speaks the Twilio Verify HTTP API. It imports
// nothing of this module; the wiring hands a Verifier to app.
//
// The rules (how long a code lives, how many wrong tries lock a session, how
// long a resend waits) are decided in domain, not here: a verifier only
// sends a code and says whether an entered code is the one it sent.
package sms
