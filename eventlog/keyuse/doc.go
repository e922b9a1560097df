// Package keyuse keeps the hour each API key was last used, in an
// operational KV bucket written off the request path, for the partner's
// list of its keys.
package keyuse
