// Package truvtest serves a fake Truv (truvfake) on a loopback port, for
// tests: the service's sandbox mounts the fake in process instead.
package truvtest

import (
	"net/http/httptest"

	"github.com/partnergiving/giving/vendors/truv/truvfake"
)

// Server is a fake Truv served on a loopback port.
type Server struct {
	*truvfake.Fake
	URL string // base URL: the client's Config.BaseURL
	srv *httptest.Server
}

// NewServer starts a fake Truv on a random loopback port. Close stops it.
func NewServer(cfg truvfake.Config) *Server {
	f := truvfake.New(cfg)
	srv := httptest.NewServer(f)
	return &Server{Fake: f, URL: srv.URL, srv: srv}
}

// Close stops the server.
func (s *Server) Close() { s.srv.Close() }

// BridgeScriptURL is the stand-in of truv.BridgeScriptURL.
func (s *Server) BridgeScriptURL() string { return s.URL + "/bridge.js" }
