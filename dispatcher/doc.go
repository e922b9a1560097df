// Package dispatcher pushes partner events to their webhook endpoints.
//
// It runs in every instance and shares its work through JetStream, so
// instances split deliveries between them and a delivery's state survives a
// restart or moves to another instance:
//
//   - Endpoint table (endpoints.go): every instance keeps every endpoint in
//     memory, a copy of the projections' endpoints brought up to date after
//     each batch they apply (read again only when an endpoint changed), so
//     neither the fan-out nor an attempt reads or decodes an endpoint from
//     the projections file per job, and an endpoint's secrets are opened
//     once per change of them.
//   - Fan-out: a durable consumer on the ledger's public events, shared by all
//     instances. For each batch it waits for this instance's projections, so
//     a partner reading the event (GET /v1/events/{id}) or its resource from
//     this instance on receiving the webhook finds it, and brings the
//     endpoint table up to them (so it knows every endpoint created or
//     deleted before each event); it finds the partner's endpoints
//     subscribed to each event's type, and pushes one first attempt per
//     endpoint to that endpoint's pusher in this instance, with the event's
//     bytes in hand. The ledger event is
//     acknowledged once all its jobs are settled; until then the consumer
//     hands it out again after a crash (delivery is at least once).
//   - Push (push.go): an endpoint's pusher runs --webhook-concurrency attempts
//     at once and holds a small backlog. A job that finds the backlog full for
//     200 ms (a slow or hanging endpoint) is spilled to the DELIVERIES_<ENV>
//     work queue instead, so such an endpoint holds only its own slots and
//     never delays another endpoint or partner. A successful first attempt
//     writes nothing synchronously.
//   - Queue: one durable consumer per endpoint on the work queue, shared by all
//     instances, runs spilled jobs and due retries; its attempts take the same
//     endpoint slots as pushed ones.
//   - Retries: a failed attempt acknowledges its job and stores the next one
//     as a JetStream scheduled message (Nats-Schedule: @at ...), which the
//     server moves back onto the endpoint's queue when it is due. Waiting
//     retries hold no consumer slot and no memory, and survive restarts.
//   - Attempts go to the attempt log (delivery.AttemptLog), never the ledger;
//     a success is logged without waiting for the server.
//     Each carries the start of the endpoint's run of failures; once every
//     attempt failed for Config.DisableAfter the endpoint is disabled
//     (app.Service.FailEndpoint). A disabled endpoint gets no job and its
//     queued retries are settled unsent.
//   - Resends (Resend) are single attempts put on the endpoint's queue;
//     recoveries (recover.go) are stored with their position and run one
//     event at a time, in ledger order, in the endpoint's slots, under a
//     lease that another instance takes over after a crash.
//
// Every connection goes through the SSRF guard: the receiver's host is
// resolved, every address checked against the stack's policy, and the
// connection pinned to a checked address, so a name cannot be re-pointed at
// an internal address between the check and the connection.
//
// Real and test deliveries are signed by domain.WebhookSigner, the one
// signer, made per endpoint from its opened secrets (signerOf): during a
// rotation's overlap it signs with the previous secret too, and for an
// ed25519 endpoint webhook-signature is v1a by its private key. The endpoint
// table drops a signer whose endpoint's secrets changed. An edit of an
// endpoint reaches every attempt not yet made: attempts read the address
// from the table, and an event of a type no longer subscribed to is settled
// unsent.
//
// It is built inside app.New, given the service as its EndpointDisabler,
// and is the app.Webhooks the endpoint use cases call: neither is wired to
// the other after construction. What it may import is checked by
// TestImportRules (internal/imports).
package dispatcher
