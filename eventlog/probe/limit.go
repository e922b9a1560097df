package probe

import (
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/partnergiving/giving/domain"
	"github.com/partnergiving/giving/eventlog"
	"github.com/partnergiving/giving/internal/openloop"
)

// What the disk allows: every speed claim about the service is a ratio to
// the raw synced publish rate measured here, in the same run, with the
// service's own server settings.

// RawLimit is what raw synced publishing achieved.
type RawLimit struct {
	Publishers int
	Size       int
	Messages   int
	Elapsed    time.Duration
	P50, P99   time.Duration
}

// Rate is messages per second.
func (r RawLimit) Rate() float64 { return float64(r.Messages) / r.Elapsed.Seconds() }

// MeasureRawLimit starts an embedded server exactly as the ledger does (file
// storage, every write synced before it is acknowledged) in a fresh
// directory under dir, and has publishers goroutines publish size-byte
// messages, one at a time each, each to its own subject, for d. The
// directory is removed afterwards.
func MeasureRawLimit(ctx context.Context, dir string, publishers, size int, d time.Duration) (RawLimit, error) {
	l, _, closeRaw, err := openRaw(ctx, dir, "rawlimit")
	if err != nil {
		return RawLimit{}, err
	}
	defer closeRaw()
	payload := []byte(strings.Repeat("x", size))
	var (
		mu   sync.Mutex
		lats []time.Duration
		wg   sync.WaitGroup
		errs = make(chan error, publishers)
	)
	start := time.Now()
	end := start.Add(d)
	for p := range publishers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			mine := make([]time.Duration, 0, 4096)
			subject := "rawlimit." + strconv.Itoa(p)
			for time.Now().Before(end) && ctx.Err() == nil {
				msg := nats.NewMsg(subject)
				msg.Data = payload
				t := time.Now()
				if _, err := l.JetStream().PublishMsg(ctx, msg); err != nil {
					errs <- err
					return
				}
				mine = append(mine, time.Since(t))
			}
			mu.Lock()
			lats = append(lats, mine...)
			mu.Unlock()
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	close(errs)
	if err := <-errs; err != nil {
		return RawLimit{}, eventlog.NATSErr("raw limit publish", err)
	}
	slices.Sort(lats)
	r := RawLimit{Publishers: publishers, Size: size, Messages: len(lats), Elapsed: elapsed}
	if len(lats) > 0 {
		r.P50, r.P99 = lats[len(lats)/2], lats[len(lats)*99/100]
	}
	return r, nil
}

// SyncedWrites counts the writes this environment's streams have stored
// whose persistence is synchronous: every stream on file storage that is not
// in asynchronous persist mode, KV buckets included. The difference over a
// run, divided by the requests served, is the synced writes per request.
func SyncedWrites(ctx context.Context, l *eventlog.Ledger) (uint64, error) {
	var total uint64
	lister := l.JetStream().ListStreams(ctx)
	for info := range lister.Info() {
		c := info.Config
		if c.Storage != jetstream.FileStorage || c.PersistMode == jetstream.AsyncPersistMode {
			continue
		}
		total += info.State.LastSeq
	}
	if err := lister.Err(); err != nil {
		return 0, eventlog.NATSErr("list streams", err)
	}
	return total, nil
}

// String shows the limit as the bench prints it.
func (r RawLimit) String() string {
	return fmt.Sprintf("%.0f msg/s, p50 %s, p99 %s (%d publishers, %d B)", r.Rate(), r.P50.Round(10*time.Microsecond), r.P99.Round(10*time.Microsecond), r.Publishers, r.Size)
}

// RawPaced is what a bare reader of raw synced appends achieved: appends at
// a steady pace, and the time from each append's acknowledgement to its
// arrival at a durable consumer that acknowledges every message, as the
// webhook fan-out's does.
type RawPaced struct {
	Target   float64 // appends a second asked for
	Messages int     // appends acknowledged
	Skipped  int     // appends due while every slot was taken
	Failed   int     // appends the server did not acknowledge
	Lost     int     // acknowledged appends the reader had not received in time
	Elapsed  time.Duration
	P50, P99 time.Duration
}

// Rate is acknowledged appends per second.
func (r RawPaced) Rate() float64 { return float64(r.Messages) / r.Elapsed.Seconds() }

// String shows the measure as the bench prints it.
func (r RawPaced) String() string {
	return fmt.Sprintf("append → read p50 %s, p99 %s at %.0f/s (%d appends, %d skipped, %d failed, %d lost)", r.P50.Round(10*time.Microsecond), r.P99.Round(10*time.Microsecond), r.Rate(), r.Messages, r.Skipped, r.Failed, r.Lost)
}

