package increasefake

import (
	"embed"
)

// The examples are fixtures written from the shapes Increase documents, with
// the documented examples' values (examples/README.md names the pages). They
// are exported so that a test elsewhere (the edge's, an end-to-end one) can
// replay what Increase documents, not what this package builds.
//
//go:embed examples/*.json
var examples embed.FS

// ExampleInboundACHTransfer is the API reference's example Inbound ACH
// Transfer: an accepted credit of 100 cents, trace 021000038461022, to
// account number account_number_v18nkfqm6afpsrvy82b2.
func ExampleInboundACHTransfer() []byte { return example("inbound_ach_transfer_accepted.json") }

// ExampleEvent is an Event as the webhooks guide shows one, announcing the
// example transfer with the category inbound_ach_transfer.created.
func ExampleEvent() []byte { return example("event_inbound_ach_transfer_created.json") }

func example(name string) []byte {
	b, err := examples.ReadFile("examples/" + name)
	if err != nil {
		panic("increasefake: missing embedded example " + name)
	}
	return b
}
