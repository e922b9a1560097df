package eventlog_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/partnergiving/giving/domain"
	"github.com/partnergiving/giving/eventlog"
	"github.com/partnergiving/giving/eventlog/delivery"
	"github.com/partnergiving/giving/telemetry"
)

// An endpoint's delivery-queue consumer that receives nothing while jobs
// wait for it (paused here) is stopped, counted and reported to the
// dispatcher, which starts it again.
func TestAStalledDeliveryConsumerIsStopped(t *testing.T) {
	ctx := context.Background()
	restore := eventlog.SetStallAfterForTest(400 * time.Millisecond)
	t.Cleanup(restore)
	metrics := telemetry.NewMetrics()
	l, err := eventlog.Open(ctx, eventlog.Config{Env: domain.Sandbox, DataDir: t.TempDir(), Metrics: metrics})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(l.Close)
	q, err := delivery.OpenQueue(ctx, l, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	reported := make(chan error, 1)
	c, err := q.Consume(ctx, "pt_a", "we_a", 4, time.Minute, func(j delivery.Job) { t.Errorf("a paused consumer handed out %s", j.Subject()) },
		func(err error) {
			if errors.Is(err, eventlog.ErrStalled) {
				reported <- err
			}
		})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Stop()
	if _, err := l.JetStream().PauseConsumer(ctx, "DELIVERIES_SANDBOX", "deliver_we_a", time.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if err := q.Put(ctx, "pt_a", "we_a", []byte(`{}`)); err != nil {
		t.Fatal(err)
	}
	select {
	case <-reported:
	case <-time.After(20 * 400 * time.Millisecond):
		t.Fatal("the stalled consumer was not reported")
	}
	select {
	case <-c.Closed():
	case <-time.After(10 * time.Second):
		t.Fatal("the stalled consumer was not stopped")
	}
	if n := eventlog.StallsForTest(t, metrics, telemetry.ConsumerDeliveryQueue); n != 1 {
		t.Fatalf("%v stalls counted, want 1", n)
	}
}
