// Package vault keeps donor phone numbers, the service's only PII, sealed
// with AES-GCM in a JetStream KV bucket of its own (VAULT_<ENV>) that every
// instance shares, and the phone keys the sessions' events are sealed with.
// Erasing a donor overwrites and purges what the vault holds for them
// (crypto-shredding) while the ledger stays intact; the sweep erases what
// nothing refers to any longer. It lives beside the ledger, not in it: the
// ledger is append-only, and the vault is the one store built to forget.
package vault
