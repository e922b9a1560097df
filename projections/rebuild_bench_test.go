package projections_test

import (
	"context"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/partnergiving/giving/domain"
	"github.com/partnergiving/giving/eventlog"
	"github.com/partnergiving/giving/projections"
)

// BenchmarkRebuild replays a ledger of deposits (the internal
// deposit.credited and the public deposit.received, as giving bench fills
// it) spread over partners into a fresh file, and reports the replay's rate
// next to a raw ordered read of the same stream (replay/raw, the figure
// issue 12 asks to be at least 0.5).
func BenchmarkRebuild(b *testing.B) {
	const (
		deposits = 50_000
		partners = 1000
	)
	ctx := context.Background()
	l, err := eventlog.Open(ctx, eventlog.Config{Env: domain.Sandbox, DataDir: b.TempDir(), Unsynced: true})
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	ids := make([]string, partners)
	churches := make([]string, partners)
	for i := range ids {
		ids[i], churches[i] = domain.NewID(domain.PrefixPartner), domain.NewID(domain.PrefixChurch)
	}
	events := make([]domain.Event, 0, 2*deposits)
	now := time.Now()
	for i := range deposits {
		var d domain.Deposit
		credited, err := domain.CreditDeposit(&d, domain.Credit{
			PartnerID: ids[i%partners], ChurchID: churches[i%partners], Trace: "rebuild-bench",
			AccountRef: "acct_bench", Amount: domain.Hundredths(100 + i), BankTS: now,
		}, now)
		if err != nil {
			b.Fatal(err)
		}
		d.Apply(*credited)
		events = append(events, *credited, *domain.AnnounceDeposit(&d, ids[i%partners], now))
	}
	if _, err := l.Fill(ctx, events); err != nil {
		b.Fatal(err)
	}
	dir := b.TempDir()
	var replayed, raw, cpu time.Duration
	for i := 0; b.Loop(); i++ {
		start, startCPU := time.Now(), cpuTime(b)
		if err := projections.BuildFile(ctx, l, filepath.Join(dir, "rebuild.db"), nil); err != nil {
			b.Fatal(err)
		}
		replayed += time.Since(start)
		cpu += cpuTime(b) - startCPU
		b.StopTimer()
		r, err := l.ReadRaw(ctx, l.Subjects().All())
		if err != nil {
			b.Fatal(err)
		}
		raw += r.Elapsed
		b.StartTimer()
	}
	n := float64(len(events) * b.N)
	b.ReportMetric(n/replayed.Seconds(), "events/s")
	b.ReportMetric(n/raw.Seconds(), "raw-events/s")
	b.ReportMetric(raw.Seconds()/replayed.Seconds(), "replay/raw")
	// The process's CPU time per event (the embedded server's included)
	// varies less than the rate on a shared machine.
	b.ReportMetric(float64(cpu.Microseconds())/n, "cpu-µs/event")
}

func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
