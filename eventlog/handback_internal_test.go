package eventlog

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/partnergiving/giving/domain"
)

// A message handed back (nak) comes back at once after the server restarts,
// as it does on a server that keeps running: a service stop stops its
// embedded server too. The server keeps a plain nak only in memory; the
// delayed one nak sends moves the message's time in the consumer's stored
// state. (Half of an e2e test's restarts held such a message for the whole
// ack wait before nak was delayed.)
func TestAHandedBackMessageComesBackAfterARestartOfTheServer(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	open := func() *Ledger {
		l, err := Open(ctx, Config{Env: domain.Sandbox, DataDir: dir})
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	l := open()
	for range 2 {
		if _, err := l.js.Publish(ctx, l.subjects.prefix()+"pt_a.en_a.pub.enrollment.created", []byte(`{}`)); err != nil {
			t.Fatal(err)
		}
	}
	cfg := jetstream.ConsumerConfig{Durable: "handback", AckPolicy: jetstream.AckExplicitPolicy, AckWait: time.Hour}
	cons, err := l.stream.CreateOrUpdateConsumer(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	batch, err := cons.Fetch(2, jetstream.FetchMaxWait(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	var got []jetstream.Msg
	for m := range batch.Messages() {
		got = append(got, m)
	}
	if len(got) != 2 {
		t.Fatalf("fetched %d messages, want 2", len(got))
	}
	HandBack(got[0])
	// The server takes a consumer's acknowledgements in order: once it has
	// answered the second one's, it has taken the nak in too.
	if err := got[1].DoubleAck(ctx); err != nil {
		t.Fatal(err)
	}
	handedBack, _ := got[0].Metadata()
	l.Close()

	l = open()
	defer l.Close()
	if cons, err = l.stream.Consumer(ctx, "handback"); err != nil {
		t.Fatal(err)
	}
	again, err := cons.Fetch(1, jetstream.FetchMaxWait(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	m, ok := <-again.Messages()
	if !ok {
		t.Fatalf("the message handed back (sequence %d) was not handed out again within 5 s of the restart: held for the ack wait (an hour)", handedBack.Sequence.Stream)
	}
	if meta, _ := m.Metadata(); meta.Sequence.Stream != handedBack.Sequence.Stream {
		t.Fatalf("handed out %d after the restart, want %d", meta.Sequence.Stream, handedBack.Sequence.Stream)
	}
}
