// Package increasesandbox is the sandbox's own Increase, built into the
// service: what the sandbox stack uses where production calls Increase's
// API. It holds no state, so that any instance answers for a deposit
// another instance simulated:
//
//   - A simulated deposit's Inbound ACH Transfer is sealed into its id
//     (AES-GCM under a key derived from the master key, which every instance
//     shares): the simulator names the transfer in the Event it signs and
//     POSTs to the edge, and the edge "fetches" it by opening the id
//     (InboundACHTransfer, an increase.Transfers), exactly where production
//     fetches it from Increase. The id is opaque: the amount, trace and
//     account it carries are not readable in a log.
//   - A church's account numbers are named by ids that encode the church and
//     the account reference the partner chose (AccountNumberID, Owner), so
//     the edge finds the church of a credit without an index.
//   - A church's deposit account (DepositAccount) is derived from its id:
//     the routing number of Increase's documented example Account Number and
//     an account number no real bank issued.
//
// Everything after the "fetch" is production's code: the Standard Webhooks
// signature, the Event, Normalise, the reconciliation.
package increasesandbox
