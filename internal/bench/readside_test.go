package bench

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The read side at tiny sizes gives every figure, at both sizes, and the
// table shows them. Not a timed test: only that each was measured.
func TestReadSideReportsEveryFigure(t *testing.T) {
	if testing.Short() {
		t.Skip("fills two ledgers and starts the service several times at each")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var progress bytes.Buffer
	profiles := t.TempDir()
	heap, replay := filepath.Join(profiles, "heap"), filepath.Join(profiles, "replay")
	r, err := Run(ctx, Options{
		Dir: t.TempDir(), Only: "read", Events: 2000, Partners: 10, Burst: 50, Rounds: 2,
		// A second per window: the flow peak gets half of it, and on a
		// machine busy with the other packages' tests a synced append can
		// take longer than a 150 ms window, which then holds none.
		Duration: time.Second, Clients: 2, Size: 100, Memory: 256 << 20, Progress: &progress,
		HeapProfile: heap, ReplayProfile: replay, Serve: buildGiving(t),
	})
	if err != nil {
		t.Fatalf("%v\n%s", err, progress.String())
	}
	if len(r.Service) != 0 {
		t.Errorf("--only read measured the write path too: %+v", r.Service)
	}
	if r.Read == nil || len(r.Read.Sizes) != 2 {
		t.Fatalf("read side: %+v", r.Read)
	}
	positive := func(name string, v float64) {
		t.Helper()
		if !(v > 0) {
			t.Errorf("%s = %v, want > 0", name, v)
		}
	}
	positive("limit rate", r.Limit.Rate)
	positive("limit p99", r.Limit.P99)
	positive("page p99 growth", r.Read.PageP99Growth)
	for i, want := range []int{200, 2000} {
		s := r.Read.Sizes[i]
		if s.Events != want || s.WalkEvents != want/10 || s.Messages < uint64(want) {
			t.Errorf("size %d: %d public events (%d messages), walked %d; want %d, a tenth walked", i, s.Events, s.Messages, s.WalkEvents, want)
		}
		if s.Page.Errors != 0 || s.Dispatch.Paced.Errors != 0 || s.Dispatch.RawPaced.Errors != 0 {
			t.Errorf("size %d: %d page errors (%s), %d paced errors (%s), %d raw paced appends failed or unread\n%s", i, s.Page.Errors, s.Page.FirstError, s.Dispatch.Paced.Errors, s.Dispatch.Paced.FirstError, s.Dispatch.RawPaced.Errors, progress.String())
		}
		for name, v := range map[string]float64{
			"fill seconds": s.FillSeconds, "fill rate": s.FillRate, "catch-up": s.CatchUpSeconds, "catch-up rate": s.CatchUpRate, "start": s.StartSeconds,
			"pages": float64(s.Page.Requests), "page p50": s.Page.P50, "page p99": s.Page.P99, "page p99 ratio": s.PageP99Ratio,
			"walk rate": s.WalkRate, "raw rate": s.RawRate, "walk ratio": s.WalkRatio,
			"burst rate": s.Dispatch.BurstRate, "bare rate": s.Dispatch.BareRate, "dispatch ratio": s.Dispatch.Ratio,
			"burst CPU a delivery": s.Dispatch.BurstCPU, "bare CPU a POST": s.Dispatch.BareCPU,
			"fed rate": s.Dispatch.FedRate, "fed over bare": s.Dispatch.FedOverBare, "burst over fed": s.Dispatch.BurstOverFed, "fed CPU a POST": s.Dispatch.FedCPU,
			"flow peak": s.Dispatch.FlowPeak, "flow appends": s.Dispatch.FlowAppends, "paced target": s.Dispatch.PacedTarget, "paced events": float64(s.Dispatch.Paced.Requests),
			"paced p50": s.Dispatch.Paced.P50, "paced p99": s.Dispatch.Paced.P99, "paced p99 ratio": s.Dispatch.PacedP99Ratio,
			"raw paced appends": float64(s.Dispatch.RawPaced.Requests), "raw paced rate": s.Dispatch.RawPaced.Rate,
			"raw paced p99": s.Dispatch.RawPaced.P99, "paced p99 over raw": s.Dispatch.PacedOverRaw,
			"replay events": float64(s.ReplayEvents), "replay rate": s.ReplayRate, "raw stream rate": s.RawStreamRate, "replay ratio": s.ReplayRatio,
			"VmHWM": s.HWM, "serve start": s.ServeStartSeconds, "serve VmRSS": s.ServeRSS, "serve VmHWM": s.ServeHWM, "serve heap in use": s.ServeHeapInuse, "serve live heap": s.ServeLiveHeap,
		} {
			positive(strings.Join([]string{"size", string(rune('0' + i)), name}, " "), v)
		}
		// A raw message can reach its reader before its publisher sees the
		// acknowledgement (both hear of it on one connection): that time is
		// 0, so under load the median may be.
		if rp := s.Dispatch.RawPaced; !(rp.P50 >= 0) || rp.P50 > rp.P99 {
			t.Errorf("size %d: raw paced p50 %v, p99 %v; want 0 <= p50 <= p99", i, rp.P50, rp.P99)
		}
		// Paced at half the measured peak: the least of the flow's, the
		// burst's and the raw limit's.
		if d := s.Dispatch; d.PacedTarget != max(min(d.FlowPeak, d.BurstRate, r.Limit.Before.Rate)/2, 1) {
			t.Errorf("size %d: paced at %v/s; flow peak %v, burst %v, limit %v", i, d.PacedTarget, d.FlowPeak, d.BurstRate, r.Limit.Before.Rate)
		}
		// Each round measured its own burst and bare loop; the figures
		// are their medians, which for two is their midpoint.
		if len(s.Dispatch.Rounds) != 2 {
			t.Fatalf("size %d: %d dispatch rounds, want 2", i, len(s.Dispatch.Rounds))
		}
		for j, r := range s.Dispatch.Rounds {
			for name, v := range map[string]float64{"burst rate": r.BurstRate, "bare rate": r.BareRate, "ratio": r.Ratio, "burst CPU": r.BurstCPU, "bare CPU": r.BareCPU, "fed rate": r.FedRate, "fed CPU": r.FedCPU} {
				positive("size "+strconv.Itoa(i)+" round "+strconv.Itoa(j+1)+" "+name, v)
			}
			if math.Abs(r.Ratio-r.BurstRate/r.BareRate) > 1e-9 || math.Abs(r.FedOverBare-r.FedRate/r.BareRate) > 1e-9 || math.Abs(r.BurstOverFed-r.BurstRate/r.FedRate) > 1e-9 {
				t.Errorf("size %d round %d: ratios %v, %v, %v are not the burst's, the fed loop's and the bare loop's rates' (%v, %v, %v)", i, j+1, r.Ratio, r.FedOverBare, r.BurstOverFed, r.BurstRate, r.FedRate, r.BareRate)
			}
		}
		r1, r2 := s.Dispatch.Rounds[0], s.Dispatch.Rounds[1]
		if d := s.Dispatch; d.Ratio != (r1.Ratio+r2.Ratio)/2 || d.BurstRate != (r1.BurstRate+r2.BurstRate)/2 || d.BareCPU != (r1.BareCPU+r2.BareCPU)/2 || d.FedOverBare != (r1.FedOverBare+r2.FedOverBare)/2 {
			t.Errorf("size %d: dispatch %+v is not the median of its rounds", i, d)
		}
		// Serve's own memory: its peak holds what it has now, and the Go
		// heap is part of what is resident.
		if s.ServePages != servePages || s.ServeHWM < s.ServeRSS || s.ServeHeapInuse > s.ServeRSS {
			t.Errorf("size %d: serve read %d pages (want %d), VmRSS %.1f MiB, VmHWM %.1f MiB, heap in use %.1f MiB", i, s.ServePages, servePages, s.ServeRSS, s.ServeHWM, s.ServeHeapInuse)
		}
	}
	for _, name := range []string{heap + ".200", heap + ".2000", heap + ".serve.200", heap + ".serve.2000",
		replay + ".200", replay + ".200.raw", replay + ".2000", replay + ".2000.raw"} {
		// A profile is a gzipped protocol buffer (what go tool pprof reads).
		zr, err := gzip.NewReader(mustOpen(t, name))
		if err != nil {
			t.Errorf("profile %s: %v", filepath.Base(name), err)
			continue
		}
		if body, err := io.ReadAll(zr); err != nil || len(body) == 0 {
			t.Errorf("profile %s: %d bytes, %v", filepath.Base(name), len(body), err)
		}
	}
	var table bytes.Buffer
	if err := r.WriteTable(&table); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"projector catch-up", "page at a random cursor", "walk (limit 100) vs raw ordered read", "dispatch burst", "median of 2 rounds", "the bare POSTs fed from the ledger", "peak of appends flowing to deliveries", "append → delivered", "raw append → read at the same pace", "replay vs raw", "VmHWM of the bench's process", "serve in its own process: VmRSS / VmHWM", "page p99 growth"} {
		if !strings.Contains(table.String(), want) {
			t.Errorf("the table lacks %q:\n%s", want, table.String())
		}
	}
}

