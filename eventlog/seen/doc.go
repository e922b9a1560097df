// Package seen remembers ids for a while in an operational KV bucket that
// every instance shares: the vendor edge keeps there the vendor events it
// has fully handled, so a vendor's replay is acknowledged without being
// handled twice.
package seen
