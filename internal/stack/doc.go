// Package stack wires one running instance of the service: the ledger, the
// projections and their projector, the use cases, the dispatcher and the
// HTTP API, plus the control plane that answers operator requests. It is
// wiring only. The binary's serve command and the end-to-end tests both
// build instances with it.
//
// Imports every package of the module but cmd. Imported by cmd/giving and
// the end-to-end tests (e2e).
package stack
