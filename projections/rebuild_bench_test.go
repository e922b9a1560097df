package projections

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/partnergiving/giving/domain"
	"github.com/partnergiving/giving/eventlog"
	"github.com/partnergiving/giving/eventlog/probe"
	"github.com/partnergiving/giving/internal/cpuprofile"
)

// depositLedger fills an unsynced ledger with deposits as giving bench
// does: each a public deposit.received carrying its internal
// deposit.credited, spread over partners, their traces numbered in order.
func depositLedger(b testing.TB, deposits, partners int) *eventlog.Ledger {
	b.Helper()
	return tracedDepositLedger(b, deposits, partners, numberedTrace)
}

// tracedDepositLedger is depositLedger with the i-th deposit's trace
// trace(i).
func tracedDepositLedger(b testing.TB, deposits, partners int, trace func(int) string) *eventlog.Ledger {
	b.Helper()
	return filledLedger(b, depositEvents(b, deposits, partners, false, trace))
}

// numberedTrace is the i-th deposit's trace as giving bench makes them:
// a partner's next deposits' traces land near each other in key order.
func numberedTrace(i int) string { return "rebuild-bench-" + strconv.Itoa(i) }

// scatteredTrace is a trace whose key order has nothing to do with the
// ledger's, as the sandbox bank's (simulators.DerivedTrace, a hash): a
// multiplicative hash of i, so every run makes the same ledger.
func scatteredTrace(i int) string {
	return "rb-" + strconv.FormatUint(uint64(i)*0x9E3779B97F4A7C15, 16)
}

// depositEvents makes deposits spread over partners, each as the service
// records it, or as ledgers written before recorded it (legacy): an
// internal deposit.credited, then the public deposit.received.
func depositEvents(b testing.TB, deposits, partners int, legacy bool, trace func(int) string) []domain.Event {
	b.Helper()
	ids := make([]string, partners)
	churches := make([]string, partners)
	for i := range ids {
		ids[i], churches[i] = domain.NewID(domain.PrefixPartner), domain.NewID(domain.PrefixChurch)
	}
	events := make([]domain.Event, 0, deposits)
	now := time.Now()
	for i := range deposits {
		ev, err := domain.ReconcileCredit(domain.Deposit{}, domain.Credit{
			PartnerID: ids[i%partners], ChurchID: churches[i%partners], Trace: trace(i),
			AccountRef: "acct_bench", Amount: domain.Hundredths(100 + i), BankTS: now,
		}, now)
		if err != nil {
			b.Fatal(err)
		}
		if legacy {
			events = append(events, asBefore(*ev)...)
		} else {
			events = append(events, *ev)
		}
	}
	return events
}

// asBefore is a deposit.received carrying its credit as ledgers written
// before recorded it: under the deposit's own id, the credit an internal
// event of its own, first.
func asBefore(ev domain.Event) []domain.Event {
	ev.AggregateID = ev.Payload.(*domain.DepositReceived).DepositID
	credited, ok := ev.InternalFact()
	if !ok {
		return []domain.Event{ev}
	}
	credited.ID = domain.NewID(domain.PrefixEvent)
	ev.Internal = nil
	return []domain.Event{credited, ev}
}

// filledLedger is an unsynced ledger holding events.
func filledLedger(b testing.TB, events []domain.Event) *eventlog.Ledger {
	b.Helper()
	ctx := context.Background()
	l, err := eventlog.Open(ctx, eventlog.Config{Env: domain.Sandbox, DataDir: b.TempDir(), Unsynced: true})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(l.Close)
	if _, err := probe.Fill(ctx, l, events); err != nil {
		b.Fatal(err)
	}
	return l
}

// BenchmarkRebuild replays a ledger of 100k messages (deposits) into a fresh file and
// reports the replay's rate next to a raw ordered read of the same stream
// (replay/raw, which BENCHMARKS.md's goal wants at least 0.5), and the
// process's CPU time per event (the embedded server's included) for each,
// which varies less than the rates on a shared machine.
func BenchmarkRebuild(b *testing.B) { benchRebuild(b, 100_000, numberedTrace) }

