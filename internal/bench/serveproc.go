package bench

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/partnergiving/giving/domain"
	"github.com/partnergiving/giving/sandbox"
)

// Serve's own memory. The service the other figures measure runs in the
// bench's process, which also holds the fill, the projector's catch-up,
// the clients and the webhook receiver, so that process's VmHWM is the
// bench's, not the service's. At each ledger size, after the in-process
// measurements have closed their service, the read side starts
// "giving serve" (Options.Serve) as a child process on the filled data
// directory, waits until it is ready and no webhook delivery waits, reads
// servePages feed pages of the big partner at random cursors over HTTP,
// and samples the child's /proc/<pid>/status and Go heap, then its heap
// after a forced collection (what it keeps live, which no --memory can
// hold it below), then stops it with SIGTERM.
//
// The child starts minutes after the fill, inside the ledger stream's
// duplicate window (eventlog.Open's default, 15 minutes): the embedded
// server rebuilds its dedupe map from every message in that window when it
// starts, so at these sizes serve's figures include ids of the whole fill,
// which a serve whose ledger took longer than the window to fill does not
// hold.

// servePages is how many feed pages the child serves before it is sampled.
const servePages = 200

// Bounds on the child's waits: starting on a million events has taken
// 140 s, and serve drains HTTP for up to 20 s when told to
// stop.
const (
	serveStartLimit = 15 * time.Minute
	serveStopLimit  = 30 * time.Second
)

// serveChild is a running "giving serve" child process.
type serveChild struct {
	cmd    *exec.Cmd
	stderr string        // the file its stderr goes to
	exited chan struct{} // closed once it has exited; waitErr then holds why
	// api and metrics receive the addresses serve prints on stdout.
	api, metrics chan string
	waitErr      error
}

// serveMemory starts giving serve on the read side's data directory,
// reads the big partner's feed from it, and records its own memory in
// size. The child is stopped, or killed, on every path out.
func (rs *readState) serveMemory(ctx context.Context, size *ReadSize) (err error) {
	rs.r.progress("  serve in its own process: starting %s serve on the data directory", rs.r.opts.Serve)
	start := time.Now()
	c, err := startServe(rs.r.opts.Serve, rs.dir, rs.r.opts.Memory, filepath.Join(filepath.Dir(rs.dir), fmt.Sprintf("serve-%d.stderr", size.Events)))
	if err != nil {
		return err
	}
	defer c.kill()
	defer func() {
		if err != nil {
			err = fmt.Errorf("giving serve in a child process: %w; the end of its stderr:\n%s", err, tail(c.stderr, 4000))
		}
	}()
	base, err := c.address(ctx, c.api)
	if err != nil {
		return err
	}
	metrics, err := c.address(ctx, c.metrics)
	if err != nil {
		return err
	}
	debug := metrics + "/debug/pprof/heap?gc=1"
	metrics += "/metrics"
	if err := c.poll(ctx, serveStartLimit, "GET /readyz to answer 200", func() (bool, error) {
		code, _, err := get(ctx, base+"/readyz")
		return err == nil && code == http.StatusOK, nil
	}); err != nil {
		return err
	}
	if err := c.poll(ctx, serveStartLimit, "giving_webhook_backlog to be 0", func() (bool, error) {
		v, err := scrape(ctx, metrics, "giving_webhook_backlog")
		return err == nil && v == 0, nil
	}); err != nil {
		return err
	}
	size.ServeStartSeconds = time.Since(start).Seconds()
	if err := rs.servePages(ctx, base, size); err != nil {
		return err
	}
	if size.ServeRSS, err = procMiB(c.cmd.Process.Pid, "VmRSS"); err == nil {
		size.ServeHWM, err = procMiB(c.cmd.Process.Pid, "VmHWM")
	}
	if err != nil {
		return err
	}
	heap, err := scrape(ctx, metrics, "go_memstats_heap_inuse_bytes")
	if err != nil {
		return err
	}
	size.ServeHeapInuse = heap / (1 << 20)
	if err := rs.serveHeapProfile(ctx, debug, size.Events); err != nil {
		return err
	}
	if heap, err = scrape(ctx, metrics, "go_memstats_heap_inuse_bytes"); err != nil {
		return err
	}
	size.ServeLiveHeap = heap / (1 << 20)
	rs.r.progress("    ready in %.1f s; after %d pages VmRSS %.0f MiB, VmHWM %.0f MiB, Go heap in use %.0f MiB (%.0f MiB after a collection)",
		size.ServeStartSeconds, size.ServePages, size.ServeRSS, size.ServeHWM, size.ServeHeapInuse, size.ServeLiveHeap)
	return c.stop()
}

