package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"time"

	"github.com/rs/zerolog"
	"github.com/segmentio/ksuid"

	"github.com/partnergiving/giving/app"
	"github.com/partnergiving/giving/domain"
	"github.com/partnergiving/giving/eventlog"
	"github.com/partnergiving/giving/eventlog/probe"
	"github.com/partnergiving/giving/internal/stack"
	"github.com/partnergiving/giving/projections"
	"github.com/partnergiving/giving/sandbox"
)

// The read side, measured at two ledger sizes in one run: a data directory
// is filled (unsynced, with real deposit events spread over the partners)
// to the small size, then to the large one, and at each the service is
// started on it and measured over loopback HTTP: the feed's pages and
// walk, webhook dispatch, replay and memory.

// ReadReport is the read side at both sizes.
type ReadReport struct {
	Partners int        `json:"partners"`
	Sizes    []ReadSize `json:"sizes"`
	// PageP99Growth is the random-cursor page p99 at the large size over
	// the one at the small size.
	PageP99Growth float64 `json:"page_p99_growth"`
}

// ReadSize is the read side at one ledger size.
type ReadSize struct {
	// Events are the public events in the ledger, Messages every stored
	// message (each deposit is an internal and a public event).
	Events   int    `json:"public_events"`
	Messages uint64 `json:"messages"`
	// FillSeconds is the unsynced fill up to this size; FillRate its
	// messages per second. CatchUpSeconds is the service's projector
	// applying what the fill added; StartSeconds starting the service on
	// the directory until its webhook fan-out has settled every event.
	FillSeconds    float64 `json:"fill_seconds"`
	FillRate       float64 `json:"fill_messages_per_second"`
	CatchUpSeconds float64 `json:"catch_up_seconds"`
	CatchUpRate    float64 `json:"catch_up_messages_per_second"`
	StartSeconds   float64 `json:"start_and_fan_out_seconds"`

	// Page is GET /v1/events?limit=100 at a random cursor of the large
	// partner, one client; PageP99Ratio its p99 over the raw limit's.
	Page         Measure `json:"page"`
	PageP99Ratio float64 `json:"page_p99_ratio"`

	// The walk reads all of the large partner's feed, limit 100, over
	// HTTP; RawRate is an ordered consumer's read of the same events.
	WalkEvents int     `json:"walk_events"`
	WalkRate   float64 `json:"walk_events_per_second"`
	RawRate    float64 `json:"raw_read_events_per_second"`
	WalkRatio  float64 `json:"walk_ratio"`

	Dispatch Dispatch `json:"dispatch"`

	// Replay is the projector's rebuild (what giving replay runs), events
	// per second, against an ordered consumer's raw read of the stream.
	ReplayEvents  uint64  `json:"replay_events"`
	ReplayRate    float64 `json:"replay_events_per_second"`
	RawStreamRate float64 `json:"raw_stream_read_per_second"`
	ReplayRatio   float64 `json:"replay_ratio"`
	// ReplayMergeSeconds is how long the service, serving from the
	// rebuilt file, then took to merge the deposits the rebuild left as
	// runs (projections.Store.RunsLeft), applying nothing else.
	ReplayMergeSeconds float64 `json:"replay_merge_seconds"`

	// HWM is the bench process's peak resident memory (VmHWM, MiB) from
	// the projector's catch-up at this size to the end of its in-process
	// measurements. The service measured above runs in the bench's process,
	// so this includes the fill's leftovers, the catch-up, the clients and
	// the receiver: it is the bench's figure, not serve's.
	HWM float64 `json:"bench_vm_hwm_mib"`

	// Serve's own memory: "giving serve" in a child process on this
	// size's data directory (serveproc.go), sampled after it started,
	// became ready with no webhook delivery waiting (ServeStartSeconds) and
	// served ServePages random-cursor pages of the big partner's feed.
	// ServeRSS and ServeHWM are its VmRSS and VmHWM (MiB),
	// ServeHeapInuse its Go heap in use (MiB), and ServeLiveHeap the heap
	// in use after a collection it was then made to run: what it keeps
	// live.
	ServeStartSeconds float64 `json:"serve_start_seconds"`
	ServePages        int     `json:"serve_pages"`
	ServeRSS          float64 `json:"serve_rss_mib"`
	ServeHWM          float64 `json:"serve_hwm_mib"`
	ServeHeapInuse    float64 `json:"serve_heap_inuse_mib"`
	ServeLiveHeap     float64 `json:"serve_live_heap_mib"`
}