// BenchmarkRebuildMillion is BenchmarkRebuild at a million deposits, the
// size giving bench's read side replays: a replayed event costs more there
// than at 100k (deeper trees, more pages a commit), which the smaller
// ledger does not show. It also reports the file's size. Filling the
// ledger takes about half a minute, each replay about fifteen seconds.
func BenchmarkRebuildMillion(b *testing.B) { benchRebuild(b, 1_000_000, numberedTrace) }

// BenchmarkRebuildMillionScattered is BenchmarkRebuildMillion with traces
// in no order of the ledger's (scatteredTrace): each span's deposits land
// all over the deposits table (see runs.go).
func BenchmarkRebuildMillionScattered(b *testing.B) { benchRebuild(b, 1_000_000, scatteredTrace) }

// profileRebuild starts a CPU profile of the replay alone (go test's
// -cpuprofile also holds the ledger's fill and the raw read), written to
// the file REBUILD_PROFILE names when it is set; the last replay's stays.
func profileRebuild(b *testing.B) (stop func()) {
	stopProfile, err := cpuprofile.Start(os.Getenv("REBUILD_PROFILE"), "")
	if err != nil {
		b.Fatal(err)
	}
	return func() {
		if err := stopProfile(); err != nil {
			b.Fatal(err)
		}
	}
}

func benchRebuild(b *testing.B, deposits int, trace func(int) string) {
	ctx := context.Background()
	l := tracedDepositLedger(b, deposits, 1000, trace)
	total := lastSeq(b, l)
	dir := b.TempDir()
	var replayed, raw, cpu, rawCPU time.Duration
	for b.Loop() {
		start, startCPU := time.Now(), cpuTime(b, syscall.RUSAGE_SELF)
		stopProfile := profileRebuild(b)
		if err := BuildFile(ctx, l, filepath.Join(dir, "rebuild.db"), nil); err != nil {
			b.Fatal(err)
		}
		stopProfile()
		replayed += time.Since(start)
		cpu += cpuTime(b, syscall.RUSAGE_SELF) - startCPU
		b.StopTimer()
		startCPU = cpuTime(b, syscall.RUSAGE_SELF)
		r, err := probe.ReadRaw(ctx, l, l.Subjects().All())
		if err != nil {
			b.Fatal(err)
		}
		rawCPU += cpuTime(b, syscall.RUSAGE_SELF) - startCPU
		raw += r.Elapsed
		b.StartTimer()
	}
	n := float64(total) * float64(b.N)
	b.ReportMetric(n/replayed.Seconds(), "events/s")
	b.ReportMetric(n/raw.Seconds(), "raw-events/s")
	b.ReportMetric(raw.Seconds()/replayed.Seconds(), "replay/raw")
	b.ReportMetric(float64(cpu.Microseconds())/n, "cpu-µs/event")
	b.ReportMetric(float64(rawCPU.Microseconds())/n, "raw-cpu-µs/event")
	if fi, err := os.Stat(filepath.Join(dir, "rebuild.db")); err == nil {
		b.ReportMetric(float64(fi.Size())/float64(total), "file-bytes/event")
	}
}

// BenchmarkApplyDecoded runs only the transactions of a rebuild, on records
// read and decoded beforehand, and reports the CPU time of the thread that
// runs them per event (what bounds a replay, since bbolt has one writer)
// and the pages its commits wrote.
func BenchmarkApplyDecoded(b *testing.B) {
	recs, evs := readDecoded(b, depositLedger(b, 100_000, 1000), 10_000)
	benchApply(b, len(recs), "event", func(path string) (*Store, error) {
		s, err := openRebuild(path)
		if err == nil {
			s.db.NoSync = true
		}
		return s, err
	}, func(s *Store) error {
		// Batch by batch into a rebuild's spanning transactions.
		span := s.newTxSpan(spanEvents)
		for from := 0; from < len(recs); from += rebuildBatch {
			to := min(from+rebuildBatch, len(recs))
			if err := span.apply(recs[from:to], evs[from:to]); err != nil {
				return err
			}
		}
		return span.end(true)
	})
}