// serveHeapProfile has the child collect its garbage and profile its heap
// (Go's profiler, serve's --pprof), and writes the profile where
// Options.HeapProfile says, suffixed with ".serve." and the size.
func (rs *readState) serveHeapProfile(ctx context.Context, url string, events int) error {
	code, profile, err := get(ctx, url)
	if err != nil {
		return err
	}
	if code != http.StatusOK {
		return fmt.Errorf("GET %s: %d", url, code)
	}
	if rs.r.opts.HeapProfile == "" {
		return nil
	}
	return os.WriteFile(fmt.Sprintf("%s.serve.%d", rs.r.opts.HeapProfile, events), profile, 0o644)
}

// startServe starts exe serve on dir, on loopback ports of its choosing,
// with the bench's memory setting and no request refused by the rate
// limiter, as the in-process service runs. Settings from GIVING_*
// variables are left out, so the operator's environment does not change
// what is measured.
func startServe(exe, dir string, memory int64, stderrPath string) (*serveChild, error) {
	logFile, err := os.Create(stderrPath)
	if err != nil {
		return nil, err
	}
	defer logFile.Close()
	out, in, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(exe, "serve", "--env", string(domain.Sandbox), "--data", dir, "--master-key", "", "--nats-url", "",
		"--addr", "127.0.0.1:0", "--metrics-addr", "127.0.0.1:0", "--pprof", "--nats-listen", "",
		"--memory", strconv.FormatInt(memory, 10), "--rate-limit", "1000000", "--rate-burst", "1000000",
		"--webhook-concurrency", strconv.Itoa(hookConcurrency), "--log-level", "warn")
	cmd.Env = []string{} // not nil, which would pass on every variable
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "GIVING_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Stdout, cmd.Stderr = in, logFile
	cmd.SysProcAttr = diesWithParent()
	err = cmd.Start()
	in.Close()
	if err != nil {
		out.Close()
		return nil, fmt.Errorf("start %s serve: %w", exe, err)
	}
	c := &serveChild{cmd: cmd, stderr: stderrPath, exited: make(chan struct{}), api: make(chan string, 1), metrics: make(chan string, 1)}
	go c.read(out)
	go func() {
		c.waitErr = cmd.Wait()
		close(c.exited)
	}()
	return c, nil
}

// read passes on the addresses serve prints and drains the rest of its
// stdout until it exits.
func (c *serveChild) read(out *os.File) {
	defer out.Close()
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		line := sc.Text()
		if _, url, ok := strings.Cut(line, " stack listening on "); ok {
			offer(c.api, strings.TrimSpace(url))
		}
		if url, ok := strings.CutPrefix(line, "metrics for Prometheus on "); ok {
			offer(c.metrics, strings.TrimSuffix(strings.TrimSpace(url), "/metrics"))
		}
	}
	_, _ = io.Copy(io.Discard, out)
}

// offer passes url on unless one is already waiting.
func offer(ch chan string, url string) {
	select {
	case ch <- url:
	default:
	}
}

