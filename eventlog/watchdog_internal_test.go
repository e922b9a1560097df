package eventlog

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/partnergiving/giving/domain"
	"github.com/partnergiving/giving/telemetry"
)

// A follower whose ordered consumer cannot be made again (here the stream
// no longer takes its filter, as a cluster that lost its leader refused
// it) would
// retry in silence for ever inside nats.go. Its watchdog sees events wait
// past what it received and ends the follow with ErrStalled, counted;
// the caller's next follow, once the server takes consumers again,
// reads on from where the first stopped.
func TestAStalledFollowerIsTornDown(t *testing.T) {
	ctx := context.Background()
	l, metrics := openWatched(t)
	publish := func() {
		t.Helper()
		if _, err := l.js.Publish(ctx, l.subjects.prefix()+"pt_a.en_a.pub.enrollment.created", []byte(`{}`)); err != nil {
			t.Fatal(err)
		}
	}
	publish()
	var got atomic.Uint64
	done := make(chan error, 1)
	go func() {
		done <- l.Follow(ctx, 1, 10, func(recs []Record) error {
			got.Store(recs[len(recs)-1].Seq)
			return nil
		})
	}()
	waitUntil(t, func() bool { return got.Load() == 1 })

	// The stream no longer takes the follower's filter, and the
	// follower's consumer is gone: nats.go keeps trying to make it again.
	info, err := l.stream.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	moved := info.Config
	moved.Subjects = []string{"elsewhere.>"}
	if _, err := l.js.UpdateStream(ctx, moved); err != nil {
		t.Fatal(err)
	}
	for c := range l.stream.ListConsumers(ctx).Info() {
		if err := l.stream.DeleteConsumer(ctx, c.Name); err != nil {
			t.Fatal(err)
		}
	}
	// The ledger moves on past what the follower received.
	if _, err := l.js.Publish(ctx, "elsewhere.x", []byte(`{}`)); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if !errors.Is(err, ErrStalled) {
			t.Fatalf("the follow ended with %v, want ErrStalled", err)
		}
	case <-time.After(20 * stallAfter):
		t.Fatalf("the follow still waits %s after the ledger moved past what it received", 20*stallAfter)
	}
	if n := stalls(t, metrics, telemetry.ConsumerFollower); n != 1 {
		t.Fatalf("%v stalls counted, want 1", n)
	}

	// The server takes the follower's consumer again: the next follow
	// reads on.
	if _, err := l.js.UpdateStream(ctx, info.Config); err != nil {
		t.Fatal(err)
	}
	publish()
	fctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		_ = l.Follow(fctx, got.Load()+1, 10, func(recs []Record) error {
			got.Store(recs[len(recs)-1].Seq)
			return nil
		})
	}()
	waitUntil(t, func() bool { return got.Load() == 3 })

	// A follower with nothing new to read is not stalled, however long
	// it waits.
	time.Sleep(4 * stallAfter)
	if n := stalls(t, metrics, telemetry.ConsumerFollower); n != 1 {
		t.Fatalf("%v stalls counted after an idle wait, want still 1", n)
	}
}

// waitUntil polls cond until it holds, for at most ten seconds.
func waitUntil(t *testing.T, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("timed out")
		}
	}
}

// stalls reads giving_ledger_consumer_stalls_total of consumer.
func stalls(t *testing.T, m *telemetry.Metrics, consumer string) float64 {
	t.Helper()
	families, err := m.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != "giving_ledger_consumer_stalls_total" {
			continue
		}
		for _, s := range f.GetMetric() {
			for _, lp := range s.GetLabel() {
				if lp.GetName() == "consumer" && lp.GetValue() == consumer {
					return s.GetCounter().GetValue()
				}
			}
		}
	}
	t.Fatalf("no giving_ledger_consumer_stalls_total{consumer=%q}", consumer)
	return 0
}

// A shared reader that receives nothing while events wait on the server to
// be handed out (here its consumer is paused, as a consumer whose pulls
// the server lost) ends its consuming with ErrStalled, counted, so its
// owner consumes again; once the server hands events out again, they
// arrive.
func TestAStalledSharedReaderIsTornDown(t *testing.T) {
	ctx := context.Background()
	l, metrics := openWatched(t)
	r, err := l.OpenSharedReader(ctx, SharedReaderConfig{Name: "stalled", Hold: time.Minute, MaxOut: 100}, func(error) {})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.js.PauseConsumer(ctx, l.name, "stalled", time.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if _, err := l.js.Publish(ctx, l.subjects.prefix()+"pt_a.en_a.pub.enrollment.created", []byte(`{}`)); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	err = r.Consume(ctx, 10, func(ds []Delivery) { t.Errorf("a paused consumer handed out %d events", len(ds)) })
	if !errors.Is(err, ErrStalled) {
		t.Fatalf("the consuming ended with %v, want ErrStalled", err)
	}
	if d := time.Since(start); d > 20*stallAfter {
		t.Fatalf("torn down after %s", d)
	}
	if n := stalls(t, metrics, telemetry.ConsumerSharedReader); n != 1 {
		t.Fatalf("%v stalls counted, want 1", n)
	}

	if _, err := l.js.ResumeConsumer(ctx, l.name, "stalled"); err != nil {
		t.Fatal(err)
	}
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var handed atomic.Int32
	go func() {
		_ = r.Consume(cctx, 10, func(ds []Delivery) {
			for _, d := range ds {
				d.Ack()
				handed.Add(1)
			}
		})
	}()
	waitUntil(t, func() bool { return handed.Load() == 1 })
}

// openWatched opens a ledger of its own whose watchdogs find a stall after
// 400 ms, and the metrics it counts them in.
func openWatched(t *testing.T) (*Ledger, *telemetry.Metrics) {
	t.Helper()
	old := stallAfter
	stallAfter = 400 * time.Millisecond
	t.Cleanup(func() { stallAfter = old })
	metrics := telemetry.NewMetrics()
	l, err := Open(context.Background(), Config{Env: domain.Sandbox, DataDir: t.TempDir(), Metrics: metrics})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(l.Close)
	return l, metrics
}
