package eventlog

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/segmentio/ksuid"

	"github.com/partnergiving/giving/domain"
)

// BenchmarkGroupCommit answers the write-path question "does a JetStream
// atomic batch make several appends durable for the price of one synced
// write?" on the embedded server with the ledger's settings (every write
// synced before it is acknowledged). It compares, at the same number of
// messages in flight, single synced publishes with atomic batches
// (Nats-Batch-Id / Nats-Batch-Sequence / Nats-Batch-Commit, nats-server
// 2.12+) of several sizes. Each message is 500 B on its own subject, as the
// raw limit of `giving bench`:
//
//	go test ./eventlog -run '^$' -bench GroupCommit -benchtime 5s -count 3
func BenchmarkGroupCommit(b *testing.B) {
	for _, c := range []struct{ publishers, batch int }{
		{16, 1}, {64, 1}, // single synced publishes: 16 and 64 in flight
		{4, 4}, {1, 16}, // 16 in flight, in batches
		{4, 16}, {1, 64}, // 64 in flight, in batches
	} {
		name := "singles/in-flight=" + strconv.Itoa(c.publishers)
		if c.batch > 1 {
			name = "batch=" + strconv.Itoa(c.batch) + "/in-flight=" + strconv.Itoa(c.publishers*c.batch)
		}
		b.Run(name, func(b *testing.B) { benchmarkGroupCommit(b, c.publishers, c.batch) })
	}
}

func benchmarkGroupCommit(b *testing.B, publishers, batch int) {
	ctx := context.Background()
	l, err := Open(ctx, Config{Env: domain.Sandbox, DataDir: b.TempDir()})
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	if _, err := l.js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{
		Name: "GROUPCOMMIT", Subjects: []string{"groupcommit.>"}, Storage: jetstream.FileStorage,
		AllowAtomicPublish: true,
	}); err != nil {
		b.Fatal(err)
	}
	payload := []byte(strings.Repeat("x", 500))
	var (
		next    atomic.Int64 // messages handed out, against b.N
		stored  atomic.Int64
		subject atomic.Int64
		wg      sync.WaitGroup
	)
	b.ResetTimer()
	for range publishers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for next.Add(int64(batch)) <= int64(b.N)+int64(batch)-1 {
				if err := publishBatch(ctx, l, payload, batch, &subject); err != nil {
					b.Error(err)
					return
				}
				stored.Add(int64(batch))
			}
		}()
	}
	wg.Wait()
	b.StopTimer()
	b.ReportMetric(float64(stored.Load())/b.Elapsed().Seconds(), "msgs/s")
}

// publishBatch stores n messages, each on a new subject: one synced publish
// when n is 1, otherwise one atomic batch whose commit is acknowledged once
// the whole batch is stored.
func publishBatch(ctx context.Context, l *Ledger, payload []byte, n int, subject *atomic.Int64) error {
	if n == 1 {
		msg := nats.NewMsg("groupcommit." + strconv.FormatInt(subject.Add(1), 10))
		msg.Data = payload
		_, err := l.js.PublishMsg(ctx, msg)
		return err
	}
	id := ksuid.New().String()
	for i := 1; i <= n; i++ {
		msg := nats.NewMsg("groupcommit." + strconv.FormatInt(subject.Add(1), 10))
		msg.Data = payload
		msg.Header.Set("Nats-Batch-Id", id)
		msg.Header.Set("Nats-Batch-Sequence", strconv.Itoa(i))
		if i < n {
			if err := l.nc.PublishMsg(msg); err != nil {
				return err
			}
			continue
		}
		msg.Header.Set("Nats-Batch-Commit", "1")
		ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		reply, err := l.nc.RequestMsgWithContext(ctx, msg)
		if err != nil {
			return err
		}
		var ack struct {
			Error *struct {
				Description string `json:"description"`
			} `json:"error"`
			Count int `json:"count"`
		}
		if err := json.Unmarshal(reply.Data, &ack); err != nil {
			return err
		}
		if ack.Error != nil {
			return errors.New("batch " + id + ": " + ack.Error.Description)
		}
		if ack.Count != n {
			return &batchError{id: id, want: n, got: ack.Count}
		}
	}
	return nil
}

type batchError struct {
	id        string
	want, got int
}

func (e *batchError) Error() string {
	return "batch " + e.id + ": committed " + strconv.Itoa(e.got) + " of " + strconv.Itoa(e.want)
}
