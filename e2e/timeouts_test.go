package e2e

import (
	"bufio"
	"errors"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"
)

// A client that sends half a chunked body and then nothing is cut off once
// the read timeout has passed, instead of holding its connection (and what
// the request holds) for ever.
func TestHalfABodyIsCutOff(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("runs the binary")
	}
	dir := t.TempDir()
	srv := startServer(t, dir, nil, "--http-read-timeout", "1s")
	conn, err := net.Dial("tcp", strings.TrimPrefix(srv.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	start := time.Now()
	// The edge reads the whole body before anything else (its signature
	// covers it), so no key is needed to reach the body read.
	_, err = conn.Write([]byte("POST /edge/bank HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n10\r\n{\"id\":\"evt_half\""))
	if err != nil {
		t.Fatal(err)
	}
	_ = conn.SetReadDeadline(time.Now().Add(20 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("the server still waits for the body after %s", time.Since(start).Round(time.Second))
	}
	if err == nil {
		resp.Body.Close()
		if resp.StatusCode < 400 || resp.StatusCode >= 500 {
			t.Fatalf("half a body answered %d", resp.StatusCode)
		}
	}
	elapsed := time.Since(start)
	if elapsed < time.Second || elapsed > 10*time.Second {
		t.Fatalf("cut off after %s, want about the 1s read timeout", elapsed)
	}
	t.Logf("half a chunked body: cut off after %s (%v)", elapsed.Round(time.Millisecond), err)

	// The read timeout bounds sending a body, never a long poll, which
	// sends none and waits longer than it.
	c, _ := srv.partner(t, "https://timeouts.example")
	poll := time.Now()
	if r := c.Do(http.MethodGet, "/v1/events?wait=3", nil, nil); r.Status != http.StatusOK {
		t.Fatalf("long poll: %d %s", r.Status, r.Body)
	}
	if waited := time.Since(poll); waited < 3*time.Second {
		t.Fatalf("the long poll answered after %s, before its 3s wait", waited)
	}

	// A write timeout that would cut off the feed's long poll is refused.
	res := runCLI(t, nil, "serve", "--data", t.TempDir(), "--http-write-timeout", "20s")
	if res.Code != 2 || !strings.Contains(res.Stderr, "--http-write-timeout") && !strings.Contains(res.Stderr, "write timeout") {
		t.Fatalf("serve with a 20s write timeout: %d %s", res.Code, res.Stderr)
	}
}
