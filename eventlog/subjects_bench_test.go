package eventlog

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
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

// The read side's memory goal asks whether the ledger could keep the serve process's memory
// bounded at 1M events by storing events under a bounded set of subjects
// instead of one subject per aggregate. These benchmarks measure what the
// embedded nats-server keeps per subject, and what JetStream's per-subject
// guard (Nats-Expected-Last-Subject-Sequence with -Subject) does and costs.
// /work/notes/subjects-finding.md quotes the figures:
//
//	go test ./eventlog -run '^$' -bench 'SubjectsMemory' -benchtime 1x -timeout 90m
//	go test ./eventlog -run '^$' -bench 'GuardHeader' -benchtime 8000x -count 5
//	go test ./eventlog -run '^$' -bench 'GuardCost' -benchtime 4000x -count 5
//	go test ./eventlog -run 'TestExpectedLastSubjectSequence' -count 1
//
// SubjectsMemory takes about 3 minutes per case, mostly waiting for the
// file store's expiries; its figures are per process, so the sizes can run
// at once: -bench 'SubjectsMemory//msgs=200000$' and so on.

// subjectsPartners is how many partners the deposits of a fill spread over.
const subjectsPartners = 1000

// subjectsLayout is one way of naming deposit events. Message m is event
// m%2 (0: deposit.credited, internal; 1: deposit.received, public) of
// deposit m/2, which belongs to partner (m/2)%subjectsPartners.
type subjectsLayout struct {
	name    string
	subject func(partner, deposit string, event int) string
	// aggregate is the narrowest filter holding one deposit's events.
	aggregate func(partner, deposit string) string
	// public is the filter of one partner's public events (its feed).
	public func(partner string) string
}

// depositEvents names the two events of a deposit as the ledger does.
var depositEvents = [2]string{"int.deposit.credited", "pub.deposit.received"}

// bucketOf is the bucket of 64 a deposit falls in.
func bucketOf(deposit string) string {
	h := fnv.New32a()
	_, _ = h.Write([]byte(deposit))
	return "b" + strconv.Itoa(int(h.Sum32()%64))
}

var subjectsLayouts = []subjectsLayout{{
	// Today's: every event under its aggregate, visibility and type, so a
	// deposit's two events are two subjects.
	name:      "today",
	subject:   func(p, d string, e int) string { return "ledger.sandbox." + p + "." + d + "." + depositEvents[e] },
	aggregate: func(p, d string) string { return "ledger.sandbox." + p + "." + d + ".>" },
	public:    func(p string) string { return "ledger.sandbox." + p + ".*.pub.>" },
}, {
	// One subject per aggregate, the type moved out of the subject (a
	// header): half of today's subjects.
	name:      "per-aggregate",
	subject:   func(p, d string, _ int) string { return "ledger.sandbox." + p + "." + d },
	aggregate: func(p, d string) string { return "ledger.sandbox." + p + "." + d },
	public:    func(p string) string { return "ledger.sandbox." + p + ".*" }, // no visibility token left: every event
}, {
	// Each partner's aggregates hashed into 64 buckets: at most
	// partners × 64 × 2 subjects.
	name: "bucket-64",
	subject: func(p, d string, e int) string {
		return "ledger.sandbox." + p + "." + bucketOf(d) + "." + depositEvents[e]
	},
	aggregate: func(p, d string) string { return "ledger.sandbox." + p + "." + bucketOf(d) + ".>" },
	public:    func(p string) string { return "ledger.sandbox." + p + ".*.pub.>" },
}, {
	// Bounded: partner, visibility and type only, partners × 2 subjects
	// for deposits (partners × event types for the whole ledger).
	name:      "bounded",
	subject:   func(p, _ string, e int) string { return "ledger.sandbox." + p + "." + depositEvents[e] },
	aggregate: func(p, _ string) string { return "ledger.sandbox." + p + ".>" }, // no narrower filter exists
	public:    func(p string) string { return "ledger.sandbox." + p + ".pub.>" },
}}

// benchPartner and benchDeposit are ids as the service makes them (a
// prefix and a KSUID: a timestamp, then random bytes), derived from their
// number so that a filter can name them. Their shape matters: the subject
// index is a radix tree, which shares common prefixes, so sequential
// numbers would understate what a subject costs.
func benchPartner(p int) string { return benchID(domain.PrefixPartner, 0, p) }
func benchDeposit(d int) string { return benchID(domain.PrefixDeposit, d/100, d) }

