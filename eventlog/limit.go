package eventlog

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/partnergiving/giving/domain"
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
	tmp, err := os.MkdirTemp(dir, "rawlimit-")
	if err != nil {
		return RawLimit{}, err
	}
	defer os.RemoveAll(tmp)
	l, err := Open(ctx, Config{Env: domain.Sandbox, DataDir: tmp})
	if err != nil {
		return RawLimit{}, err
	}
	defer l.Close()
	const stream = "RAWLIMIT"
	if _, err := l.js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{
		Name: stream, Subjects: []string{"rawlimit.>"}, Storage: jetstream.FileStorage,
	}); err != nil {
		return RawLimit{}, natsErr("raw limit stream", err)
	}
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
				if _, err := l.js.PublishMsg(ctx, msg); err != nil {
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
		return RawLimit{}, natsErr("raw limit publish", err)
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
func (l *Ledger) SyncedWrites(ctx context.Context) (uint64, error) {
	var total uint64
	lister := l.js.ListStreams(ctx)
	for info := range lister.Info() {
		c := info.Config
		if c.Storage != jetstream.FileStorage || c.PersistMode == jetstream.AsyncPersistMode {
			continue
		}
		total += info.State.LastSeq
	}
	if err := lister.Err(); err != nil {
		return 0, natsErr("list streams", err)
	}
	return total, nil
}

// String shows the limit as the bench prints it.
func (r RawLimit) String() string {
	return fmt.Sprintf("%.0f msg/s, p50 %s, p99 %s (%d publishers, %d B)", r.Rate(), r.P50.Round(10*time.Microsecond), r.P99.Round(10*time.Microsecond), r.Publishers, r.Size)
}