// address waits for serve to print the address ch receives.
func (c *serveChild) address(ctx context.Context, ch chan string) (string, error) {
	select {
	case url := <-ch:
		return url, nil
	case <-c.exited:
		return "", c.died()
	case <-ctx.Done():
		return "", ctx.Err()
	case <-time.After(serveStartLimit):
		return "", fmt.Errorf("not listening after %s", serveStartLimit)
	}
}

// poll is the package's poll, failing as soon as the child has exited.
func (c *serveChild) poll(ctx context.Context, limit time.Duration, what string, cond func() (bool, error)) error {
	return poll(ctx, limit, what, func() (bool, error) {
		select {
		case <-c.exited:
			return false, c.died()
		default:
			return cond()
		}
	})
}

func (c *serveChild) died() error {
	return fmt.Errorf("exited before it was measured (%v)", c.waitErr)
}

// stop sends SIGTERM and waits for a clean exit.
func (c *serveChild) stop() error {
	if err := c.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		return fmt.Errorf("SIGTERM: %w", err)
	}
	select {
	case <-c.exited:
	case <-time.After(serveStopLimit):
		return fmt.Errorf("still running %s after SIGTERM", serveStopLimit)
	}
	if c.waitErr != nil {
		return fmt.Errorf("stopping on SIGTERM: %w", c.waitErr)
	}
	return nil
}

// kill ends the child if it is still running and waits for it.
func (c *serveChild) kill() {
	select {
	case <-c.exited:
	default:
		_ = c.cmd.Process.Kill()
		<-c.exited
	}
}

// servePages reads servePages pages of the big partner's feed at random
// cursors from the child; any failed page fails the measurement.
func (rs *readState) servePages(ctx context.Context, base string, size *ReadSize) error {
	client, err := sandbox.NewClient(base, rs.bigKey)
	if err != nil {
		return err
	}
	cursors := domain.NewCursors(rs.cursorKey)
	for range servePages {
		i := rand.IntN(max(len(rs.bigSeqs)-100, 1))
		page, err := readPage(ctx, client, cursors.EncodeSeq(domain.CursorEvents, rs.big, rs.bigSeqs[i]))
		if err != nil {
			return fmt.Errorf("feed page %d: %w", size.ServePages+1, err)
		}
		if len(page.Data) == 0 {
			return fmt.Errorf("feed page %d at the big partner's event %d is empty", size.ServePages+1, i)
		}
		size.ServePages++
	}
	return nil
}

// get answers a GET's status and body.
func get(ctx context.Context, url string) (int, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, nil, err
	}
	client := http.Client{Timeout: 10 * time.Second}
	resp, err := client.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return resp.StatusCode, body, err
}

// scrape reads the unlabelled sample name from a Prometheus text page.
func scrape(ctx context.Context, url, name string) (float64, error) {
	code, body, err := get(ctx, url)
	if err != nil {
		return 0, err
	}
	if code != http.StatusOK {
		return 0, fmt.Errorf("GET %s: %d", url, code)
	}
	for _, line := range strings.Split(string(body), "\n") {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			return strconv.ParseFloat(strings.TrimSpace(v), 64)
		}
	}
	return 0, fmt.Errorf("GET %s: no %s", url, name)
}

// procMiB is a memory field of /proc/<pid>/status (pid 0: this process) in
// MiB.
func procMiB(pid int, field string) (float64, error) {
	path := "/proc/self/status"
	if pid != 0 {
		path = fmt.Sprintf("/proc/%d/status", pid)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			kb, err := strconv.ParseFloat(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 64)
			return kb / 1024, err
		}
	}
	return 0, errors.New(path + " has no " + field)
}

// tail is the last n bytes of the file at path.
func tail(path string, n int64) string {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Sprintf("(%v)", err)
	}
	defer f.Close()
	if st, err := f.Stat(); err == nil && st.Size() > n {
		_, _ = f.Seek(st.Size()-n, io.SeekStart)
	}
	b, _ := io.ReadAll(f)
	return string(b)
}
