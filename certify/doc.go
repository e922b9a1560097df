// Package certify runs the spec's certification sequence against a sandbox
// the way a partner's integration would: through the public API only, with
// a local webhook receiver that verifies every delivery's signature, and
// through the hosted flow's plain HTML forms (both from package sandbox). It
// prints a checklist with the cause of every failure (the answer that was
// wrong, the receiver's error, the address that could not be reached) and
// cleans up what it created: it deletes its webhook endpoint and archives
// its churches.
//
// It talks to the service over HTTP only and imports nothing of this module
// but sandbox. Imported by cmd/giving.
package certify
