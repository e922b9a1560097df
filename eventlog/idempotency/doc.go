// Package idempotency keeps the Idempotency-Key records (which request
// holds a key, and the sealed answer once it is sent) in an operational KV
// bucket shared by every instance, so a retry on any instance replays the
// first answer. A record costs no synced write: after a crash a retry finds
// the effect in the ledger by the dedup id its claim gave the appends
// (Claim.MsgID), and the answer is rebuilt from there.
package idempotency
