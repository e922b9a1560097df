// Package apitest drives the API in tests and checks every exchange against
// the OpenAPI document, so the document and the service cannot drift apart.
package apitest

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/gorillamux"
	"github.com/segmentio/ksuid"

	"github.com/partnergiving/giving/httpapi"
)

var (
	loadOnce sync.Once
	loaded   *openapi3.T
	router   routers.Router
	loadErr  error
)

// Document returns the parsed, validated OpenAPI document.
func Document(tb testing.TB) *openapi3.T {
	tb.Helper()
	loadOnce.Do(func() {
		// HTML pages (the problem catalogue) are checked as text.
		openapi3filter.RegisterBodyDecoder("text/html", openapi3filter.PlainBodyDecoder)
		loader := openapi3.NewLoader()
		loaded, loadErr = loader.LoadFromData(httpapi.OpenAPIYAML)
		if loadErr != nil {
			return
		}
		if loadErr = loaded.Validate(context.Background()); loadErr != nil {
			return
		}
		// Match any host: tests listen on random ports.
		loaded.Servers = nil
		router, loadErr = gorillamux.NewRouter(loaded)
	})
	if loadErr != nil {
		tb.Fatalf("openapi.yaml: %v", loadErr)
	}
	return loaded
}

// CheckResponse fails the test unless the response to req is described by
// the document: a documented operation, a documented status, and a body and
// headers that match its schema.
func CheckResponse(tb testing.TB, req *http.Request, status int, header http.Header, body []byte) {
	tb.Helper()
	Document(tb)
	route, params, err := router.FindRoute(req)
	if err != nil {
		tb.Errorf("%s %s: not in the OpenAPI document: %v", req.Method, req.URL.Path, err)
		return
	}
	in := &openapi3filter.RequestValidationInput{
		Request: req, PathParams: params, Route: route,
		Options: &openapi3filter.Options{AuthenticationFunc: openapi3filter.NoopAuthenticationFunc, IncludeResponseStatus: true},
	}
	out := &openapi3filter.ResponseValidationInput{
		RequestValidationInput: in, Status: status, Header: header,
		Options: &openapi3filter.Options{IncludeResponseStatus: true, MultiError: true},
	}
	out.SetBodyBytes(body)
	if err := openapi3filter.ValidateResponse(context.Background(), out); err != nil {
		tb.Errorf("%s %s → %d does not match the OpenAPI document: %v\nbody: %s", req.Method, req.URL.Path, status, err, truncate(body))
	}
}

func truncate(b []byte) string {
	if len(b) > 2000 {
		return string(b[:2000]) + "…"
	}
	return string(b)
}

// Client talks to a running service as one partner and checks every answer
// against the document.
type Client struct {
	TB   testing.TB
	Base string
	Key  string
	HTTP *http.Client
}

// Response is a finished exchange.
type Response struct {
	Status int
	Header http.Header
	Body   []byte
}

// JSON decodes the body into v, failing the test on error.
func (r *Response) JSON(tb testing.TB, v any) {
	tb.Helper()
	if err := json.Unmarshal(r.Body, v); err != nil {
		tb.Fatalf("decode %d response: %v\nbody: %s", r.Status, err, truncate(r.Body))
	}
}

// Map decodes the body into a generic map.
func (r *Response) Map(tb testing.TB) map[string]any {
	tb.Helper()
	var m map[string]any
	r.JSON(tb, &m)
	return m
}

// Header is a request header for Do.
type Header map[string]string

// Do sends a request. body is JSON-encoded unless it is a string or []byte,
// which are sent as is. A POST or PATCH gets a fresh Idempotency-Key unless headers
// set one (an empty value sends none).
func (c *Client) Do(method, path string, body any, headers Header) *Response {
	c.TB.Helper()
	raw := encodeBody(c.TB, body)
	req, err := http.NewRequest(method, c.Base+path, bytes.NewReader(raw))
	if err != nil {
		c.TB.Fatalf("request: %v", err)
	}
	if c.Key != "" {
		req.Header.Set("Authorization", "Bearer "+c.Key)
	}
	if raw != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if method == http.MethodPost || method == http.MethodPatch {
		req.Header.Set("Idempotency-Key", newKey())
	}
	for k, v := range headers {
		if v == "" {
			req.Header.Del(k)
			continue
		}
		req.Header.Set(k, v)
	}
	return c.Send(req, raw)
}

// Send sends a prepared request (body given again as raw, for validation).
func (c *Client) Send(req *http.Request, raw []byte) *Response {
	c.TB.Helper()
	hc := c.HTTP
	if hc == nil {
		hc = http.DefaultClient
	}
	resp, err := hc.Do(req)
	if err != nil {
		c.TB.Fatalf("%s %s: %v", req.Method, req.URL.Path, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		c.TB.Fatalf("%s %s: read body: %v", req.Method, req.URL.Path, err)
	}
	vreq := req.Clone(context.Background())
	vreq.Body = io.NopCloser(bytes.NewReader(raw))
	CheckResponse(c.TB, vreq, resp.StatusCode, resp.Header, body)
	if p := req.URL.Path; req.Method == http.MethodGet && resp.StatusCode == http.StatusOK && (p == "/v1/events" || strings.HasPrefix(p, "/v1/events/")) {
		checkFeedEvents(c.TB, p, body)
	}
	return &Response{Status: resp.StatusCode, Header: resp.Header, Body: body}
}

func encodeBody(tb testing.TB, body any) []byte {
	switch b := body.(type) {
	case nil:
		return nil
	case string:
		return []byte(b)
	case []byte:
		return b
	}
	raw, err := json.Marshal(body)
	if err != nil {
		tb.Fatalf("encode body: %v", err)
	}
	return raw
}

// newKey returns a fresh Idempotency-Key.
func newKey() string { return "test-" + ksuid.New().String() }
