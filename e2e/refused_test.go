package e2e

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/partnergiving/giving/httpapi/apitest"
)

// Requests Go's HTTP parser refuses before any route sees them are answered
// like every other error: problem+json from the catalogue, with a request
// id, never Go's plain-text line and never a 5xx.
func TestRequestsTheParserRefusesGetProblems(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the binary")
	}
	t.Parallel()
	srv := startServer(t, t.TempDir(), nil)
	addr := strings.TrimPrefix(srv.URL, "http://")
	cases := []struct {
		name, request string
		status        int
		slug, detail  string
	}{
		{"bad Content-Length", "POST /v1/churches/import HTTP/1.1\r\nHost: x\r\nContent-Length: ten\r\n\r\n", 400, "malformed-request", "could not be parsed"},
		{"two Content-Lengths", "POST /v1/churches/import HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n{}", 400, "malformed-request", "could not be parsed"},
		{"header name bytes", "GET /v1/events HTTP/1.1\r\nHost: x\r\nX-B\x01d: 1\r\n\r\n", 400, "malformed-request", "could not be parsed"},
		{"header value bytes", "GET /v1/events HTTP/1.1\r\nHost: x\r\nX-Bad: a\x7fb\r\n\r\n", 400, "malformed-request", "could not be parsed"},
		{"path bytes", "GET /v1/ev\x7fents HTTP/1.1\r\nHost: x\r\n\r\n", 400, "malformed-request", "could not be parsed"},
		{"no Host", "GET /v1/events HTTP/1.1\r\n\r\n", 400, "malformed-request", "missing required Host header"},
		{"bad Host", "GET /v1/events HTTP/1.1\r\nHost: a b\r\n\r\n", 400, "malformed-request", "malformed Host header"},
		{"request line", "GET\r\n\r\n", 400, "malformed-request", "could not be parsed"},
		{"HTTP version", "GET /v1/events HTTP/7.0\r\nHost: x\r\n\r\n", 400, "malformed-request", "unsupported protocol version"},
		{"transfer coding", "POST /v1/churches/import HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip\r\n\r\n", 400, "malformed-request", "Transfer-Encoding"},
		{"headers over 1 MiB", "GET /v1/events HTTP/1.1\r\nHost: x\r\nX-Big: " + strings.Repeat("a", 1<<20+8192) + "\r\n\r\n", 431, "headers-too-large", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			conn, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			_ = conn.SetDeadline(time.Now().Add(20 * time.Second))
			// The server may answer and close before it has read all of
			// an oversized request: the write's error is not the test's.
			go func() { _, _ = io.WriteString(conn, tc.request) }()
			resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
			if err != nil {
				t.Fatalf("no answer: %v", err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			p := checkProblem(t, &apitest.Response{Status: resp.StatusCode, Header: resp.Header, Body: body}, tc.status, tc.slug)
			if d, _ := p["detail"].(string); !strings.Contains(d, tc.detail) {
				t.Fatalf("detail %q does not say %q", d, tc.detail)
			}
			if !resp.Close {
				t.Fatal("a refused request's connection is kept open")
			}
			id := p["request_id"].(string)
			waitFor(t, 10*time.Second, "a log line for "+id, func() bool {
				return strings.Contains(srv.Stdout.String()+srv.Stderr.String(), id)
			})
		})
	}
}
