package httpapi

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/partnergiving/giving/domain"
)

// Listener wraps ln so that the requests Go's HTTP server refuses before any
// route sees them (a malformed request line, header or Content-Length, a
// bad path, an unknown transfer coding, headers over the size limit) are
// answered like every other error: problem+json with a request id, an
// access-log line and a metric, instead of Go's plain-text line.
//
// net/http has no hook for those answers: it writes each in one piece,
// straight to the connection, in a fixed shape (its status line, then
// exactly "Content-Type: text/plain; charset=utf-8" and "Connection: close",
// with no Date). A handler's answer never has that shape (net/http always
// adds a Date), so the connection recognises the refusal by it and writes
// the problem in its place. Only a plain-HTTP listener can be wrapped: with
// --tls-cert the server must see its own *tls.Conn, and a refusal over TLS
// stays Go's plain text (the OpenAPI document's RefusedByHTTPServer).
func (s *Server) Listener(ln net.Listener) net.Listener {
	return refusingListener{Listener: ln, srv: s}
}

type refusingListener struct {
	net.Listener
	srv *Server
}

func (l refusingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &refusingConn{Conn: c, srv: l.srv}, nil
}

// refusingConn is a connection whose refusals from net/http are rewritten.
type refusingConn struct {
	net.Conn
	srv *Server
}

// goRefusal is what follows the status line of every refusal net/http
// writes itself.
const goRefusal = "\r\nContent-Type: text/plain; charset=utf-8\r\nConnection: close\r\n\r\n"

func (c *refusingConn) Write(p []byte) (int, error) {
	status, reason, ok := parseRefusal(p)
	if !ok {
		return c.Conn.Write(p)
	}
	if _, err := c.Conn.Write(c.srv.refusal(status, reason, c.RemoteAddr())); err != nil {
		return 0, err
	}
	return len(p), nil
}

// CloseWrite lets net/http half-close after a refusal, as it does on a bare
// TCP connection, so the client reads the answer before the reset.
func (c *refusingConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}

// parseRefusal reads net/http's refusal: "HTTP/1.1 400 Bad Request" or
// "HTTP/1.1 400 Bad Request: <reason>", then goRefusal, then a body.
func parseRefusal(p []byte) (status int, reason string, ok bool) {
	const proto = "HTTP/1.1 "
	if len(p) < len(proto)+3 || string(p[:len(proto)]) != proto || (p[len(proto)] != '4' && p[len(proto)] != '5') {
		return 0, "", false
	}
	end := bytes.Index(p, []byte(goRefusal))
	if end < 0 || bytes.IndexByte(p[:end], '\n') >= 0 {
		return 0, "", false
	}
	line := string(p[len(proto):end])
	status, err := strconv.Atoi(line[:3])
	if err != nil {
		return 0, "", false
	}
	_, reason, _ = strings.Cut(line, ": ")
	return status, reason, true
}

// refusal is the whole HTTP answer to a refused request. Every refusal is
// the client's fault, so each is a 4xx (net/http's 501 for an unknown
// transfer coding and 505 for an unknown HTTP version become 400s).
func (s *Server) refusal(status int, reason string, remote net.Addr) []byte {
	p, detail := domain.ProblemMalformedRequest, "The request line or its headers could not be parsed."
	switch {
	case status == http.StatusRequestHeaderFieldsTooLarge:
		p, detail = domain.ProblemHeadersTooLarge, ""
	case status == http.StatusNotImplemented:
		detail = "The request's Transfer-Encoding is not supported: send the body with a Content-Length, or chunked."
	case reason != "":
		detail = "The request could not be parsed: " + reason + "."
	}
	id := domain.NewID("req_")
	body := problemBody(p, detail, id, nil)
	start := time.Now()
	var b bytes.Buffer
	fmt.Fprintf(&b, "HTTP/1.1 %d %s\r\n", p.Status, http.StatusText(p.Status))
	fmt.Fprintf(&b, "Cache-Control: no-store\r\nConnection: close\r\nContent-Length: %d\r\nContent-Type: application/problem+json\r\n", len(body))
	fmt.Fprintf(&b, "Date: %s\r\nRequest-Id: %s\r\nX-Content-Type-Options: nosniff\r\n\r\n", start.UTC().Format(http.TimeFormat), id)
	b.Write(body)

	host, _, err := net.SplitHostPort(remote.String())
	if err != nil {
		host = remote.String()
	}
	s.log.Info().Str("request_id", id).Str("route", "(refused)").Int("status", p.Status).
		Int("go_status", status).Str("reason", reason).Int("bytes", len(body)).Str("remote", host).Msg("request")
	s.cfg.Metrics.HTTPRequest(context.Background(), "(refused)", "", p.Status, 0)
	return b.Bytes()
}