// MeasureRawPaced starts an embedded server exactly as the ledger does in a
// fresh directory under dir, appends size-byte messages at rate a second
// for d (openloop.Run: at most slots under way, one due while all are
// taken skipped), and times each from its acknowledgement to its
// arrival at a durable pull consumer that acknowledges every message (0
// when it arrived before the publisher saw the acknowledgement). It is
// the raw counterpart of the webhook dispatch's paced latency: what the
// server's own store and consumer allow at that pace, with nothing of the
// service around them. An append the server does not acknowledge is
// counted (Failed), as the bench counts the service's. The directory is
// removed afterwards.
func MeasureRawPaced(ctx context.Context, dir string, rate float64, slots, size int, d time.Duration) (RawPaced, error) {
	if !(rate > 0) || d <= 0 || slots <= 0 {
		return RawPaced{}, fmt.Errorf("raw paced: rate %v a second for %s, %d under way: each must be positive", rate, d, slots)
	}
	l, stream, closeRaw, err := openRaw(ctx, dir, "rawpaced")
	if err != nil {
		return RawPaced{}, err
	}
	defer closeRaw()
	cons, err := stream.CreateOrUpdateConsumer(ctx, jetstream.ConsumerConfig{
		Durable: "reader", AckPolicy: jetstream.AckExplicitPolicy, DeliverPolicy: jetstream.DeliverAllPolicy,
	})
	if err != nil {
		return RawPaced{}, eventlog.NATSErr("raw paced consumer", err)
	}
	n := max(int(rate*d.Seconds()), 1)
	acked := make([]time.Time, n)
	read := make([]time.Time, n)
	var got atomic.Int64
	it, err := cons.Messages(jetstream.PullMaxMessages(slots))
	if err != nil {
		return RawPaced{}, eventlog.NATSErr("raw paced consume", err)
	}
	reading := make(chan struct{})
	go func() {
		defer close(reading)
		for {
			m, err := it.Next()
			if err != nil {
				return
			}
			at := time.Now()
			if i, ok := rawPacedIndex(m.Data(), n); ok && read[i].IsZero() {
				read[i] = at
				got.Add(1)
			}
			_ = m.Ack()
		}
	}()
	defer func() { it.Stop(); <-reading }()

	var failed atomic.Int64
	skipped, elapsed := openloop.Run(ctx, n, rate, slots, func(i int) {
		msg := nats.NewMsg("rawpaced." + strconv.Itoa(i%slots))
		msg.Data = make([]byte, max(size, 8))
		binary.BigEndian.PutUint64(msg.Data, uint64(i))
		if _, err := l.JetStream().PublishMsg(ctx, msg); err != nil {
			failed.Add(1)
			return
		}
		acked[i] = time.Now()
	})
	if err := ctx.Err(); err != nil {
		return RawPaced{}, err
	}
	var sent int64
	for _, at := range acked {
		if !at.IsZero() {
			sent++
		}
	}
	deadline := time.Now().Add(30 * time.Second)
	for got.Load() < sent && time.Now().Before(deadline) && ctx.Err() == nil {
		time.Sleep(10 * time.Millisecond)
	}
	it.Stop()
	<-reading
	if err := ctx.Err(); err != nil {
		return RawPaced{}, err
	}
	r := RawPaced{Target: rate, Messages: int(sent), Skipped: skipped, Failed: int(failed.Load()), Elapsed: elapsed}
	lats := make([]time.Duration, 0, sent)
	for i, at := range acked {
		switch {
		case at.IsZero():
		case read[i].IsZero():
			r.Lost++
		default:
			// The publisher's goroutine and the reader's hear of the same
			// stored message from one connection; when the reader is
			// scheduled first it saw the message before the publisher saw
			// the acknowledgement, and the time from acknowledgement to
			// arrival is nothing, not negative.
			lats = append(lats, max(0, read[i].Sub(at)))
		}
	}
	slices.Sort(lats)
	if len(lats) > 0 {
		r.P50, r.P99 = lats[len(lats)/2], lats[len(lats)*99/100]
	}
	return r, nil
}

// rawPacedIndex reads the append's number, below n, from the first bytes
// of its data.
func rawPacedIndex(data []byte, n int) (int, bool) {
	if len(data) < 8 {
		return 0, false
	}
	i := binary.BigEndian.Uint64(data)
	return int(i), i < uint64(n)
}

// openRaw starts an embedded server exactly as the ledger does (file
// storage, every write synced before it is acknowledged) in a fresh
// directory under dir, with a stream of its own for the subjects
// "<name>.>". closeRaw stops the server and removes the directory.
func openRaw(ctx context.Context, dir, name string) (l *eventlog.Ledger, stream jetstream.Stream, closeRaw func(), err error) {
	tmp, err := os.MkdirTemp(dir, name+"-")
	if err != nil {
		return nil, nil, nil, err
	}
	if l, err = eventlog.Open(ctx, eventlog.Config{Env: domain.Sandbox, DataDir: tmp}); err != nil {
		os.RemoveAll(tmp)
		return nil, nil, nil, err
	}
	closeRaw = func() {
		l.Close()
		os.RemoveAll(tmp)
	}
	if stream, err = l.JetStream().CreateOrUpdateStream(ctx, jetstream.StreamConfig{
		Name: strings.ToUpper(name), Subjects: []string{name + ".>"}, Storage: jetstream.FileStorage,
	}); err != nil {
		closeRaw()
		return nil, nil, nil, eventlog.NATSErr(name+" stream", err)
	}
	return l, stream, closeRaw, nil
}

// OpenScratch starts a ledger exactly as the service's (an embedded server
// with file storage, every write synced, appends through the group commit)
// in a fresh directory under dir, for what the bench measures of the
// ledger's own appends with nothing of the service around them.
// closeScratch stops it and removes the directory.
func OpenScratch(ctx context.Context, dir string) (l *eventlog.Ledger, closeScratch func(), err error) {
	l, _, closeScratch, err = openRaw(ctx, dir, "scratch")
	return l, closeScratch, err
}
