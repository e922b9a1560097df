package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/partnergiving/giving/dispatcher"
	"github.com/partnergiving/giving/domain"
	"github.com/partnergiving/giving/eventlog/probe"
	"github.com/partnergiving/giving/internal/cpuprofile"
	"github.com/partnergiving/giving/internal/openloop"
)

// hookConcurrency is the attempts the dispatcher makes at once to one
// endpoint in the bench (its default), and the bare loop's concurrency.
const hookConcurrency = 8

// Dispatch is webhook delivery at one ledger size.
type Dispatch struct {
	Concurrency int `json:"concurrency"`
	// BurstEvents is each round's burst. The rates, the ratio and the CPU
	// times are the medians of the rounds' (DispatchRound): a burst at the
	// large size lasts about a second, and one burst's ratio moves by a
	// few hundredths from run to run on a shared machine.
	BurstEvents int     `json:"burst_events"`
	BurstRate   float64 `json:"burst_deliveries_per_second"`
	BareRate    float64 `json:"bare_posts_per_second"`
	Ratio       float64 `json:"ratio"`
	BurstCPU    float64 `json:"burst_cpu_us_per_delivery"`
	BareCPU     float64 `json:"bare_cpu_us_per_post"`
	// The fed loop's (DispatchRound), medians of the rounds'.
	FedRate      float64 `json:"fed_posts_per_second"`
	FedOverBare  float64 `json:"fed_over_bare"`
	BurstOverFed float64 `json:"burst_over_fed"`
	FedCPU       float64 `json:"fed_cpu_us_per_post"`
	// Rounds are the measured rounds, in order.
	Rounds []DispatchRound `json:"rounds"`
	// FlowPeak is the peak of events flowing from append to delivery:
	// events delivered a second (first receipts) while 16 publishers append
	// the webhook partner's events as fast as they are acknowledged, the
	// service applying and delivering them at once (flowPeak); where the
	// appends outrun the deliveries, what the deliveries sustain, so a
	// lower bound of the flow's peak; FlowAppends is the appends
	// acknowledged a second over the same window. On a machine whose cores the
	// appends, the projector, the dispatcher and the receiver share, it
	// is below both the burst rate (delivering what is stored) and the
	// raw synced limit (storing it alone).
	FlowPeak    float64 `json:"flow_peak_per_second"`
	FlowAppends float64 `json:"flow_appends_per_second"`
	// Paced is append acknowledged → delivered at PacedTarget events per
	// second: half the measured peak, the least of FlowPeak, the burst
	// rate and the raw synced limit. (Earlier the target was half
	// the lesser of the last two, which on this machine is close to
	// FlowPeak itself.) Its Rate is the appends achieved,
	// its Errors the events appended and not delivered within 30 s or not
	// appended; PacedSkipped counts the events skipped because 256 appends
	// were already under way.
	PacedTarget   float64 `json:"paced_target_per_second"`
	Paced         Measure `json:"paced"`
	PacedSkipped  int     `json:"paced_skipped"`
	PacedP99Ratio float64 `json:"paced_p99_ratio"`
	// RawPaced is the raw counterpart of Paced, measured right after it at
	// the same pace (probe.MeasureRawPaced): synced appends to a fresh
	// embedded server, each timed from its acknowledgement to its arrival
	// at a bare durable consumer that acknowledges it. Its Errors are the
	// appends not acknowledged or not read within 30 s; RawPacedSkipped
	// counts those skipped because 256 were under way. PacedOverRaw is
	// Paced's p99 over its.
	RawPaced        Measure `json:"raw_paced"`
	RawPacedSkipped int     `json:"raw_paced_skipped"`
	PacedOverRaw    float64 `json:"paced_p99_over_raw_paced_p99"`
}

