// Package delivery keeps what webhook delivery needs beside the ledger,
// each in a JetStream stream or bucket of its own: the work queue of
// delivery jobs and their scheduled retries (Queue), the log of delivery
// attempts per endpoint (AttemptLog) and the progress of webhook recoveries
// (Recoveries). Jobs and attempts are operational records, re-derivable
// from the ledger, so on a single node they are persisted asynchronously,
// off the synced path; a recovery is synced, since its 202 must survive a
// crash.
package delivery
