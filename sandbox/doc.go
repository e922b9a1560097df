// Package sandbox is the partner's side of a sandbox: what an integration,
// its CI, or a person trying the API needs beside plain HTTP calls. It
// completes a donor's hosted flow through its plain HTML forms as a browser
// without JavaScript would (CompleteFlow), and runs a local webhook receiver
// that verifies every delivery by the spec's rules and acts once per
// event_id (Receiver).
//
// It talks to the service over HTTP only and imports nothing of this module
// but domain (for the signature check). Imported by certify and by the
// "giving sandbox" commands.
package sandbox