func mustOpen(t *testing.T, path string) *os.File {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

// A serve that exits instead of serving fails the measurement with the end
// of its stderr, and leaves no process behind.
func TestServeChildThatDiesFailsWithItsStderr(t *testing.T) {
	dir := t.TempDir()
	exe := filepath.Join(dir, "giving")
	script := "#!/bin/sh\necho \"cannot serve: $*\" >&2\nexit 3\n"
	if err := os.WriteFile(exe, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	rs := &readState{r: &Report{opts: Options{Serve: exe, Memory: 256 << 20, Progress: io.Discard}}, dir: filepath.Join(dir, "read")}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	size := ReadSize{Events: 10}
	err := rs.serveMemory(ctx, &size)
	if err == nil || !strings.Contains(err.Error(), "exit status 3") || !strings.Contains(err.Error(), "cannot serve: serve --env sandbox --data "+rs.dir) {
		t.Fatalf("want the exit and the stderr's tail, got %v", err)
	}
	if size.ServeRSS != 0 || size.ServeHWM != 0 {
		t.Errorf("a dead serve has figures: %+v", size)
	}
}

// A serve that never gets ready is killed when the bench gives up (here
// its context ends), and reaped: no process is left behind.
func TestServeChildIsKilledWhenTheBenchGivesUp(t *testing.T) {
	dir := t.TempDir()
	exe, pidFile := filepath.Join(dir, "giving"), filepath.Join(dir, "pid")
	script := "#!/bin/sh\necho $$ > " + pidFile + "\nexec sleep 600\n"
	if err := os.WriteFile(exe, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	rs := &readState{r: &Report{opts: Options{Serve: exe, Memory: 256 << 20, Progress: io.Discard}}, dir: filepath.Join(dir, "read")}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- rs.serveMemory(ctx, &ReadSize{Events: 10}) }()
	var pid int
	if err := poll(context.Background(), time.Minute, "the child to write its pid", func() (bool, error) {
		b, _ := os.ReadFile(pidFile)
		pid, _ = strconv.Atoi(strings.TrimSpace(string(b)))
		return pid > 0, nil
	}); err != nil {
		t.Fatal(err)
	}
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("want the context's end, got %v", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("serveMemory did not return after its context ended")
	}
	if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Errorf("the child %d is still there after the bench gave up (kill -0: %v)", pid, err)
	}
}

// buildGiving builds the giving executable for the read side to run serve
// from.
func buildGiving(t *testing.T) string {
	t.Helper()
	exe := filepath.Join(t.TempDir(), "giving")
	out, err := exec.Command("go", "build", "-o", exe, "github.com/partnergiving/giving/cmd/giving").CombinedOutput()
	if err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return exe
}