// readSide fills one data directory to the small and the large size and
// measures the service at each.
func (r *Report) readSide(ctx context.Context, dir string) error {
	o := r.opts
	hooks, err := newReceiver()
	if err != nil {
		return err
	}
	defer hooks.close()
	rs := &readState{r: r, dir: filepath.Join(dir, "read"), run: ksuid.New().String()[:10], hooks: hooks}
	if err := rs.setUp(ctx); err != nil {
		return fmt.Errorf("read side set-up: %w", err)
	}
	r.Read = &ReadReport{Partners: o.Partners}
	for _, n := range []int{o.smallEvents(), o.Events} {
		size, err := rs.measure(ctx, n)
		if err != nil {
			return fmt.Errorf("read side at %d events: %w", n, err)
		}
		r.Read.Sizes = append(r.Read.Sizes, size)
	}
	if small := r.Read.Sizes[0].Page.P99; small > 0 {
		r.Read.PageP99Growth = r.Read.Sizes[1].Page.P99 / small
	}
	return nil
}

// smallEvents is N1: 10,000 public events, or a tenth of N2 when N2 is
// not ten times that.
func (o Options) smallEvents() int {
	return max(min(10_000, o.Events/10), 1)
}

// readState is what the read side keeps between its steps.
type readState struct {
	r     *Report
	dir   string
	run   string // makes the bench's bank traces unique to this run
	hooks *receiver

	// big is the partner holding a tenth of the public events, with an API
	// key; bigSeqs are its public events' sequences.
	big, bigKey string
	bigChurch   string
	bigSeqs     []uint64
	// cursorKey signs feed cursors, for pages read with no service in
	// the bench's process.
	cursorKey []byte
	// others are the other partners of the fill, each with a church.
	others, otherChurches []string
	// hook is the partner with the webhook endpoint; nothing else writes
	// its events.
	hook, hookChurch string
	deposits         int
	events           int
}

// setUp creates the partners with keys and the webhook endpoint through a
// running service, then the fill's other partners.
func (rs *readState) setUp(ctx context.Context) error {
	rs.r.progress("read side: partners and a webhook endpoint")
	svc, err := startService(ctx, rs.dir, rs.r.opts.Memory)
	if err != nil {
		return err
	}
	defer svc.close()
	var key domain.NewKey
	if rs.big, key, err = svc.st.Operators.CreatePartner(ctx, "Bench feed partner", nil, domain.Brand{}); err != nil {
		return err
	}
	rs.bigKey = key.Secret
	rs.cursorKey = svc.st.Secrets.Key("cursor")
	if rs.hook, _, err = svc.st.Operators.CreatePartner(ctx, "Bench webhook partner", nil, domain.Brand{}); err != nil {
		return err
	}
	if err := svc.st.Projector.CatchUp(ctx); err != nil {
		return err
	}
	if _, err := svc.st.App.CreateEndpoint(ctx, rs.hook, app.EndpointSettings{URL: rs.hooks.url + "/hook", EventTypes: []string{"deposit.received"}}); err != nil {
		return err
	}
	rs.bigChurch, rs.hookChurch = domain.NewID(domain.PrefixChurch), domain.NewID(domain.PrefixChurch)
	var created []domain.Event
	for i := range max(rs.r.opts.Partners-1, 1) {
		id := domain.NewID(domain.PrefixPartner)
		var p domain.Partner
		ev, err := domain.CreatePartner(&p, id, fmt.Sprintf("Bench partner %d", i), domain.Sandbox, nil, domain.Brand{}, time.Now())
		if err != nil {
			return err
		}
		created = append(created, ev)
		rs.others = append(rs.others, id)
		rs.otherChurches = append(rs.otherChurches, domain.NewID(domain.PrefixChurch))
	}
	_, err = probe.Fill(ctx, svc.st.Ledger, created)
	return err
}

