// Package dispatcher pushes partner events to their webhook endpoints.
//
// It runs in every instance and shares its work through JetStream, so
// instances split deliveries between them and a delivery's state survives a
// restart or moves to another instance:
//
//   - Fan-out: a durable consumer on the ledger's public events, shared by all
//     instances. For each event it waits until the local projections have
//     applied it, finds the partner's endpoints subscribed to its type, and
//     enqueues one delivery job per endpoint on the DELIVERIES_<ENV> work
//     queue (deduplicated by event and endpoint). The ledger message is
//     acknowledged once the jobs are stored.
//   - Delivery: one durable consumer per endpoint on the work queue, shared by
//     all instances, whose MaxAckPending is the endpoint's concurrency. The
//     server never hands out more of an endpoint's jobs at once, so a slow,
//     hanging or dead endpoint holds only its own slots and never delays
//     another endpoint or partner. Each job runs on its own goroutine.
//   - Retries: a failed attempt acknowledges its job and stores the next one
//     as a JetStream scheduled message (Nats-Schedule: @at ...), which the
//     server moves back onto the endpoint's queue when it is due. Waiting
//     retries hold no consumer slot and no memory, and survive restarts.
//   - Attempts go to the attempt log (eventlog.AttemptLog), never the ledger.
//
// Every connection goes through the SSRF guard: the receiver's host is
// resolved, every address checked against the stack's policy, and the
// connection pinned to a checked address, so a name cannot be re-pointed at
// an internal address between the check and the connection.
//
// Real and test deliveries are signed by domain.Sign, the one signer.
// Imports: domain, eventlog, projections, telemetry. Imported by the wiring, which also
// hands it to app as the app.Webhooks the endpoint use cases call.
package dispatcher