// DispatchRound is one burst, with a service started afresh on it, and
// the bare and fed loops after it.
type DispatchRound struct {
	// BurstRate is how fast the dispatcher delivered the burst's events,
	// waiting when the service started, first receipt to last; BareRate a
	// bare loop of signed POSTs to the same receiver at the same
	// concurrency; Ratio the first over the second.
	BurstRate float64 `json:"burst_deliveries_per_second"`
	BareRate  float64 `json:"bare_posts_per_second"`
	Ratio     float64 `json:"ratio"`
	// BurstCPU and BareCPU are the process's CPU time (user and system)
	// per POST the receiver answered, µs, over the burst (its first
	// delivery to its last) and over the bare loop: what a delivery costs
	// beside a bare POST, which the machine's changing speed moves much
	// less than the two rates. Their ratio is not Ratio: the dispatcher
	// keeps the processors busy, the bare loop at the same concurrency
	// waits on its round trips part of the time.
	BurstCPU float64 `json:"burst_cpu_us_per_delivery"`
	BareCPU  float64 `json:"bare_cpu_us_per_post"`
	// FedRate is the bare loop's POSTs fed from the ledger (fedLoop): the
	// burst's events read again by a durable consumer that acknowledges
	// each once posted, beside an ordered read of them, with nothing of
	// the service. FedOverBare is it over BareRate (what reading the
	// ledger costs the POSTs), BurstOverFed BurstRate over it (what the
	// service adds to that); FedCPU its CPU time a POST, as BareCPU.
	FedRate      float64 `json:"fed_posts_per_second"`
	FedOverBare  float64 `json:"fed_over_bare"`
	BurstOverFed float64 `json:"burst_over_fed"`
	FedCPU       float64 `json:"fed_cpu_us_per_post"`
}

// receiver is a webhook receiver on loopback: it notes when each event id
// first arrived and answers 200.
type receiver struct {
	url string
	srv *http.Server
	mu  sync.Mutex
	got map[string]time.Time
	// answered counts every POST answered 200, repeats included.
	answered atomic.Int64
	// next, when set, is closed by the next POST answered 200.
	next atomic.Pointer[chan struct{}]
}

// nextPost returns a channel closed when the receiver next answers a POST.
func (rc *receiver) nextPost() <-chan struct{} {
	c := make(chan struct{})
	rc.next.Store(&c)
	return c
}

func newReceiver() (*receiver, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("webhook receiver: %w", err)
	}
	rc := &receiver{url: "http://" + ln.Addr().String(), got: map[string]time.Time{}}
	rc.srv = &http.Server{Handler: http.HandlerFunc(rc.serve), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = rc.srv.Serve(ln) }()
	return rc, nil
}