// deposit is one bank credit as the service records it: the public
// deposit.received carrying the internal deposit.credited.
func (rs *readState) deposit(partner, church string) (domain.Event, error) {
	rs.deposits++
	now := time.Now()
	ev, err := domain.ReconcileCredit(domain.Deposit{}, domain.Credit{
		PartnerID: partner, ChurchID: church, Trace: "bench-" + rs.run + "-" + strconv.Itoa(rs.deposits),
		AccountRef: "acct_bench", Amount: domain.Hundredths(100 + rs.deposits%100_000), BankTS: now,
	}, now)
	if err != nil {
		return domain.Event{}, err
	}
	return *ev, nil
}

// fill appends deposits up to n public events, a tenth of them the big
// partner's and the rest spread evenly over the others, on a ledger
// opened unsynced; the service is not running. It returns how long it took,
// how many messages it added and the ledger's length after them.
func (rs *readState) fill(ctx context.Context, n int) (time.Duration, uint64, uint64, error) {
	l, err := eventlog.Open(ctx, eventlog.Config{Env: domain.Sandbox, DataDir: rs.dir, Memory: rs.r.opts.Memory, Unsynced: true})
	if err != nil {
		return 0, 0, 0, err
	}
	defer l.Close()
	before, err := l.LastSeq(ctx)
	if err != nil {
		return 0, 0, 0, err
	}
	start := time.Now()
	const chunk = 5000
	last := time.Now()
	for rs.events < n {
		batch := make([]domain.Event, 0, chunk)
		big := make([]int, 0, chunk/10+1)
		for i := 0; i < chunk && rs.events < n; i++ {
			partner, church := rs.big, rs.bigChurch
			if rs.events%10 != 0 {
				k := rs.events % len(rs.others)
				partner, church = rs.others[k], rs.otherChurches[k]
			}
			dep, err := rs.deposit(partner, church)
			if err != nil {
				return 0, 0, 0, err
			}
			if partner == rs.big {
				big = append(big, len(batch))
			}
			batch = append(batch, dep)
			rs.events++
		}
		seqs, err := probe.Fill(ctx, l, batch)
		if err != nil {
			return 0, 0, 0, err
		}
		for _, i := range big {
			rs.bigSeqs = append(rs.bigSeqs, seqs[i])
		}
		if time.Since(last) > 5*time.Second {
			last = time.Now()
			rs.r.progress("  filled %d/%d public events (%.0f messages/s)", rs.events, n, float64(rs.events)/time.Since(start).Seconds())
		}
	}
	slices.Sort(rs.bigSeqs) // concurrent publishes store out of order
	elapsed := time.Since(start)
	msgs, err := l.LastSeq(ctx)
	return elapsed, msgs - before, msgs, err
}

// burst is a burst of the webhook partner's events (fillHooks): their
// public events' ids, and the ledger's sequences from the first to the
// last of them, which hold nothing else.
type burst struct {
	ids         map[string]bool
	first, last uint64
}

// fillHooks appends n deposits of the webhook partner, unsynced, while the
// service is stopped.
func (rs *readState) fillHooks(ctx context.Context, n int) (burst, error) {
	l, err := eventlog.Open(ctx, eventlog.Config{Env: domain.Sandbox, DataDir: rs.dir, Memory: rs.r.opts.Memory, Unsynced: true})
	if err != nil {
		return burst{}, err
	}
	defer l.Close()
	b := burst{ids: map[string]bool{}}
	var batch []domain.Event
	for range n {
		dep, err := rs.deposit(rs.hook, rs.hookChurch)
		if err != nil {
			return burst{}, err
		}
		b.ids[dep.ID] = true
		batch = append(batch, dep)
	}
	seqs, err := probe.Fill(ctx, l, batch)
	if err != nil {
		return burst{}, err
	}
	b.first, b.last = slices.Min(seqs), slices.Max(seqs)
	if got := b.last - b.first + 1; got != uint64(n) {
		// The service is stopped and the fill's publishes carry nothing
		// else: anything between them is another writer's.
		return burst{}, fmt.Errorf("burst fill: %d events stored over %d sequences", n, got)
	}
	return b, nil
}

