// Package accountnumbers keeps which church each bank account number
// belongs to: the index the bank's incoming credits are reconciled by. The
// bank names the account number a credit arrived on by its own id (an
// Increase Account Number id), never by the church; the service opens one
// per church and records the pair here before it hands the number out, so
// that a credit to it finds its church on any instance.
//
// It is a KV bucket every instance shares, stored like the ledger (file
// storage, the ledger's replicas, a synced write): losing a pair would leave
// a church's money unreconciled. It holds ids only, never an account or
// routing number.
package accountnumbers
