// Package projections keeps the service's read models in a bbolt file, fed
// only by the ledger.
//
// The projector follows the ledger stream in order (eventlog.Ledger.Follow)
// and applies many events per bbolt transaction, storing the last applied
// stream sequence in the same transaction as the read-model changes. A crash
// therefore never applies an event twice or skips one, and a restart resumes
// from the checkpoint. The file is disposable: Rebuild replays the ledger
// from sequence 1 into a new file that is swapped in atomically.
//
// What it may import is checked by TestImportRules (internal/imports).
package projections