// BenchmarkApplyBurst applies one partner's burst of deposits, made as
// fast as the domain makes them (a bank file reconciled at once), in
// transactions of 500 as the live projector takes a backlog, to a fresh
// file, and reports the applying thread's CPU time and the pages written
// per event: with event ids as the domain makes them (sorted), and with
// ids random within their second, as KSUIDs made them before (random).
// The public events index keeps a bucket per partner keyed by event id,
// so random ids put each transaction's entries all over the partner's
// bucket.
func BenchmarkApplyBurst(b *testing.B) {
	for _, ids := range []string{"sorted", "random"} {
		b.Run("ids="+ids, func(b *testing.B) {
			events := depositEvents(b, 40_000, 1, false, numberedTrace)
			if ids == "random" {
				for i := range events {
					events[i].ID = domain.NewID(domain.PrefixEvent)
				}
			}
			recs, evs := readDecoded(b, filledLedger(b, events), 10_000)
			benchApply(b, len(recs), "event", Open, func(s *Store) error {
				return applyInTransactionsOf(s, 500, recs, evs)
			})
		})
	}
}

// BenchmarkApplyImport applies one partner's church imports of
// MaxImportRows rows each, one import a transaction as the live projector
// applies a request's event, to a fresh file, and reports the applying
// thread's CPU time and the pages written per imported church: with
// church ids as the domain makes them, in order (sorted), and random
// within their second, as KSUIDs made them before (random). An import
// puts each church under its id in two indexes (the partner's churches,
// and church → partner).
func BenchmarkApplyImport(b *testing.B) {
	const imports = 20
	for _, ids := range []string{"sorted", "random"} {
		b.Run("ids="+ids, func(b *testing.B) {
			partner := domain.NewID(domain.PrefixPartner)
			var events []domain.Event
			for i := range imports {
				rows := make([]domain.ImportRow, domain.MaxImportRows)
				for j := range rows {
					ext := fmt.Sprintf("crm-%08d", i*len(rows)+j)
					rows[j] = domain.ImportRow{Name: "Church " + ext, ExternalID: &ext}
				}
				ev, _, err := domain.ImportChurches(partner, rows, func(string) bool { return false }, time.Now())
				if err != nil {
					b.Fatal(err)
				}
				if ids == "random" {
					created := ev.Payload.(*domain.ChurchesImported).Created
					for k := range created {
						created[k].ID = domain.NewID(domain.PrefixChurch)
					}
				}
				events = append(events, *ev)
			}
			recs, evs := readDecoded(b, filledLedger(b, events), 100)
			benchApply(b, imports*domain.MaxImportRows, "church", Open, func(s *Store) error {
				return applyInTransactionsOf(s, 1, recs, evs)
			})
		})
	}
}

// applyInTransactionsOf applies recs in transactions of n records each,
// as the live projector does (Store.applyDecoded).
func applyInTransactionsOf(s *Store, n int, recs []eventlog.Record, evs []domain.Event) error {
	for from := 0; from < len(recs); from += n {
		to := min(from+n, len(recs))
		if err := s.applyDecoded(recs[from:to], evs[from:to]); err != nil {
			return err
		}
	}
	return nil
}