func (rc *receiver) serve(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	at := time.Now()
	var env struct {
		ID string `json:"event_id"`
	}
	if err == nil {
		err = json.Unmarshal(body, &env)
	}
	if err != nil || env.ID == "" || r.Header.Get(domain.WebhookSignatureHeader) == "" {
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	rc.mu.Lock()
	if _, ok := rc.got[env.ID]; !ok {
		rc.got[env.ID] = at
	}
	rc.mu.Unlock()
	rc.answered.Add(1)
	if c := rc.next.Swap(nil); c != nil {
		close(*c)
	}
	w.WriteHeader(http.StatusOK)
}

// forget drops the notes taken so far: each measured window (a burst, a
// bare loop, paced appends) starts with none. The notes are the bench's
// own live heap, in the process it shares with the service, and the
// collector marks them at every cycle: kept for the whole run they were
// half a million map entries by the large size's burst (the earlier
// size's burst, bare loop and paced appends), and a delivery there paid
// for marking them (the collector's share of a delivery 4.5 µs at 10k
// against 10.3 µs at 1M).
func (rc *receiver) forget() {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	rc.got = map[string]time.Time{}
}

// count is how many distinct event ids have arrived.
func (rc *receiver) count() int {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return len(rc.got)
}

// times returns when each of ids arrived, for those that did.
func (rc *receiver) times(ids map[string]bool) map[string]time.Time {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	out := map[string]time.Time{}
	for id := range ids {
		if at, ok := rc.got[id]; ok {
			out[id] = at
		}
	}
	return out
}

func (rc *receiver) close() { _ = rc.srv.Close() }

// dispatchAndReplay measures the dispatch in o.Rounds rounds (each with a
// service started afresh on a new burst), then, on the last round's
// service, paced latency and the replay.
func (rs *readState) dispatchAndReplay(ctx context.Context, size *ReadSize) error {
	o := rs.r.opts
	d := &size.Dispatch
	d.Concurrency, d.BurstEvents = hookConcurrency, o.Burst
	var svc *service
	for round := 1; round <= o.Rounds; round++ {
		if svc != nil {
			svc.close()
		}
		var r DispatchRound
		var err error
		if svc, r, err = rs.dispatchRound(ctx, size.Events, round); err != nil {
			return err
		}
		d.Rounds = append(d.Rounds, r)
	}
	defer svc.close()
	d.summarize()
	if o.Rounds > 1 {
		rs.r.progress("    median of %d rounds: %.0f deliveries/s, bare %.0f/s: %.3f×", o.Rounds, d.BurstRate, d.BareRate, d.Ratio)
	}

	rs.r.progress("  dispatch: the peak of appends flowing to deliveries, %d publishers for %s", flowPublishers, o.Duration/2)
	var err error
	if d.FlowPeak, d.FlowAppends, err = rs.flowPeak(ctx, svc, o.Duration/2); err != nil {
		return err
	}
	rs.r.progress("    %.0f deliveries/s (%.0f appends/s)", d.FlowPeak, d.FlowAppends)
	d.PacedTarget = max(min(d.FlowPeak, d.BurstRate, rs.r.Limit.Before.Rate)/2, 1)
	rs.r.progress("  dispatch: paced appends at %.0f/s for %s", d.PacedTarget, o.Duration)
	if d.Paced, d.PacedSkipped, err = rs.paced(ctx, svc, d.PacedTarget, o.Duration); err != nil {
		return err
	}
	rs.r.progress("    append → delivered p50 %.1f ms, p99 %.1f ms (%d events, %d errors, %d skipped: 256 appends under way)", d.Paced.P50, d.Paced.P99, d.Paced.Requests, d.Paced.Errors, d.PacedSkipped)
	raw, err := probe.MeasureRawPaced(ctx, rs.dir, d.PacedTarget, pacedSlots, o.Size, o.Duration)
	if err != nil {
		return fmt.Errorf("raw paced: %w", err)
	}
	d.RawPaced = Measure{Requests: raw.Messages, Errors: raw.Failed + raw.Lost, Rate: raw.Rate(), P50: ms(raw.P50), P99: ms(raw.P99)}
	d.RawPacedSkipped = raw.Skipped
	if d.RawPaced.P99 > 0 {
		d.PacedOverRaw = d.Paced.P99 / d.RawPaced.P99
	}
	rs.r.progress("    raw: %s; the service's p99 %.1f× that", raw, d.PacedOverRaw)
	return rs.replay(ctx, svc, size)
}

// dispatchRound stores a burst for the webhook partner while the service
// is stopped, starts it and times the deliveries, then runs the bare loop
// and the fed loop beside it. It returns the service still running (nil
// on an error).
func (rs *readState) dispatchRound(ctx context.Context, events, round int) (*service, DispatchRound, error) {
	o := rs.r.opts
	var r DispatchRound
	b, err := rs.fillHooks(ctx, o.Burst)
	if err != nil {
		return nil, r, fmt.Errorf("burst fill: %w", err)
	}
	ids := b.ids
	rs.r.progress("  dispatch, round %d of %d: %d deliveries waiting; starting the service", round, o.Rounds, o.Burst)
	rs.hooks.forget()
	// Profiles keep their names of a single round: the ledger size, then
	// the round when there are more.
	suffix := strconv.Itoa(events)
	if o.Rounds > 1 {
		suffix += ".r" + strconv.Itoa(round)
	}
	// The CPU time (and the profile) starts with the burst's first
	// delivery, as its rate does: what the service does on starting,
	// before it, is left out; what it does meanwhile (its projector
	// catching up on the burst) is in.
	window := rs.measureFromNextPost(ctx, suffix)
	svc, err := startService(ctx, rs.dir, o.Memory)
	if err != nil {
		_, _ = window.stop()
		return nil, r, err
	}
	fail := func(err error) (*service, DispatchRound, error) {
		svc.close()
		return nil, r, err
	}
	var got map[string]time.Time
	if err := poll(ctx, 10*time.Minute, "the burst's deliveries", func() (bool, error) {
		// Only the count until enough have arrived: times copies every id
		// under the receiver's lock, which every POST takes, and so slowed
		// the deliveries it was timing.
		if rs.hooks.count() < len(ids) {
			return false, nil
		}
		got = rs.hooks.times(ids)
		return len(got) == len(ids), nil
	}); err != nil {
		_, _ = window.stop()
		return fail(err)
	}
	if r.BurstCPU, err = window.stop(); err != nil {
		return fail(err)
	}
	r.BurstRate = receiptRate(got)
	if err := svc.caughtUp(ctx); err != nil {
		return fail(err)
	}
	stopBare, err := rs.startMeasuring(suffix + ".bare")
	if err != nil {
		return fail(err)
	}
	rs.hooks.forget()
	r.BareRate, err = rs.bareLoop(ctx, o.Duration)
	bareCPU, serr := stopBare()
	if err == nil {
		r.BareCPU, err = bareCPU, serr
	}
	if err != nil {
		return fail(err)
	}
	if r.BareRate == 0 {
		return fail(errors.New("bare loop: the receiver answered no signed POST"))
	}
	r.Ratio = r.BurstRate / r.BareRate
	rs.r.progress("    burst %.0f deliveries/s, bare signed POSTs %.0f/s: %.3f× (CPU %.0f vs %.0f µs a POST)", r.BurstRate, r.BareRate, r.Ratio, r.BurstCPU, r.BareCPU)
	if err := rs.fedLoop(ctx, svc, b, suffix, &r); err != nil {
		return fail(err)
	}
	return svc, r, nil
}

// fedLoop posts the burst's events again, as they are stored, through the
// bare loop's signed POSTs fed by eventlog.FeedRaw: a durable consumer
// reading the ledger, acknowledging each event once posted, beside an
// ordered read of the same events, as the service's dispatch reads them.
// Its rate over the bare loop's is what that reading costs the POSTs, the
// burst's over its what the service adds. It posts through an
// http.Client, as the bare loop does; the dispatcher's sender uses the
// transport directly, which costs a POST a little less.
func (rs *readState) fedLoop(ctx context.Context, svc *service, b burst, suffix string, r *DispatchRound) error {
	post := rs.newPoster("/fed")
	stop, err := rs.startMeasuring(suffix + ".fed")
	if err != nil {
		return err
	}
	rs.hooks.forget()
	// Bounded as the burst's wait is: a read that stalls fails the run.
	ctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	n := int(b.last - b.first + 1)
	fed, err := probe.FeedRaw(ctx, svc.st.Ledger, b.first, n, dispatcher.FanOutBatch, hookConcurrency, func(data []byte) bool {
		id, err := domain.EnvelopeEventID(data) // as the fan-out reads it
		return err == nil && post(ctx, id, data)
	})
	cpu, serr := stop()
	if err == nil {
		err = serr
	}
	if err != nil {
		return fmt.Errorf("fed loop: %w", err)
	}
	if fed.Failed > 0 || fed.Messages != n {
		return fmt.Errorf("fed loop: %d of %d events acknowledged, %d posts not answered 200", fed.Messages, n, fed.Failed)
	}
	// Timed as the burst is, first receipt to last at the receiver, so
	// that neither the consumers' set-up nor their removal counts.
	got := rs.hooks.times(b.ids)
	if len(got) != len(b.ids) {
		return fmt.Errorf("fed loop: the receiver got %d of the burst's %d events", len(got), len(b.ids))
	}
	r.FedRate, r.FedCPU = receiptRate(got), cpu
	r.FedOverBare, r.BurstOverFed = r.FedRate/r.BareRate, r.BurstRate/r.FedRate
	rs.r.progress("    fed from the ledger %.0f posts/s: %.3f× the bare loop; the burst %.3f× that (CPU %.0f µs a POST)", r.FedRate, r.FedOverBare, r.BurstOverFed, r.FedCPU)
	return nil
}

// summarize sets the dispatch's figures from its rounds: each the median
// of the rounds' (the ratio the median of their ratios, not the ratio of
// the median rates).
func (d *Dispatch) summarize() {
	median := func(of func(DispatchRound) float64) float64 {
		v := make([]float64, len(d.Rounds))
		for i, r := range d.Rounds {
			v[i] = of(r)
		}
		slices.Sort(v)
		if n := len(v); n%2 == 0 {
			return (v[n/2-1] + v[n/2]) / 2
		}
		return v[len(v)/2]
	}
	d.BurstRate = median(func(r DispatchRound) float64 { return r.BurstRate })
	d.BareRate = median(func(r DispatchRound) float64 { return r.BareRate })
	d.Ratio = median(func(r DispatchRound) float64 { return r.Ratio })
	d.BurstCPU = median(func(r DispatchRound) float64 { return r.BurstCPU })
	d.BareCPU = median(func(r DispatchRound) float64 { return r.BareCPU })
	d.FedRate = median(func(r DispatchRound) float64 { return r.FedRate })
	d.FedOverBare = median(func(r DispatchRound) float64 { return r.FedOverBare })
	d.BurstOverFed = median(func(r DispatchRound) float64 { return r.BurstOverFed })
	d.FedCPU = median(func(r DispatchRound) float64 { return r.FedCPU })
}

// postWindow measures the process from the receiver's next POST on.
type postWindow struct {
	started chan func() (float64, error)
	cancel  context.CancelFunc
}

// measureFromNextPost starts measuring (startMeasuring) when the receiver
// answers its next POST.
func (rs *readState) measureFromNextPost(ctx context.Context, suffix string) *postWindow {
	w := &postWindow{started: make(chan func() (float64, error), 1)}
	ctx, w.cancel = context.WithCancel(ctx)
	next := rs.hooks.nextPost()
	go func() {
		select {
		case <-next:
		case <-ctx.Done():
			w.started <- func() (float64, error) { return 0, ctx.Err() }
			return
		}
		stop, err := rs.startMeasuring(suffix)
		if err != nil {
			stop = func() (float64, error) { return 0, err }
		}
		w.started <- stop
	}()
	return w
}

// stop ends the measuring, or its wait for the first POST, and returns
// the process's CPU time per POST answered meanwhile, µs.
func (w *postWindow) stop() (float64, error) {
	w.cancel()
	return (<-w.started)()
}

// startMeasuring notes the POSTs the receiver has answered and the CPU
// time the process has used, and with a burst profile path also starts a
// CPU profile written there, suffixed with suffix. What it returns stops
// both and gives the process's CPU time per POST answered meanwhile, µs.
func (rs *readState) startMeasuring(suffix string) (stop func() (float64, error), err error) {
	path := rs.r.opts.BurstProfile
	stopProfile, err := cpuprofile.Start(path, suffix)
	if err != nil {
		return nil, err
	}
	if path != "" {
		if err := writeAllocs(path + "." + suffix + ".allocs.base"); err != nil {
			_ = stopProfile()
			return nil, err
		}
	}
	posts, cpu := rs.hooks.answered.Load(), processCPU()
	return func() (float64, error) {
		profileErr := stopProfile()
		n, used := rs.hooks.answered.Load()-posts, processCPU()-cpu
		perPost := float64(used.Microseconds()) / float64(max(n, 1))
		if path == "" || profileErr != nil {
			return perPost, profileErr
		}
		rs.r.progress("    profile %s.%s: %d POSTs answered, %.0f µs of process CPU each", path, suffix, n, perPost)
		return perPost, writeAllocs(path + "." + suffix + ".allocs")
	}, nil
}

// writeAllocs writes the allocations made since the process started (the
// "allocs" profile, sampled) to path. Two of them, at a window's start and
// end, give what the window allocated: go tool pprof -sample_index
// alloc_space -base <path>.allocs.base <path>.allocs.
func writeAllocs(path string) error { return writeProfile(path, "allocs") }

// processCPU is the CPU time the process has used, user and system.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// receiptRate is the receipts a second from the first of got to the last,
// as the burst and the fed loop are timed.
func receiptRate(got map[string]time.Time) float64 {
	var first, last time.Time
	for _, at := range got {
		if first.IsZero() || at.Before(first) {
			first = at
		}
		if at.After(last) {
			last = at
		}
	}
	return float64(len(got)-1) / last.Sub(first).Seconds()
}

// newPoster returns what the bare and the fed loops post with: a signed
// POST of an envelope to the receiver at path, answered 200, carrying what
// a delivery carries (both signatures, the Standard Webhooks id and
// timestamp, the attempt), signed per post with keys derived once, as the
// dispatcher does per endpoint.
func (rs *readState) newPoster(path string) func(ctx context.Context, id string, body []byte) bool {
	sign := domain.NewWebhookSigner(domain.GenerateWebhookSecret())
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: hookConcurrency}, Timeout: 10 * time.Second}
	url := rs.hooks.url + path
	return func(ctx context.Context, id string, body []byte) bool {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
		if err != nil {
			return false
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("User-Agent", domain.WebhookUserAgent)
		sign.Headers(id, 1, time.Now(), body, req.Header.Set)
		resp, err := client.Do(req)
		if err != nil {
			return false
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}
}

// bareLoop posts signed envelopes to the receiver from hookConcurrency
// loops for d and returns the answered posts per second. Each post carries
// what a delivery carries (both signatures, the Standard Webhooks id and
// timestamp, the attempt), computed per post.
func (rs *readState) bareLoop(ctx context.Context, d time.Duration) (float64, error) {
	dep, err := rs.deposit(rs.hook, rs.hookChurch)
	if err != nil {
		return 0, fmt.Errorf("bare loop: %w", err)
	}
	template, err := dep.Envelope()
	if err != nil {
		return 0, fmt.Errorf("bare loop: %w", err)
	}
	post := rs.newPoster("/bare")
	var ok, n atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	end := start.Add(d)
	for range hookConcurrency {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(end) && ctx.Err() == nil {
				id := "bare_" + strconv.FormatInt(n.Add(1), 10)
				if post(ctx, id, bytes.Replace(template, []byte(dep.ID), []byte(id), 1)) {
					ok.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	return float64(ok.Load()) / time.Since(start).Seconds(), nil
}

// flowPublishers is how many publishers flowPeak appends from, as many as
// the raw limit's by default.
const flowPublishers = 16

// flowPeak measures the peak of events flowing from append to delivery:
// flowPublishers goroutines append the webhook partner's deposit.received
// events, each one at a time, synced, as fast as they are acknowledged,
// for d, while the service applies and delivers them; the peak is the
// events the receiver first received over that window, a second (returned
// with the appends acknowledged over it, a second). The
// appends left undelivered at its end are waited for (up to 30 s), so
// that what follows starts with nothing queued.
func (rs *readState) flowPeak(ctx context.Context, svc *service, d time.Duration) (float64, float64, error) {
	// Twice what the raw limit's publishers stored in d, scaled to this
	// many publishers: synced appends do not outrun the raw limit, so the
	// events last the window; ones that did not would fail the figure.
	perPublisher := rs.r.Limit.Before.Rate / float64(max(rs.r.opts.Clients, 1))
	events := make([]domain.Event, max(int(2*perPublisher*flowPublishers*d.Seconds()), flowPublishers))
	for i := range events {
		dep, err := rs.deposit(rs.hook, rs.hookChurch)
		if err != nil {
			return 0, 0, err
		}
		events[i] = dep
	}
	rs.hooks.forget()
	var (
		next, appended atomic.Int64
		firstErr       atomic.Pointer[error]
		wg             sync.WaitGroup
	)
	start := time.Now()
	end := start.Add(d)
	for range flowPublishers {
		wg.Go(func() {
			for time.Now().Before(end) && ctx.Err() == nil {
				i := next.Add(1) - 1
				if i >= int64(len(events)) {
					return
				}
				if _, err := probe.Fill(ctx, svc.st.Ledger, events[i:i+1]); err != nil {
					firstErr.CompareAndSwap(nil, &err)
					return
				}
				appended.Add(1)
			}
		})
	}
	time.Sleep(time.Until(end))
	delivered, acked := rs.hooks.count(), appended.Load()
	elapsed := time.Since(start)
	wg.Wait()
	if next.Load() >= int64(len(events)) {
		return 0, 0, fmt.Errorf("flow peak: the %d events made for it ran out within %s", len(events), d)
	}
	if delivered == 0 {
		return 0, 0, fmt.Errorf("flow peak: nothing delivered in %s (%d appended)", d, acked)
	}
	if err := firstErr.Load(); err != nil {
		return 0, 0, fmt.Errorf("flow peak: append: %w", *err)
	}
	if err := poll(ctx, 30*time.Second, "the flow peak's deliveries", func() (bool, error) {
		return int64(rs.hooks.count()) >= appended.Load(), nil
	}); err != nil {
		return 0, 0, err
	}
	return float64(delivered) / elapsed.Seconds(), float64(acked) / elapsed.Seconds(), nil
}

// pacedSlots bounds the paced appends under way at once, the service's and
// their raw counterpart's.
const pacedSlots = 256

// paced appends the webhook partner's deposit.received events, each
// carrying its credit, at rate per second for d, and measures from each
// acknowledged append to its receipt. The appends are synced, as the
// service's, but not guarded on the partner's deposit book: the guard would
// line them up one at a time, and every event here is a new deposit. The
// events are built before the clock starts and appended in an open loop
// (openloop.Run). Events not delivered within 30 s of the end count as
// errors; events due while pacedSlots appends are under way are skipped
// and counted.
func (rs *readState) paced(ctx context.Context, svc *service, rate float64, d time.Duration) (Measure, int, error) {
	var (
		mu     sync.Mutex
		acked  = map[string]time.Time{}
		errs   int
		firstE string
	)
	rs.hooks.forget()
	events := make([]domain.Event, max(int(rate*d.Seconds()), 1))
	for i := range events {
		dep, err := rs.deposit(rs.hook, rs.hookChurch)
		if err != nil {
			return Measure{}, 0, err
		}
		events[i] = dep
	}
	skipped, elapsed := openloop.Run(ctx, len(events), rate, pacedSlots, func(i int) {
		ev := events[i]
		_, err := probe.Fill(ctx, svc.st.Ledger, []domain.Event{ev})
		at := time.Now()
		mu.Lock()
		defer mu.Unlock()
		if err != nil {
			errs++
			if firstE == "" {
				firstE = err.Error()
			}
			return
		}
		acked[ev.ID] = at
	})
	ids := make(map[string]bool, len(acked))
	for id := range acked {
		ids[id] = true
	}
	var got map[string]time.Time
	_ = poll(ctx, 30*time.Second, "the paced deliveries", func() (bool, error) {
		got = rs.hooks.times(ids)
		return len(got) == len(ids), nil
	})
	lats := make([]time.Duration, 0, len(got))
	for id, at := range got {
		lats = append(lats, at.Sub(acked[id]))
	}
	m := latencies(lats, elapsed, Measure{Errors: errs + len(ids) - len(got), FirstError: firstE})
	m.Rate = float64(len(acked)) / elapsed.Seconds()
	return m, skipped, nil
}

// mergeWait bounds the wait for the service to merge the deposit runs a
// rebuild left (a million deposits: about a second).
const mergeWait = 2 * time.Minute

// replay reads the whole stream raw, then rebuilds the service's
// projections as giving replay does. The raw read comes first, on the
// service as the paced appends left it: after a rebuild the old
// projection file's page cache is released in the background (Store.swap,
// a quarter of a second of one core at a million events), which would slow
// a raw read measured after it.
func (rs *readState) replay(ctx context.Context, svc *service, size *ReadSize) error {
	suffix := strconv.Itoa(size.Events)
	stopProfile, err := cpuprofile.Start(rs.r.opts.ReplayProfile, suffix+".raw")
	if err != nil {
		return err
	}
	raw, err := probe.ReadRaw(ctx, svc.st.Ledger, svc.st.Ledger.Subjects().All())
	if profileErr := stopProfile(); err == nil {
		err = profileErr
	}
	if err != nil {
		return err
	}
	size.RawStreamRate = raw.Rate()
	rs.r.progress("  replay: rebuilding the projections")
	if stopProfile, err = cpuprofile.Start(rs.r.opts.ReplayProfile, suffix); err != nil {
		return err
	}
	start := time.Now()
	last := start
	err = svc.st.Projector.Rebuild(ctx, func(applied, total uint64) {
		size.ReplayEvents = applied
		if time.Since(last) > 5*time.Second {
			last = time.Now()
			rs.r.progress("    %d/%d events", applied, total)
		}
	})
	elapsed := time.Since(start)
	if profileErr := stopProfile(); err == nil {
		err = profileErr
	}
	if err != nil {
		return fmt.Errorf("replay: %w", err)
	}
	size.ReplayRate = float64(size.ReplayEvents) / elapsed.Seconds()
	size.ReplayRatio = size.ReplayRate / size.RawStreamRate
	rs.r.progress("    replay %.0f events/s, raw ordered read %.0f events/s: %.2f×", size.ReplayRate, size.RawStreamRate, size.ReplayRatio)
	// The service serves from the rebuilt file at once and merges its
	// deposit runs meanwhile; the serve measured next opens the file
	// merged, as it would be by then.
	start = time.Now()
	for svc.st.Store.RunsLeft() {
		if time.Since(start) > mergeWait {
			return fmt.Errorf("replay: the deposit runs were not merged %s after the rebuild", mergeWait)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(5 * time.Millisecond):
		}
	}
	size.ReplayMergeSeconds = time.Since(start).Seconds()
	rs.r.progress("    then merged the rebuild's deposit runs in %.2f s", size.ReplayMergeSeconds)
	return nil
}