// benchID is prefix and a KSUID created at second s with a payload drawn
// from n.
func benchID(prefix string, s, n int) string {
	sum := sha256.Sum256([]byte(prefix + strconv.Itoa(n)))
	id, err := ksuid.FromParts(time.Unix(1_790_000_000+int64(s), 0), sum[:16])
	if err != nil {
		panic(err)
	}
	return prefix + id.String()
}

// subjectsMemory is what the child process measured after opening a ledger.
type subjectsMemory struct {
	Subjects uint64        `json:"subjects"`
	Messages uint64        `json:"messages"`
	Recovery time.Duration `json:"recovery"`
	Before   memSample     `json:"before"`
	Open     memSample     `json:"open"`
	Reads    []readSample  `json:"reads"`
	// CacheExpired is sampled once the block caches the reads loaded have
	// expired (the file store drops them after 10 s unused) but the
	// per-block subject state (fss) has not (2 min unused); FSSExpired
	// once that has expired too: what stays is the stream-wide subject
	// index (psim) and the fixed costs.
	CacheExpired memSample `json:"cache_expired"`
	FSSExpired   memSample `json:"fss_expired"`
	PeakRSSMiB   float64   `json:"peak_rss_mib"`
}

type readSample struct {
	Filter   string        `json:"filter"`
	Messages int           `json:"messages"`
	Elapsed  time.Duration `json:"elapsed"`
	Mem      memSample     `json:"mem"`
}

type memSample struct {
	HeapInuse uint64 `json:"heap_inuse"`
	RSS       uint64 `json:"rss"`
}

// sampleMemory collects the garbage, returns what it can to the system and
// reads the Go heap in use and the process's resident set.
func sampleMemory() memSample {
	runtime.GC()
	debug.FreeOSMemory()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return memSample{HeapInuse: ms.HeapInuse, RSS: procStatus("VmRSS")}
}

// procStatus reads one kB field of /proc/self/status, in bytes.
func procStatus(field string) uint64 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), field+":"); ok {
			kb, _ := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb << 10
		}
	}
	return 0
}

const (
	subjectsDirEnv     = "GIVING_SUBJECTS_MEMORY_DIR"
	subjectsFiltersEnv = "GIVING_SUBJECTS_MEMORY_FILTERS"
	// subjectsProfileEnv, when set, names a directory the child writes
	// heap profiles to (<case>/open.pprof, cache-expired.pprof,
	// fss-expired.pprof), to tell the subject indexes from the block
	// caches with go tool pprof.
	subjectsProfileEnv = "GIVING_SUBJECTS_MEMORY_PROFILE"
	// cacheExpired is past the file store's block cache expiry (10 s),
	// fssExpired past its per-block subject state expiry (2 min).
	cacheExpired = 12 * time.Second
	fssExpired   = 2*time.Minute + 15*time.Second
)

// heapProfile writes the heap profile to name in the profile directory, if
// one was given.
func heapProfile(t *testing.T, name string) {
	dir := os.Getenv(subjectsProfileEnv)
	if dir == "" {
		return
	}
	f, err := os.Create(filepath.Join(dir, name))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	runtime.GC()
	if err := pprof.Lookup("heap").WriteTo(f, 0); err != nil {
		t.Fatal(err)
	}
}

