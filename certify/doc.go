// Package certify runs the spec's certification sequence against a sandbox
// the way a partner's integration would: through the public API only, with
// a local webhook receiver that verifies every delivery's signature, and
// through the hosted flow's plain HTML forms. It prints a checklist with the
// reason for every failure and cleans up what it registered.
//
// It talks to the service over HTTP only and imports nothing of this module
// but domain (for the signature check). Imported by cmd/giving.
package certify