// measure fills to n public events and measures the service there.
func (rs *readState) measure(ctx context.Context, n int) (ReadSize, error) {
	o := rs.r.opts
	rs.r.progress("read side: filling to %d public events over %d partners (unsynced)", n, o.Partners)
	fillTime, added, msgs, err := rs.fill(ctx, n)
	if err != nil {
		return ReadSize{}, fmt.Errorf("fill: %w", err)
	}
	size := ReadSize{Events: n, Messages: msgs, FillSeconds: fillTime.Seconds()}
	if fillTime > 0 {
		size.FillRate = float64(added) / fillTime.Seconds()
	}
	rs.r.progress("  %d messages in %.1f s; the service's projector catches up", msgs, size.FillSeconds)
	resetHWM()
	start := time.Now()
	projected, err := rs.project(ctx)
	if err != nil {
		return size, err
	}
	size.CatchUpSeconds = time.Since(start).Seconds()
	size.CatchUpRate = float64(projected) / size.CatchUpSeconds
	rs.r.progress("  caught up in %.1f s; starting the service", size.CatchUpSeconds)
	start = time.Now()
	svc, err := startService(ctx, rs.dir, o.Memory)
	if err != nil {
		return size, err
	}
	if err := svc.caughtUp(ctx); err != nil {
		svc.close()
		return size, err
	}
	size.StartSeconds = time.Since(start).Seconds()
	rs.r.progress("  started, webhook fan-out caught up, in %.1f s", size.StartSeconds)
	err = rs.feed(ctx, svc, &size)
	if err == nil && o.HeapProfile != "" {
		err = writeHeapProfile(fmt.Sprintf("%s.%d", o.HeapProfile, n))
	}
	svc.close()
	if err != nil {
		return size, err
	}
	if err := rs.dispatchAndReplay(ctx, &size); err != nil {
		return size, err
	}
	if size.HWM, err = procMiB(0, "VmHWM"); err != nil {
		return size, err
	}
	rs.r.progress("  VmHWM of the bench's process %.0f MiB", size.HWM)
	return size, rs.serveMemory(ctx, &size)
}

// project runs the service's projector (the one a serving instance runs,
// projections.Projector.Run) on the filled directory until it has applied
// the whole ledger. It runs outside the service because a service start
// waits at most 5 minutes for its projections, less than a million events
// take on a small machine. It returns how many messages it applied.
func (rs *readState) project(ctx context.Context) (uint64, error) {
	cfg := eventlog.Config{Env: domain.Sandbox, DataDir: rs.dir, Memory: rs.r.opts.Memory}
	l, err := eventlog.Open(ctx, cfg)
	if err != nil {
		return 0, err
	}
	defer l.Close()
	store, err := projections.Open(stack.ProjectionsPath(cfg))
	if err != nil {
		return 0, err
	}
	defer store.Close()
	from := store.Applied()
	p := projections.NewProjector(store, l, zerolog.Nop())
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		p.Run(runCtx)
	}()
	defer func() {
		cancel()
		<-done
	}()
	last, err := l.LastSeq(ctx)
	if err != nil {
		return 0, err
	}
	start := time.Now()
	err = poll(ctx, time.Hour, "the projector to catch up", func() (bool, error) {
		applied := store.Applied()
		if time.Since(start) > 10*time.Second {
			start = time.Now()
			rs.r.progress("    projected %d/%d messages", applied, last)
		}
		return applied >= last, nil
	})
	return last - from, err
}

// caughtUp waits until the projections hold the whole ledger and the
// webhook fan-out has settled every event.
func (s *service) caughtUp(ctx context.Context) error {
	if err := s.st.Projector.CatchUp(ctx); err != nil {
		return err
	}
	return poll(ctx, 30*time.Minute, "the webhook fan-out to catch up", func() (bool, error) {
		behind, err := s.st.Dispatcher.FanOutBehind(ctx)
		return behind == 0, err
	})
}