// TestSubjectsMemoryChild is BenchmarkSubjectsMemory's measuring process:
// it opens the filled ledger as serve does (synced) in a process of its own,
// so that the heap and resident set hold nothing of the fill, and reads each
// filter given. It skips unless the benchmark runs it.
func TestSubjectsMemoryChild(t *testing.T) {
	dir := os.Getenv(subjectsDirEnv)
	if dir == "" {
		t.Skip("BenchmarkSubjectsMemory runs this in its own process")
	}
	ctx := context.Background()
	var out subjectsMemory
	out.Before = sampleMemory()
	start := time.Now()
	l, err := Open(ctx, Config{Env: domain.Sandbox, DataDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	out.Recovery = time.Since(start)
	info, err := l.stream.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	out.Subjects, out.Messages = info.State.NumSubjects, info.State.Msgs
	out.Open = sampleMemory()
	heapProfile(t, "open.pprof")
	for _, filter := range strings.Split(os.Getenv(subjectsFiltersEnv), ",") {
		if filter == "" {
			continue
		}
		start := time.Now()
		n, err := readAllRaw(ctx, l, filter)
		if err != nil {
			t.Fatal(err)
		}
		out.Reads = append(out.Reads, readSample{Filter: filter, Messages: n, Elapsed: time.Since(start), Mem: sampleMemory()})
	}
	// A timeline, not a wait for a condition: the samples are meant to
	// fall after each expiry.
	time.Sleep(cacheExpired)
	out.CacheExpired = sampleMemory()
	heapProfile(t, "cache-expired.pprof")
	time.Sleep(fssExpired - cacheExpired)
	out.FSSExpired = sampleMemory()
	heapProfile(t, "fss-expired.pprof")
	out.PeakRSSMiB = float64(procStatus("VmHWM")) / (1 << 20)
	b, _ := json.Marshal(out)
	fmt.Println("SUBJECTS-MEMORY " + string(b))
}

// readAllRaw reads every message matching filter by pages of 256, as
// Execute loads a history, without decoding (the layouts' subjects are not
// all the ledger's).
func readAllRaw(ctx context.Context, l *Ledger, filter string) (int, error) {
	var after uint64
	n := 0
	for {
		msgs, pending, err := directMsgs(ctx, l.nc, l.name, directGetRequest{Seq: after + 1, NextFor: filter, Batch: 256})
		if errors.Is(err, ErrNotFound) {
			return n, nil
		}
		if err != nil {
			return n, err
		}
		for _, m := range msgs {
			after, _ = strconv.ParseUint(m.Header.Get("Nats-Sequence"), 10, 64)
		}
		n += len(msgs)
		if pending == 0 || len(msgs) == 0 {
			return n, nil
		}
	}
}

// BenchmarkSubjectsMemory fills a ledger with deposits (two 500-byte events
// each, over 1,000 partners) under each layout, then opens it in a fresh
// process and reports the Go heap in use and the resident set the store
// holds after recovery, after loading one deposit's history and after
// reading one partner's public events, and again once the file store's
// block caches (10 s) and per-block subject state (2 min) have expired.
// Each sub-benchmark does its work once whatever b.N is: run it with
// -benchtime 1x.
func BenchmarkSubjectsMemory(b *testing.B) {
	b.Run("empty", func(b *testing.B) { benchmarkSubjectsMemory(b, subjectsLayouts[0], 0) })
	// 2M messages are 1M deposits: the 1M public events.
	for _, n := range []int{200_000, 1_000_000, 2_000_000} {
		for _, lay := range subjectsLayouts {
			b.Run(lay.name+"/msgs="+strconv.Itoa(n), func(b *testing.B) { benchmarkSubjectsMemory(b, lay, n) })
		}
	}
}

func benchmarkSubjectsMemory(b *testing.B, lay subjectsLayout, n int) {
	dir := b.TempDir()
	fillStart := time.Now()
	if err := fillLayout(dir, lay, n); err != nil {
		b.Fatal(err)
	}
	fill := time.Since(fillStart)
	// A deposit in the middle of the fill, and its partner.
	d := n / 4
	p := benchPartner(d % subjectsPartners)
	filters := []string{lay.aggregate(p, benchDeposit(d)), lay.public(p)}
	cmd := exec.Command(os.Args[0], "-test.run", "^TestSubjectsMemoryChild$", "-test.count", "1")
	cmd.Env = append(os.Environ(), subjectsDirEnv+"="+dir, subjectsFiltersEnv+"="+strings.Join(filters, ","))
	if prof := os.Getenv(subjectsProfileEnv); prof != "" {
		prof = filepath.Join(prof, lay.name+"-"+strconv.Itoa(n))
		if err := os.MkdirAll(prof, 0o755); err != nil {
			b.Fatal(err)
		}
		cmd.Env = append(cmd.Env, subjectsProfileEnv+"="+prof)
	}
	outb, err := cmd.CombinedOutput()
	if err != nil {
		b.Fatalf("child: %v\n%s", err, outb)
	}
	var m subjectsMemory
	for line := range strings.Lines(string(outb)) {
		if j, ok := strings.CutPrefix(strings.TrimSpace(line), "SUBJECTS-MEMORY "); ok {
			if err := json.Unmarshal([]byte(j), &m); err != nil {
				b.Fatal(err)
			}
		}
	}
	if m.Messages != uint64(n) {
		b.Fatalf("child saw %d messages, want %d\n%s", m.Messages, n, outb)
	}
	mib := func(v uint64) float64 { return float64(v) / (1 << 20) }
	heap := func(s memSample) float64 { return mib(s.HeapInuse) - mib(m.Before.HeapInuse) }
	rss := func(s memSample) float64 { return mib(s.RSS) - mib(m.Before.RSS) }
	b.ReportMetric(float64(m.Subjects), "subjects")
	b.ReportMetric(heap(m.Open), "heap-open-MiB")
	b.ReportMetric(rss(m.Open), "rss-open-MiB")
	for i, r := range m.Reads {
		name := [...]string{"aggregate", "feed"}[i]
		b.ReportMetric(heap(r.Mem), "heap-"+name+"-MiB")
		b.ReportMetric(float64(r.Messages), name+"-msgs")
		b.ReportMetric(float64(r.Elapsed.Microseconds())/1000, name+"-ms")
	}
	b.ReportMetric(heap(m.CacheExpired), "heap-cache-expired-MiB")
	b.ReportMetric(heap(m.FSSExpired), "heap-fss-expired-MiB")
	b.ReportMetric(rss(m.FSSExpired), "rss-fss-expired-MiB")
	b.ReportMetric(m.PeakRSSMiB-mib(m.Before.RSS), "peak-rss-MiB")
	b.ReportMetric(m.Recovery.Seconds(), "recovery-s")
	if m.Subjects > 0 {
		b.ReportMetric(float64(m.FSSExpired.HeapInuse-m.Before.HeapInuse)/float64(m.Subjects), "heap-B/subject")
	}
	b.Logf("%s msgs=%d subjects=%d fill=%s recovery=%s heap(open/aggregate/feed/cache-expired/fss-expired)=%.1f/%.1f/%.1f/%.1f/%.1f MiB rss(open)=%.1f MiB peak-rss=%.1f MiB reads=%+v",
		lay.name, n, m.Subjects, fill.Round(time.Millisecond), m.Recovery.Round(time.Millisecond),
		heap(m.Open), heap(m.Reads[0].Mem), heap(m.Reads[1].Mem), heap(m.CacheExpired), heap(m.FSSExpired), rss(m.Open), m.PeakRSSMiB-mib(m.Before.RSS), m.Reads)
}

// fillLayout stores n deposit events under lay in an unsynced ledger at
// dir, publishing asynchronously, and closes it.
func fillLayout(dir string, lay subjectsLayout, n int) error {
	ctx := context.Background()
	l, err := Open(ctx, Config{Env: domain.Sandbox, DataDir: dir, Unsynced: true})
	if err != nil {
		return err
	}
	defer l.Close()
	var failed atomic.Int64
	js, err := jetstream.New(l.nc, jetstream.WithPublishAsyncMaxPending(4096),
		jetstream.WithPublishAsyncErrHandler(func(jetstream.JetStream, *nats.Msg, error) { failed.Add(1) }))
	if err != nil {
		return err
	}
	payload := []byte(strings.Repeat("x", 500))
	for m := range n {
		d := m / 2
		msg := nats.NewMsg(lay.subject(benchPartner(d%subjectsPartners), benchDeposit(d), m%2))
		msg.Data = payload
		if _, err := js.PublishMsgAsync(msg); err != nil {
			return err
		}
		if m%2048 == 2047 {
			<-js.PublishAsyncComplete()
		}
	}
	select {
	case <-js.PublishAsyncComplete():
	case <-time.After(time.Minute):
		return errors.New("fill: acks still pending after a minute")
	}
	if f := failed.Load(); f > 0 {
		return fmt.Errorf("fill: %d publishes failed", f)
	}
	return nil
}

// guardStream makes a stream for the guard tests and benchmarks on an
// embedded ledger (synced, as serve runs it) and returns its JetStream.
func guardStream(tb testing.TB) (*Ledger, jetstream.JetStream) {
	tb.Helper()
	ctx := context.Background()
	l, err := Open(ctx, Config{Env: domain.Sandbox, DataDir: tb.TempDir()})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(l.Close)
	if _, err := l.js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{
		Name: "GUARD", Subjects: []string{"guard.>"}, Storage: jetstream.FileStorage, AllowDirect: true,
	}); err != nil {
		tb.Fatal(err)
	}
	return l, l.js
}

// guardCode is the JetStream error code of a publish, 0 when it was stored.
func guardCode(tb testing.TB, js jetstream.JetStream, subject string, headers map[string]string) (uint64, jetstream.ErrorCode) {
	tb.Helper()
	msg := nats.NewMsg(subject)
	msg.Data = []byte("x")
	for k, v := range headers {
		msg.Header.Set(k, v)
	}
	ack, err := js.PublishMsg(context.Background(), msg)
	if err == nil {
		return ack.Sequence, 0
	}
	var apiErr *jetstream.APIError
	if !errors.As(err, &apiErr) {
		tb.Fatalf("publish %s: %v", subject, err)
	}
	return 0, apiErr.ErrorCode
}

// guard is the two headers of a per-subject expectation.
func guard(seq uint64, subject string) map[string]string {
	return map[string]string{
		"Nats-Expected-Last-Subject-Sequence":         strconv.FormatUint(seq, 10),
		"Nats-Expected-Last-Subject-Sequence-Subject": subject,
	}
}

// TestExpectedLastSubjectSequenceSubject pins what the vendored nats-server
// does with Nats-Expected-Last-Subject-Sequence-Subject, which the ledger's
// per-aggregate guard and any redesign of its subjects rely on. It fails if
// a server upgrade changes any of it.
func TestExpectedLastSubjectSequenceSubject(t *testing.T) {
	_, js := guardStream(t)
	const wrong = jetstream.JSErrCodeStreamWrongLastSequence // 10071
	const missingSeq = 10193                                 // JSStreamExpectedLastSeqPerSubjectInvalid

	// A wildcard filter is accepted, and an empty one expects 0.
	s1, code := guardCode(t, js, "guard.p1.a1.created", guard(0, "guard.p1.a1.>"))
	if code != 0 {
		t.Fatalf("first append to an empty wildcard guard: error %d, want stored", code)
	}
	if _, code := guardCode(t, js, "guard.p1.a1.updated", guard(0, "guard.p1.a1.>")); code != wrong {
		t.Fatalf("expecting 0 on a guard holding seq %d: error %d, want %d", s1, code, wrong)
	}
	if _, code := guardCode(t, js, "guard.p1.a1.updated", guard(7, "guard.p1.a1.>")); code != wrong {
		t.Fatalf("expecting a wrong non-zero seq: error %d, want %d", code, wrong)
	}
	s2, code := guardCode(t, js, "guard.p1.a1.updated", guard(s1, "guard.p1.a1.>"))
	if code != 0 {
		t.Fatalf("expecting the guard's last seq %d across two subjects: error %d, want stored", s1, code)
	}

	// An empty guard: 0 passes, anything else is a conflict, even on a
	// filter outside the stream's subjects.
	if _, code := guardCode(t, js, "guard.p1.a2.created", guard(3, "guard.p1.a2.>")); code != wrong {
		t.Fatalf("expecting seq 3 on an empty guard: error %d, want %d", code, wrong)
	}
	if _, code := guardCode(t, js, "guard.p1.a3.created", guard(0, "elsewhere.>")); code != 0 {
		t.Fatalf("expecting 0 on a filter outside the stream: error %d, want stored", code)
	}

	// The guard subject may differ from the stored one entirely: the check
	// reads the guard, and the append does not move it unless the stored
	// subject matches the guard. Two appends outside the guard both pass
	// with the same expectation: the guard serialises only writes that
	// land in it.
	for i := range 2 {
		if _, code := guardCode(t, js, "guard.p2.x.created", guard(s2, "guard.p1.a1.>")); code != 0 {
			t.Fatalf("append %d outside its guard: error %d, want stored", i, code)
		}
	}
	// A literal guard on a partner-wide subject shared by aggregates: the
	// second writer with the same expectation loses.
	s3, code := guardCode(t, js, "guard.p3.deposit", guard(0, "guard.p3.deposit"))
	if code != 0 {
		t.Fatalf("first append to a literal guard: error %d", code)
	}
	if _, code := guardCode(t, js, "guard.p3.deposit", guard(0, "guard.p3.deposit")); code != wrong {
		t.Fatalf("second writer expecting 0 on a shared literal guard: error %d, want %d", code, wrong)
	}
	if _, code := guardCode(t, js, "guard.p3.deposit", guard(s3, "guard.p3.deposit")); code != 0 {
		t.Fatalf("writer expecting %d on a shared literal guard: error %d", s3, code)
	}

	// The subject header alone, without the sequence, is refused.
	if _, code := guardCode(t, js, "guard.p4.a.created", map[string]string{"Nats-Expected-Last-Subject-Sequence-Subject": "guard.p4.>"}); code != missingSeq {
		t.Fatalf("subject header without a sequence: error %d, want %d", code, missingSeq)
	}
}

// BenchmarkGuardCost measures synced appends, 16 in flight, with and
// without a per-subject guard, and the conflicts a guard coarser than an
// aggregate costs when 16 writers work on one partner's aggregates at once.
// The one-partner writers run Execute's loop: load the guard's last
// sequence, append expecting it, back off (Execute's backoff) and retry on a
// conflict, and give up after Execute's maxAttempts (the service would
// answer 503).
func BenchmarkGuardCost(b *testing.B) {
	const writers = 16
	deposit := func(w, i int) string { return benchDeposit(w*1_000_000_000 + i) }
	newAggregate := func(w, i int) string { return "guard.p." + deposit(w, i) + ".pub.deposit.received" }
	type plan struct {
		name string
		// stored and guarded name writer w's i-th append; guarded nil means
		// no guard.
		stored, guarded func(w, i int) string
		// load reads the guard's last sequence before each attempt. Without
		// it the writer expects 0 (each append starts an aggregate) or, with
		// chain, what its own last append returned (it is alone on its guard).
		load, chain bool
		// serialise lines the writers up in the process (as turns would if
		// keyed by partner), so no attempt conflicts.
		serialise bool
	}
	plans := []plan{{
		name:   "plain/new-aggregate",
		stored: newAggregate,
	}, {
		name:    "guard-literal/new-aggregate",
		stored:  newAggregate,
		guarded: newAggregate,
	}, {
		name:    "guard-wildcard/new-aggregate(today)",
		stored:  newAggregate,
		guarded: func(w, i int) string { return "guard.p." + deposit(w, i) + ".>" },
	}, {
		name:    "guard-wildcard/partner-per-writer",
		stored:  func(w, _ int) string { return "guard.p" + strconv.Itoa(w) + ".pub.deposit.received" },
		guarded: func(w, _ int) string { return "guard.p" + strconv.Itoa(w) + ".>" },
		chain:   true,
	}, {
		name:    "one-partner/guard-aggregate(today)",
		stored:  newAggregate,
		guarded: func(w, i int) string { return "guard.p." + deposit(w, i) + ".>" },
		load:    true,
	}, {
		name:    "one-partner/guard-bucket-64",
		stored:  func(w, i int) string { return "guard.p." + bucketOf(deposit(w, i)) + ".pub.deposit.received" },
		guarded: func(w, i int) string { return "guard.p." + bucketOf(deposit(w, i)) + ".>" },
		load:    true,
	}, {
		name:    "one-partner/guard-partner",
		stored:  func(int, int) string { return "guard.p.pub.deposit.received" },
		guarded: func(int, int) string { return "guard.p.>" },
		load:    true,
	}, {
		name:      "one-partner/guard-partner-serialised",
		stored:    func(int, int) string { return "guard.p.pub.deposit.received" },
		guarded:   func(int, int) string { return "guard.p.>" },
		load:      true,
		serialise: true,
	}}
	for _, pl := range plans {
		b.Run(pl.name, func(b *testing.B) {
			l, js := guardStream(b)
			ctx := context.Background()
			payload := []byte(strings.Repeat("x", 500))
			var (
				next, conflicts, gaveUp atomic.Int64
				turn                    sync.Mutex
				wg                      sync.WaitGroup
			)
			// appendOne is one append, retried on a conflict as Execute
			// retries; own is the writer's last sequence, for chain.
			appendOne := func(w, i int, own *uint64) error {
				if pl.serialise {
					turn.Lock()
					defer turn.Unlock()
				}
				for attempt := 1; ; attempt++ {
					msg := nats.NewMsg(pl.stored(w, i))
					msg.Data = payload
					var opts []jetstream.PublishOpt
					if pl.guarded != nil {
						g := pl.guarded(w, i)
						expect := *own
						if pl.load {
							recs, _, err := directMsgs(ctx, l.nc, "GUARD", directGetRequest{LastFor: g})
							switch {
							case errors.Is(err, ErrNotFound):
								expect = 0
							case err != nil:
								return err
							default:
								expect, _ = strconv.ParseUint(recs[0].Header.Get("Nats-Sequence"), 10, 64)
							}
						}
						opts = append(opts, jetstream.WithExpectLastSequenceForSubject(expect, g))
					}
					ack, err := js.PublishMsg(ctx, msg, opts...)
					if err == nil {
						if pl.chain {
							*own = ack.Sequence
						}
						return nil
					}
					if !isConflict(err) {
						return err
					}
					conflicts.Add(1)
					if attempt == maxAttempts {
						gaveUp.Add(1)
						return nil
					}
					if err := Backoff(ctx, attempt); err != nil {
						return err
					}
				}
			}
			b.ResetTimer()
			for w := range writers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					var own uint64
					for i := 0; next.Add(1) <= int64(b.N); i++ {
						if err := appendOne(w, i, &own); err != nil {
							b.Error(err)
							return
						}
					}
				}()
			}
			wg.Wait()
			b.StopTimer()
			stored := int64(b.N) - gaveUp.Load()
			b.ReportMetric(float64(stored)/b.Elapsed().Seconds(), "appends/s")
			b.ReportMetric(float64(conflicts.Load())/float64(b.N), "conflicts/append")
			b.ReportMetric(float64(gaveUp.Load())/float64(b.N), "gave-up/append")
		})
	}
}

