package delivery_test

import (
	"context"
	"testing"
	"time"

	"github.com/partnergiving/giving/domain"
	"github.com/partnergiving/giving/eventlog/delivery"
	"github.com/partnergiving/giving/eventlog/eventlogtest"
)

// Holds reports an endpoint's consumer and its stored jobs and retries, and
// nothing once the endpoint is dropped; other endpoints are not counted.
func TestDeliveryQueueHolds(t *testing.T) {
	ctx := context.Background()
	l := eventlogtest.Open(t, domain.Sandbox)
	q, err := delivery.OpenQueue(ctx, l, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	partner, ep, other := domain.NewID(domain.PrefixPartner), domain.NewID(domain.PrefixEndpoint), domain.NewID(domain.PrefixEndpoint)
	holds := func(endpoint string) delivery.Holding {
		t.Helper()
		h, err := q.Holds(ctx, partner, endpoint)
		if err != nil {
			t.Fatal(err)
		}
		return h
	}
	if h := holds(ep); h.Consumer || h.Messages != 0 {
		t.Fatalf("an unknown endpoint: %+v", h)
	}
	if err := q.Put(ctx, partner, ep, []byte("job 1")); err != nil {
		t.Fatal(err)
	}
	if err := q.Put(ctx, partner, other, []byte("another endpoint's job")); err != nil {
		t.Fatal(err)
	}
	if err := q.Schedule(ctx, partner, ep, "evt_1", time.Now().Add(time.Hour), []byte("a retry")); err != nil {
		t.Fatal(err)
	}
	if h := holds(ep); h.Consumer || h.Messages != 2 {
		t.Fatalf("a job and a retry, no consumer: %+v", h)
	}
	// A consumer that holds on to the job it is handed.
	handed := make(chan delivery.Job, 1)
	c, err := q.Consume(ctx, partner, ep, 1, time.Minute, func(j delivery.Job) { handed <- j }, func(error) {})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Stop()
	<-handed
	if h := holds(ep); !h.Consumer || h.Messages != 2 {
		t.Fatalf("with a consumer and its job handed out: %+v", h)
	}
	c.Stop()
	if err := q.Drop(ctx, partner, ep); err != nil {
		t.Fatal(err)
	}
	if h := holds(ep); h.Consumer || h.Messages != 0 {
		t.Fatalf("after Drop: %+v", h)
	}
	if h := holds(other); h.Messages != 1 {
		t.Fatalf("the other endpoint after Drop: %+v", h)
	}
}
