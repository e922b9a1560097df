package dispatcher

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/partnergiving/giving/domain"
)

func TestAllowedAddresses(t *testing.T) {
	prod, sandbox := newGuard(PolicyFor(domain.Production), nil), newGuard(PolicyFor(domain.Sandbox), nil)
	cases := []struct {
		addr          string
		prod, sandbox bool
	}{
		{"93.184.216.34", true, true},
		{"8.8.8.8", true, true},
		{"2606:2800:220:1:248:1893:25c8:1946", true, true},
		{"127.0.0.1", false, true},
		{"127.255.0.9", false, true},
		{"::1", false, true},
		{"::ffff:127.0.0.1", false, true},
		{"::127.0.0.1", false, true},
		{"0.0.0.0", false, false},
		{"::", false, false},
		{"0.1.2.3", false, false},
		{"10.0.0.1", false, false},
		{"172.16.0.1", false, false},
		{"172.31.255.255", false, false},
		{"192.168.0.1", false, false},
		{"100.64.0.1", false, false},
		{"100.127.255.255", false, false},
		{"169.254.169.254", false, false},
		{"::ffff:169.254.169.254", false, false},
		{"::ffff:10.1.1.1", false, false},
		{"64:ff9b::a9fe:a9fe", false, false},
		{"64:ff9b::808:808", true, true},
		{"2002:a00:1::", false, false},
		{"2002:808:808::", true, true},
		{"fc00::1", false, false},
		{"fd12:3456::1", false, false},
		{"fe80::1", false, false},
		{"fec0::1", false, false},
		{"224.0.0.1", false, false},
		{"239.255.255.250", false, false},
		{"ff02::1", false, false},
		{"255.255.255.255", false, false},
		{"240.0.0.1", false, false},
		{"192.0.2.1", false, false},
		{"198.18.0.1", false, false},
		{"2001:db8::1", false, false},
		{"2001::1", false, false},
		{"100::1", false, false},
	}
	for _, tc := range cases {
		ip := netip.MustParseAddr(tc.addr)
		if got := prod.allowed(ip); got != tc.prod {
			t.Errorf("production %s: allowed %v, want %v", tc.addr, got, tc.prod)
		}
		if got := sandbox.allowed(ip); got != tc.sandbox {
			t.Errorf("sandbox %s: allowed %v, want %v", tc.addr, got, tc.sandbox)
		}
	}
}

// table is a fixed resolver whose answers can change, to play DNS
// rebinding.
type table struct{ addr atomic.Value }

func (r *table) LookupNetIP(context.Context, string, string) ([]netip.Addr, error) {
	return []netip.Addr{netip.MustParseAddr(r.addr.Load().(string))}, nil
}

func TestCheckURL(t *testing.T) {
	r := &table{}
	r.addr.Store("93.184.216.34")
	prod := newGuard(PolicyFor(domain.Production), r)
	ctx := context.Background()
	if err := prod.checkURL(ctx, "https://hooks.example/x"); err != nil {
		t.Fatalf("public https: %v", err)
	}
	if err := prod.checkURL(ctx, "http://hooks.example/x"); domain.ErrorKind(err) != domain.KindInvalid {
		t.Fatalf("http in production: %v", err)
	}
	r.addr.Store("10.9.8.7")
	var de *domain.Error
	if err := prod.checkURL(ctx, "https://hooks.example/x"); !errors.As(err, &de) || de.Fields[0].Field != "url" {
		t.Fatalf("name resolving to a private address: %v", err)
	}
	sandbox := newGuard(PolicyFor(domain.Sandbox), r)
	r.addr.Store("127.0.0.1")
	if err := sandbox.checkURL(ctx, "http://localhost:9/x"); err != nil {
		t.Fatalf("sandbox loopback: %v", err)
	}
}

// A host that resolves to a public address when checked and to loopback
// when connected to never gets a connection.
func TestDialRefusesRebinding(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var accepted atomic.Int32
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted.Add(1)
			c.Close()
		}
	}()
	r := &table{}
	r.addr.Store("93.184.216.34")
	g := newGuard(Policy{AllowHTTP: true}, r)
	url := "http://rebind.example:" + portOf(ln) + "/hooks"
	if err := g.checkURL(context.Background(), url); err != nil {
		t.Fatalf("check: %v", err)
	}
	r.addr.Store("127.0.0.1")
	s := newSender(g, 2*time.Second, 1)
	res := s.send(context.Background(), url, domain.NewWebhookSigner("whsec_x"), "evt_x", 1, []byte(`{}`))
	if res.outcome != domain.DeliveryNetworkError || res.status != 0 || !strings.Contains(res.err, "may not connect") {
		t.Fatalf("delivery to a rebound name: %+v", res)
	}
	if n := accepted.Load(); n != 0 {
		t.Fatalf("%d connections reached loopback", n)
	}
}

func portOf(ln net.Listener) string {
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	return port
}

func TestSchedule(t *testing.T) {
	s, err := ParseSchedule(FormatSchedule(DefaultSchedule))
	if err != nil || len(s) != 9 {
		t.Fatalf("default schedule round trip: %v %v", s, err)
	}
	var total time.Duration
	for _, d := range s {
		total += d
	}
	if total < 20*time.Hour || total > 26*time.Hour {
		t.Errorf("default schedule spans %s, want about a day", total)
	}
	for _, bad := range []string{"", "1m,,", "1m,-5s", "soon", "0s"} {
		if _, err := ParseSchedule(bad); err == nil {
			t.Errorf("ParseSchedule(%q) accepted", bad)
		}
	}
	for n := 1; n <= len(DefaultSchedule)+2; n++ {
		base := DefaultSchedule[min(n, len(DefaultSchedule))-1]
		w := nextWait(DefaultSchedule, n, DefaultJitter, 0, DefaultMaxRetryAfter)
		if w < time.Duration(float64(base)*0.8) || w > time.Duration(float64(base)*1.2) {
			t.Errorf("wait after attempt %d: %s, want within ±20%% of %s", n, w, base)
		}
	}
	if w := nextWait(DefaultSchedule, 1, 0, 30*time.Minute, time.Hour); w != 30*time.Minute {
		t.Errorf("Retry-After longer than the schedule: waited %s", w)
	}
	if w := nextWait(DefaultSchedule, 1, 0, 48*time.Hour, time.Hour); w != time.Hour {
		t.Errorf("Retry-After beyond the bound: waited %s", w)
	}
	if w := nextWait(DefaultSchedule, 5, 0, time.Second, time.Hour); w != time.Hour {
		t.Errorf("Retry-After shorter than the schedule: waited %s", w)
	}
}

func TestParseRetryAfter(t *testing.T) {
	now := time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)
	cases := map[string]time.Duration{
		"120":                           2 * time.Minute,
		" 5 ":                           5 * time.Second,
		"0":                             0,
		"-3":                            0,
		"soon":                          0,
		"":                              0,
		"Sat, 21 Nov 2026 10:01:00 GMT": time.Minute,
		"Sat, 21 Nov 2026 09:00:00 GMT": 0,
	}
	for in, want := range cases {
		if got := parseRetryAfter(in, now); got != want {
			t.Errorf("Retry-After %q: %s, want %s", in, got, want)
		}
	}
}
