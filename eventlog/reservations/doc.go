// Package reservations keeps the values that must stay unique (a
// partner's external_id) reserved for the command that is about to store
// one, in a KV bucket every instance shares: one key per value, so the
// commands that store different values neither wait for nor conflict with
// one another, on any instance, where a turn on the partner's whole
// catalogue made every one of them wait for the last.
//
// A reservation is created before the command's event is appended and
// stays while the value is in use. It names its holder (the command's
// dedup id, the same on every run of one request), its instance and boot,
// and the end of its lease: the holder appends its event well before the
// lease ends (the use case's deadline), so once the lease is over, or the
// holder's process is gone (an earlier boot of the same instance), a
// reservation whose value no stored event took is stale and may be taken
// over by the next command, on the revision it read. Whether a stored
// event took the value is not this package's to know: the use case asks
// its projections, caught up with the ledger.
//
// The bucket is operational (eventlog.OperationalBucket): a reservation
// costs no synced write. On a cluster replication keeps it; on a single
// node the newest ones can go with a crash of the server, which the
// service's process shares, and the process then applies the whole ledger
// before it serves, so the projections know every value a lost
// reservation held: the use case asks them before it reserves.
package reservations
