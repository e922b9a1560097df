package dispatcher

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"syscall"
	"time"

	"github.com/partnergiving/giving/domain"
)

// maxResponseRead is how much of a receiver's answer is read before the
// connection is closed: enough to reuse it after a normal answer, never an
// unbounded read.
const maxResponseRead = 64 << 10

// sender makes delivery attempts. Real and test deliveries share it, and so
// share its signer, its guarded transport and its timeout.
//
// It sends through the transport itself, not an http.Client: a client
// follows redirects and keeps cookies, neither of which a delivery wants (a
// redirect is an answer like any other non-2xx), and copies every request's
// headers in case it follows one, which was most of what a delivery's
// request allocated beyond the bare loop's.
type sender struct {
	transport *http.Transport
	guard     *guard
	timeout   time.Duration
}

func newSender(g *guard, timeout time.Duration, perHost int) *sender {
	transport := &http.Transport{
		Proxy:                  nil, // never through a proxy: the guard must see the real address
		DialContext:            g.dial,
		ForceAttemptHTTP2:      true,
		TLSClientConfig:        &tls.Config{MinVersion: tls.VersionTLS12},
		TLSHandshakeTimeout:    timeout,
		MaxIdleConns:           256,
		MaxIdleConnsPerHost:    perHost,
		IdleConnTimeout:        90 * time.Second,
		MaxResponseHeaderBytes: 32 << 10,
	}
	return &sender{guard: g, timeout: timeout, transport: transport}
}

// result is how one attempt went.
type result struct {
	status     int
	outcome    domain.DeliveryOutcome
	err        string
	retryAfter time.Duration
	duration   time.Duration
	// response is the first bytes of the answer's body.
	response string
}

// send POSTs body, the envelope of event id, to the receiver as attempt n,
// signed by sign (domain.WebhookSigner).
func (s *sender) send(ctx context.Context, rawURL string, sign domain.WebhookSigner, id string, n int, body []byte) result {
	start := time.Now()
	r := s.post(ctx, rawURL, sign, id, n, body)
	r.duration = time.Since(start)
	return r
}

func (s *sender) post(ctx context.Context, rawURL string, sign domain.WebhookSigner, id string, n int, body []byte) result {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, rawURL, bytes.NewReader(body))
	if err != nil || (req.URL.Scheme != "https" && !(req.URL.Scheme == "http" && s.guard.policy.AllowHTTP)) {
		return result{outcome: domain.DeliveryNetworkError, err: "the address is not an https URL"}
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", domain.WebhookUserAgent)
	sign.Headers(id, n, time.Now(), body, req.Header.Add)
	resp, err := s.transport.RoundTrip(req)
	if err != nil {
		return s.failure(err)
	}
	defer resp.Body.Close()
	first, _ := io.ReadAll(io.LimitReader(resp.Body, domain.ResponseKept))
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxResponseRead-domain.ResponseKept))
	r := result{status: resp.StatusCode, outcome: domain.DeliverySucceeded, response: strings.ToValidUTF8(string(first), "\uFFFD")}
	if resp.StatusCode/100 != 2 {
		r.outcome, r.err = domain.DeliveryFailed, "the receiver answered "+resp.Status
		if resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode == http.StatusServiceUnavailable {
			r.retryAfter = parseRetryAfter(resp.Header.Get("Retry-After"), time.Now())
		}
	}
	return r
}

// failure classifies an attempt that got no answer. The text is for the
// partner's attempt log: it says what happened without internal detail.
func (s *sender) failure(err error) result {
	var netErr net.Error
	switch {
	case errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &netErr) && netErr.Timeout()):
		return result{outcome: domain.DeliveryTimeout, err: "no answer within " + s.timeout.String()}
	case errors.Is(err, errNotAllowed):
		return result{outcome: domain.DeliveryNetworkError, err: "the address resolves to a network the service may not connect to"}
	case errors.Is(err, errUnresolvable):
		return result{outcome: domain.DeliveryNetworkError, err: "the host could not be resolved"}
	case errors.Is(err, context.Canceled):
		return result{outcome: domain.DeliveryNetworkError, err: "the attempt was interrupted"}
	}
	var tlsErr *tls.CertificateVerificationError
	if errors.As(err, &tlsErr) {
		return result{outcome: domain.DeliveryNetworkError, err: "TLS: the receiver's certificate was not accepted"}
	}
	if errors.Is(err, syscall.ECONNREFUSED) {
		return result{outcome: domain.DeliveryNetworkError, err: "connection refused"}
	}
	var opErr *net.OpError
	if errors.As(err, &opErr) && opErr.Op == "dial" {
		return result{outcome: domain.DeliveryNetworkError, err: "could not connect to the receiver"}
	}
	return result{outcome: domain.DeliveryNetworkError, err: "the connection failed before an answer"}
}
