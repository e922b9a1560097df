package stack

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/partnergiving/giving/eventlog/idempotency"
	"github.com/partnergiving/giving/httpapi"
)

// Timeouts bound how long the HTTP server waits for a client and how long
// a request may take, so a slow or stalled client (half a body sent, a
// connection left open) holds nothing for long.
type Timeouts struct {
	// ReadHeader bounds reading a request's headers.
	ReadHeader time.Duration
	// Read bounds reading a whole request, body included.
	Read time.Duration
	// Write bounds a request from the end of its headers to the end of its
	// answer: it must exceed the longest wait a request may ask for (the
	// feed's long poll) and the time a POST may hold its Idempotency-Key.
	Write time.Duration
	// Idle bounds how long a kept-alive connection waits for its next
	// request.
	Idle time.Duration
}

// DefaultTimeouts are the HTTP server's timeouts unless configured.
var DefaultTimeouts = Timeouts{ReadHeader: 10 * time.Second, Read: 30 * time.Second, Write: 60 * time.Second, Idle: 2 * time.Minute}

// Check refuses timeouts that are not positive, or a write timeout that
// would cut off a long poll or a POST still within its lease on its key.
func (t Timeouts) Check(lease time.Duration) error {
	if t.ReadHeader <= 0 || t.Read <= 0 || t.Write <= 0 || t.Idle <= 0 {
		return fmt.Errorf("every HTTP timeout must be positive")
	}
	if need := max(httpapi.LongestWait, lease+idempotency.DefaultSettle); t.Write <= need {
		return fmt.Errorf("the HTTP write timeout (%s) must exceed %s: the feed's longest wait (%s) and a request's lease on its Idempotency-Key plus the time to store its answer (%s + %s)",
			t.Write, need, httpapi.LongestWait, lease, idempotency.DefaultSettle)
	}
	return nil
}

// HTTPServer is the API's HTTP server with these timeouts. A request that
// stops sending its body is cut off once Read has passed since it began.
// Read is applied to the body alone, not as the server's ReadTimeout: that
// one stays armed while the handler runs and would cancel a long poll, which
// reads nothing, when it passed.
func HTTPServer(h http.Handler, t Timeouts) *http.Server {
	return &http.Server{Handler: bodyDeadline(h, t.Read), ReadHeaderTimeout: t.ReadHeader, WriteTimeout: t.Write, IdleTimeout: t.Idle}
}

// bodyDeadline gives a request with a body until read after it began to
// send all of it; the deadline is lifted once the body is read through.
func bodyDeadline(h http.Handler, read time.Duration) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Body != nil && r.Body != http.NoBody && r.ContentLength != 0 {
			rc := http.NewResponseController(w)
			if err := rc.SetReadDeadline(time.Now().Add(read)); err == nil {
				r.Body = &deadlineBody{ReadCloser: r.Body, lift: func() { _ = rc.SetReadDeadline(time.Time{}) }}
			}
		}
		h.ServeHTTP(w, r)
	})
}

// deadlineBody lifts its read deadline once it has been read to the end.
type deadlineBody struct {
	io.ReadCloser
	lift func()
	once sync.Once
}

func (b *deadlineBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if errors.Is(err, io.EOF) {
		b.once.Do(b.lift)
	}
	return n, err
}

// vendorClient is the client of a production vendor's API. Each vendor is
// one host, and a burst of its webhooks (a payday's credits) calls back at
// once: it keeps a connection for each call running at once, where the
// default keeps two and makes every other call a fresh TLS handshake. The
// vendor's client bounds each call's time.
func vendorClient() *http.Client {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = vendorConns
	return &http.Client{Transport: tr}
}

// vendorConns is how many idle connections to a vendor's API are kept.
const vendorConns = 32