// poll checks cond every 20 ms until it holds, fails, or limit passes.
func poll(ctx context.Context, limit time.Duration, what string, cond func() (bool, error)) error {
	deadline := time.Now().Add(limit)
	for {
		ok, err := cond()
		if err != nil || ok {
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("gave up waiting for %s after %s", what, limit)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// feed measures random-cursor pages and the whole walk of the big
// partner's feed, and the raw read of the same events.
func (rs *readState) feed(ctx context.Context, svc *service, size *ReadSize) error {
	o := rs.r.opts
	client, err := sandbox.NewClient(svc.base, rs.bigKey)
	if err != nil {
		return err
	}
	cursors := domain.NewCursors(svc.st.Secrets.Key("cursor"))
	rs.r.progress("  feed: 100-event pages at random cursors, 1 client, %s", o.Duration)
	var lats []time.Duration
	end := time.Now().Add(o.Duration)
	start := time.Now()
	for time.Now().Before(end) && ctx.Err() == nil {
		i := rand.IntN(max(len(rs.bigSeqs)-100, 1))
		cur := cursors.EncodeSeq(domain.CursorEvents, rs.big, rs.bigSeqs[i])
		at := time.Now()
		page, err := readPage(ctx, client, cur)
		lats = append(lats, time.Since(at))
		if err != nil || len(page.Data) == 0 {
			size.Page.Errors++
			if size.Page.FirstError == "" {
				size.Page.FirstError = fmt.Sprintf("%v (%d events)", err, len(page.Data))
			}
		}
	}
	size.Page = latencies(lats, time.Since(start), size.Page)
	rs.r.progress("    p50 %.1f ms, p99 %.1f ms (%d pages, %d errors)", size.Page.P50, size.Page.P99, size.Page.Requests, size.Page.Errors)

	rs.r.progress("  feed: walking the big partner's %d events, limit 100", len(rs.bigSeqs))
	start = time.Now()
	cur := ""
	for {
		page, err := readPage(ctx, client, cur)
		if err != nil {
			return fmt.Errorf("walk: %w", err)
		}
		size.WalkEvents += len(page.Data)
		if !page.HasMore || page.NextCursor == nil {
			break
		}
		cur = *page.NextCursor
	}
	walk := time.Since(start)
	if size.WalkEvents != len(rs.bigSeqs) {
		return fmt.Errorf("walk: read %d events of the big partner's %d", size.WalkEvents, len(rs.bigSeqs))
	}
	size.WalkRate = float64(size.WalkEvents) / walk.Seconds()
	raw, err := probe.ReadRaw(ctx, svc.st.Ledger, svc.st.Ledger.Subjects().Public(rs.big, ""))
	if err != nil {
		return err
	}
	if raw.Messages != size.WalkEvents {
		return fmt.Errorf("raw read: %d events of the big partner's %d", raw.Messages, size.WalkEvents)
	}
	size.RawRate = raw.Rate()
	size.WalkRatio = size.WalkRate / size.RawRate
	rs.r.progress("    walk %.0f events/s, raw ordered read %.0f events/s: %.2f×", size.WalkRate, size.RawRate, size.WalkRatio)
	return nil
}

// feedPage is a feed answer.
type feedPage struct {
	Data       []json.RawMessage `json:"data"`
	NextCursor *string           `json:"next_cursor"`
	HasMore    bool              `json:"has_more"`
}

// readPage reads one 100-event page of the feed after cursor ("" for the
// first).
func readPage(ctx context.Context, c *sandbox.Client, cursor string) (feedPage, error) {
	path := "/v1/events?limit=100"
	if cursor != "" {
		path += "&since_cursor=" + url.QueryEscape(cursor)
	}
	var p feedPage
	err := c.CallJSON(ctx, http.MethodGet, path, nil, http.StatusOK, &p)
	return p, err
}

// latencies fills m's count, rate and percentiles from lats.
func latencies(lats []time.Duration, elapsed time.Duration, m Measure) Measure {
	slices.Sort(lats)
	m.Requests = len(lats)
	if elapsed > 0 {
		m.Rate = float64(len(lats)) / elapsed.Seconds()
	}
	if len(lats) > 0 {
		m.P50, m.P99 = ms(lats[len(lats)/2]), ms(lats[len(lats)*99/100])
	}
	return m
}

// resetHWM resets the process's peak resident memory (Linux), so VmHWM
// tells one size's peak.
func resetHWM() { _ = os.WriteFile("/proc/self/clear_refs", []byte("5"), 0) }

// writeHeapProfile writes the live heap, after a collection, to path.
func writeHeapProfile(path string) error {
	runtime.GC()
	return writeProfile(path, "heap")
}

// writeProfile writes the named runtime profile (pprof.Lookup) to path.
func writeProfile(path, name string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := pprof.Lookup(name).WriteTo(f, 0); err != nil {
		f.Close()
		return fmt.Errorf("%s profile: %w", name, err)
	}
	return f.Close()
}
