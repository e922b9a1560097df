// Package increasebank is the service's bank port (app.Bank) on Increase:
// Live opens each church's deposit account as an Increase Account Number
// and keeps the index that reconciles a credit to its church; Sandbox is
// the same port on the sandbox's built-in Increase (increasesandbox). The
// stack picks one by environment; nothing else knows which runs.
package increasebank