// BenchmarkGuardHeader compares, interleaved so that the disk's varying
// sync latency (other processes share it) hits every kind alike, the
// latency of a plain append and of appends guarded the ways the layouts
// would guard them: 16 writers, the kinds taking turns.
// Synced is serve's setting; unsynced leaves only the server's CPU cost,
// where the guard's index look-up would show.
func BenchmarkGuardHeader(b *testing.B) {
	for _, unsynced := range []bool{false, true} {
		name := "synced"
		if unsynced {
			name = "unsynced"
		}
		b.Run(name, func(b *testing.B) { benchmarkGuardHeader(b, unsynced) })
	}
}

func benchmarkGuardHeader(b *testing.B, unsynced bool) {
	const writers = 16
	ctx := context.Background()
	l, err := Open(ctx, Config{Env: domain.Sandbox, DataDir: b.TempDir(), Unsynced: unsynced})
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	if _, err := l.js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{
		Name: "GUARD", Subjects: []string{"guard.>"}, Storage: jetstream.FileStorage,
	}); err != nil {
		b.Fatal(err)
	}
	kinds := []string{"plain", "guard-literal", "guard-aggregate-wildcard(today)", "guard-partner-wildcard"}
	var (
		next    atomic.Int64
		mu      sync.Mutex
		total   = make([]time.Duration, len(kinds))
		count   = make([]int, len(kinds))
		wg      sync.WaitGroup
		payload = []byte(strings.Repeat("x", 500))
	)
	b.ResetTimer()
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var partnerLast uint64 // the writer is alone on its partner
			for i := 0; next.Add(1) <= int64(b.N); i++ {
				k := int(next.Load()+int64(w)) % len(kinds)
				d := benchDeposit(w*1_000_000_000 + i)
				subject := "guard.p." + d + ".pub.deposit.received"
				var opts []jetstream.PublishOpt
				switch kinds[k] {
				case "guard-literal":
					opts = append(opts, jetstream.WithExpectLastSequenceForSubject(0, subject))
				case "guard-aggregate-wildcard(today)":
					opts = append(opts, jetstream.WithExpectLastSequenceForSubject(0, "guard.p."+d+".>"))
				case "guard-partner-wildcard":
					subject = "guard.p" + strconv.Itoa(w) + ".pub.deposit.received"
					opts = append(opts, jetstream.WithExpectLastSequenceForSubject(partnerLast, "guard.p"+strconv.Itoa(w)+".>"))
				}
				msg := nats.NewMsg(subject)
				msg.Data = payload
				start := time.Now()
				ack, err := l.js.PublishMsg(ctx, msg, opts...)
				took := time.Since(start)
				if err != nil {
					b.Error(kinds[k], err)
					return
				}
				if kinds[k] == "guard-partner-wildcard" {
					partnerLast = ack.Sequence
				}
				mu.Lock()
				total[k] += took
				count[k]++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "appends/s")
	for k, kind := range kinds {
		if count[k] > 0 {
			b.ReportMetric(float64(total[k].Microseconds())/float64(count[k]), kind+"-µs")
		}
	}
}
