package increase_test

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/partnergiving/giving/vendors/increase"
	"github.com/partnergiving/giving/vendors/increase/increasefake"
)

const testKey = "secret_key_test_partner_giving"

// startFake serves a fake Increase on loopback holding the documented
// example transfer.
func startFake(t *testing.T, o increasefake.Options) (*increasefake.Fake, *httptest.Server) {
	t.Helper()
	if o.APIKey == "" {
		o.APIKey = testKey
	}
	f := increasefake.New(o)
	f.PutInboundACHTransfer(documentedTransfer(t))
	srv := httptest.NewServer(f)
	t.Cleanup(func() {
		srv.Close()
		f.Close()
	})
	return f, srv
}

func newClient(t *testing.T, url, key string) *increase.Client {
	t.Helper()
	c, err := increase.NewClient(url, key, nil)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestClientFetchesTransferFromFake(t *testing.T) {
	f, srv := startFake(t, increasefake.Options{})
	c := newClient(t, srv.URL+"/", testKey)

	tr, err := c.InboundACHTransfer(context.Background(), "inbound_ach_transfer_tdrwqr3fq9gnnq49odev")
	if err != nil {
		t.Fatal(err)
	}
	if tr.TraceNumber != "021000038461022" || tr.Amount != "100" || tr.Status != "accepted" {
		t.Fatalf("transfer = %+v", tr)
	}
	reqs := f.Requests()
	if len(reqs) != 1 {
		t.Fatalf("requests = %+v", reqs)
	}
	r := reqs[0]
	if r.Method != http.MethodGet || r.Path != "/inbound_ach_transfers/inbound_ach_transfer_tdrwqr3fq9gnnq49odev" || r.Authorization != "Bearer "+testKey {
		t.Fatalf("request = %+v", r)
	}
}

func TestClientErrors(t *testing.T) {
	_, srv := startFake(t, increasefake.Options{})
	tests := []struct {
		name   string
		key    string
		id     string
		want   error
		typ    string
		status int
	}{
		{"unknown transfer", testKey, "inbound_ach_transfer_unknown", increase.ErrRejected, "object_not_found_error", 404},
		{"wrong key", "secret_key_wrong", "inbound_ach_transfer_tdrwqr3fq9gnnq49odev", increase.ErrRejected, "invalid_api_key_error", 401},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := newClient(t, srv.URL, tt.key).InboundACHTransfer(context.Background(), tt.id)
			var apiErr *increase.APIError
			if !errors.Is(err, tt.want) || !errors.As(err, &apiErr) {
				t.Fatalf("err = %v, want an APIError that is %v", err, tt.want)
			}
			if apiErr.Type != tt.typ || apiErr.StatusCode != tt.status {
				t.Fatalf("APIError = %+v, want %s %d", apiErr, tt.typ, tt.status)
			}
			if errors.Is(err, increase.ErrUnavailable) {
				t.Fatal("a refusal is also reported as unavailable")
			}
		})
	}
}

// TestClientUnavailable covers what the fake never does: a server that
// fails, throttles, or answers something that is not the object.
func TestClientUnavailable(t *testing.T) {
	tests := []struct {
		name    string
		handler http.HandlerFunc
	}{
		{"503", func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = w.Write([]byte("<html>upstream down</html>"))
		}},
		{"500 with Increase's error object", func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(http.StatusInternalServerError)
			_, _ = w.Write([]byte(`{"status":500,"type":"internal_server_error","title":"Something went wrong."}`))
		}},
		{"429", func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(http.StatusTooManyRequests)
			_, _ = w.Write([]byte(`{"status":429,"type":"rate_limited_error","title":"Slow down.","retry_after":2}`))
		}},
		{"200 that is not JSON", func(w http.ResponseWriter, r *http.Request) {
			_, _ = w.Write([]byte("ok"))
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := httptest.NewServer(tt.handler)
			defer srv.Close()
			_, err := newClient(t, srv.URL, testKey).InboundACHTransfer(context.Background(), "inbound_ach_transfer_1")
			if !errors.Is(err, increase.ErrUnavailable) || errors.Is(err, increase.ErrRejected) {
				t.Fatalf("err = %v, want ErrUnavailable only", err)
			}
		})
	}

	t.Run("nothing listening", func(t *testing.T) {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := l.Addr().String()
		l.Close()
		_, err = newClient(t, "http://"+addr, testKey).InboundACHTransfer(context.Background(), "inbound_ach_transfer_1")
		if !errors.Is(err, increase.ErrUnavailable) {
			t.Fatalf("err = %v, want ErrUnavailable", err)
		}
	})
}

func TestClientRefusesBadIDWithoutCalling(t *testing.T) {
	f, srv := startFake(t, increasefake.Options{})
	_, err := newClient(t, srv.URL, testKey).InboundACHTransfer(context.Background(), "../accounts")
	if !errors.Is(err, increase.ErrRejected) {
		t.Fatalf("err = %v, want ErrRejected", err)
	}
	if n := len(f.Requests()); n != 0 {
		t.Fatalf("%d requests reached Increase", n)
	}
}

func TestNewClientChecksSettings(t *testing.T) {
	for name, tt := range map[string]struct{ url, key string }{
		"relative URL": {"api.increase.com", testKey},
		"other scheme": {"ftp://api.increase.com", testKey},
		"no key":       {increase.ProductionBaseURL, ""},
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := increase.NewClient(tt.url, tt.key, nil); err == nil {
				t.Fatal("NewClient accepted it")
			}
		})
	}
	if _, err := increase.NewClient(increase.SandboxBaseURL, testKey, nil); err != nil {
		t.Fatalf("sandbox URL refused: %v", err)
	}
}

// TestClientUnderPathPrefix is the sandbox's case: a stand-in of Increase
// mounted under a path of the service rather than at a host's root.
func TestClientUnderPathPrefix(t *testing.T) {
	f := increasefake.New(increasefake.Options{APIKey: testKey})
	f.PutInboundACHTransfer(documentedTransfer(t))
	srv := httptest.NewServer(http.StripPrefix("/sandbox/increase", f))
	defer srv.Close()

	tr, err := newClient(t, srv.URL+"/sandbox/increase/", testKey).InboundACHTransfer(context.Background(), "inbound_ach_transfer_tdrwqr3fq9gnnq49odev")
	if err != nil || tr.ID != "inbound_ach_transfer_tdrwqr3fq9gnnq49odev" {
		t.Fatalf("transfer %+v, %v", tr, err)
	}
}
