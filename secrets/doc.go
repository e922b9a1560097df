// Package secrets holds the service's master key and what is derived from
// it: a key per purpose (the cursor MAC, the donor-id hash, the CSRF and
// idempotency fingerprint keys) and AES-GCM sealers for the records kept
// encrypted (the vault's phones, stored webhook secrets, idempotent
// answers). It is files and crypto only, nothing of NATS, so the packages
// that seal (the vault, the idempotency records) and the ones that only
// derive keys (the API, the wiring) share it without reaching the ledger.
package secrets