// benchApply runs apply, which applies n things of the kind unit names
// (events, churches), on a fresh file that open makes at every iteration,
// and reports the CPU time of the thread that runs it and the pages its
// commits wrote, per unit.
func benchApply(b *testing.B, n int, unit string, open func(path string) (*Store, error), apply func(*Store) error) {
	path := filepath.Join(b.TempDir(), "apply.db")
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var (
		cpu   time.Duration
		pages int64
	)
	for b.Loop() {
		b.StopTimer()
		s, err := open(path)
		if err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		before := s.db.Stats()
		start := cpuTime(b, syscall.RUSAGE_THREAD)
		if err := apply(s); err != nil {
			b.Fatal(err)
		}
		cpu += cpuTime(b, syscall.RUSAGE_THREAD) - start
		after := s.db.Stats()
		pages += after.TxStats.GetWrite() - before.TxStats.GetWrite()
		b.StopTimer()
		if err := s.Close(); err != nil {
			b.Fatal(err)
		}
		if err := os.Remove(path); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
	b.ReportMetric(float64(cpu.Microseconds())/float64(n*b.N), "thread-cpu-µs/"+unit)
	// The pages the commits wrote: what the machine's load does not vary.
	b.ReportMetric(float64(pages)/float64(n*b.N), "pages-written/"+unit)
}

// BenchmarkApplyOneRecord applies deposits one per transaction, as the
// live projector does under a write load (each request waits for its own
// event), to a file already holding 20,000 over 16 partners, and reports
// the applying thread's CPU time and the pages written per commit: what a
// write request costs the projector, which the write path's profile shows
// as a tenth or more of a request.
func BenchmarkApplyOneRecord(b *testing.B) {
	const held, more = 20_000, 10_000
	recs, evs := readDecoded(b, depositLedger(b, held+more, 16), 10_000)
	path := filepath.Join(b.TempDir(), "live.db")
	var s *Store
	fresh := func() {
		if s != nil {
			if err := s.Close(); err != nil {
				b.Fatal(err)
			}
			if err := os.Remove(path); err != nil {
				b.Fatal(err)
			}
		}
		var err error
		if s, err = Open(path); err != nil {
			b.Fatal(err)
		}
		if err := s.applyDecoded(recs[:held], evs[:held]); err != nil {
			b.Fatal(err)
		}
	}
	fresh()
	defer func() { _ = s.Close() }()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var (
		cpu          time.Duration
		pages, count int64
	)
	for i := 0; b.Loop(); i++ {
		j := held + i%more
		if j == held && i > 0 {
			b.StopTimer()
			fresh()
			b.StartTimer()
		}
		before, start := s.db.Stats(), cpuTime(b, syscall.RUSAGE_THREAD)
		if err := s.applyDecoded(recs[j:j+1], evs[j:j+1]); err != nil {
			b.Fatal(err)
		}
		cpu += cpuTime(b, syscall.RUSAGE_THREAD) - start
		after := s.db.Stats()
		pages += after.TxStats.GetWrite() - before.TxStats.GetWrite()
		count++
	}
	b.ReportMetric(float64(cpu.Microseconds())/float64(count), "thread-cpu-µs/commit")
	b.ReportMetric(float64(pages)/float64(count), "pages/commit")
}

func cpuTime(b testing.TB, who int) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(who, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// readDecoded reads the whole ledger, pages of page records, gives each
// record the dedup id the vendor edge gives a bank credit, and decodes it
// as a rebuild does.
func readDecoded(tb testing.TB, l *eventlog.Ledger, page int) ([]eventlog.Record, []domain.Event) {
	tb.Helper()
	ctx := context.Background()
	var recs []eventlog.Record
	for {
		got, _, err := l.Read(ctx, l.Subjects().All(), uint64(len(recs)), page)
		if err != nil {
			tb.Fatal(err)
		}
		if len(got) == 0 {
			break
		}
		recs = append(recs, got...)
	}
	// As the vendor edge records a bank credit: under a dedup id derived
	// from the bank event's (Ledger.Fill stores none, see there).
	for i := range recs {
		recs[i].MsgID = "vendor:bank:" + domain.NewID(domain.PrefixEvent) + ":0"
	}
	evs, err := decodeAll(recs)
	if err != nil {
		tb.Fatal(err)
	}
	return recs, evs
}
