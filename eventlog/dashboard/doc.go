// Package dashboard keeps the partner dashboard's sign-in links and
// sessions in a KV bucket of their own, shared by every instance, each
// under the hash of its secret, so a link made on one instance opens on
// another, once, and a session signed in on one is good on all.
package dashboard
