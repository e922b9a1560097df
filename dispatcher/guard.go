package dispatcher

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"strconv"
	"syscall"
	"time"

	"github.com/partnergiving/giving/domain"
)

// Policy says which receivers a stack may connect to.
type Policy struct {
	// AllowHTTP accepts plain http addresses; otherwise https is required.
	AllowHTTP bool
	// AllowLoopback accepts loopback addresses (127.0.0.0/8, ::1), so a
	// developer can receive sandbox webhooks on their own machine. Every
	// other internal address stays refused.
	AllowLoopback bool
}

// PolicyFor is the policy of a stack: production requires https and a
// public address; the sandbox also accepts http and loopback receivers.
func PolicyFor(env domain.Environment) Policy {
	if env == domain.Production {
		return Policy{}
	}
	return Policy{AllowHTTP: true, AllowLoopback: true}
}

// Resolver looks up a host's addresses. *net.Resolver is one; tests use a
// fixed table.
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// Why a receiver address is refused.
var (
	errNotAllowed   = errors.New("address not allowed")
	errUnresolvable = errors.New("host could not be resolved")
)

// resolveWait bounds the lookup of a receiver's host at registration.
const resolveWait = 5 * time.Second

// guard checks receiver addresses and makes the connections, pinned to the
// addresses it checked.
type guard struct {
	policy   Policy
	resolver Resolver
	dialer   net.Dialer
}

func newGuard(p Policy, r Resolver) *guard {
	if r == nil {
		r = net.DefaultResolver
	}
	g := &guard{policy: p, resolver: r}
	// A last check on the very address the socket connects to, whatever led
	// to it.
	g.dialer.Control = func(_, address string, _ syscall.RawConn) error {
		ap, err := netip.ParseAddrPort(address)
		if err != nil || !g.allowed(ap.Addr()) {
			return errNotAllowed
		}
		return nil
	}
	return g
}

// checkURL judges a receiver address at registration: the scheme the stack
// requires, and a host whose every address is allowed.
func (g *guard) checkURL(ctx context.Context, raw string) error {
	u, err := url.Parse(raw)
	if err != nil {
		return domainURLError("must be an absolute address such as https://example.org/webhooks")
	}
	if u.Scheme != "https" && !g.policy.AllowHTTP {
		return domainURLError("must use https")
	}
	ctx, cancel := context.WithTimeout(ctx, resolveWait)
	defer cancel()
	_, err = g.resolve(ctx, u.Hostname())
	switch {
	case errors.Is(err, errNotAllowed):
		if g.policy.AllowLoopback {
			return domainURLError("must not point to a private, link-local, multicast, reserved or unspecified address")
		}
		return domainURLError("must not point to a loopback, private, link-local, multicast, reserved or unspecified address")
	case err != nil:
		return domainURLError("host could not be resolved")
	}
	return nil
}

func domainURLError(detail string) error {
	var v domain.Validation
	v.Add("url", "%s", detail)
	return v.Err()
}

// resolve returns the host's addresses when every one of them is allowed.
// One refused address refuses the host: a name that mixes public and
// internal addresses is not a receiver.
func (g *guard) resolve(ctx context.Context, host string) ([]netip.Addr, error) {
	if ip, err := netip.ParseAddr(host); err == nil {
		if ip.Zone() != "" || !g.allowed(ip) {
			return nil, errNotAllowed
		}
		return []netip.Addr{ip}, nil
	}
	if host == "" {
		return nil, errUnresolvable
	}
	ips, err := g.resolver.LookupNetIP(ctx, "ip", host)
	if err != nil || len(ips) == 0 {
		return nil, fmt.Errorf("%w: %s", errUnresolvable, host)
	}
	for _, ip := range ips {
		if !g.allowed(ip) {
			return nil, errNotAllowed
		}
	}
	return ips, nil
}

// dial resolves and checks the host again for every connection, then
// connects to the checked addresses themselves, so DNS cannot answer
// differently between the check and the connection.
func (g *guard) dial(ctx context.Context, network, address string) (net.Conn, error) {
	host, portStr, err := net.SplitHostPort(address)
	if err != nil {
		return nil, err
	}
	port, err := strconv.ParseUint(portStr, 10, 16)
	if err != nil {
		return nil, fmt.Errorf("port %q: %w", portStr, err)
	}
	ips, err := g.resolve(ctx, host)
	if err != nil {
		return nil, err
	}
	var errs []error
	for _, ip := range ips {
		conn, err := g.dialer.DialContext(ctx, network, netip.AddrPortFrom(ip, uint16(port)).String())
		if err == nil {
			return conn, nil
		}
		errs = append(errs, err)
		if ctx.Err() != nil {
			break
		}
	}
	return nil, errors.Join(errs...)
}

// Address ranges that are never receivers, beyond what netip classifies.
var refusedPrefixes = mustPrefixes(
	"0.0.0.0/8",          // "this network"
	"100.64.0.0/10",      // carrier-grade NAT
	"192.0.0.0/24",       // IETF protocol assignments
	"192.0.2.0/24",       // documentation
	"198.18.0.0/15",      // benchmarking
	"198.51.100.0/24",    // documentation
	"203.0.113.0/24",     // documentation
	"240.0.0.0/4",        // reserved, and the broadcast address
	"100::/64",           // discard
	"2001::/32",          // Teredo: tunnels to an address we cannot see
	"2001:db8::/32",      // documentation
	"64:ff9b:1::/48",     // local-use NAT64
	"fec0::/10",          // deprecated site-local
	"2001:10::/28",       // ORCHID
	"2001:20::/28",       // ORCHIDv2
	"::ffff:0:0:0/96",    // IPv4-translated
	"5f00::/16",          // SRv6 SIDs
	"3fff::/20",          // documentation
	"2001:2::/48",        // benchmarking
	"fc00::/7",           // unique local (also IsPrivate)
	"169.254.0.0/16",     // link-local, cloud metadata (also IsLinkLocalUnicast)
	"255.255.255.255/32", // broadcast
)

// Prefixes whose IPv6 addresses embed an IPv4 address that decides.
var (
	nat64     = netip.MustParsePrefix("64:ff9b::/96")
	sixToFour = netip.MustParsePrefix("2002::/16")
	v4compat  = netip.MustParsePrefix("::/96")
)

func mustPrefixes(ss ...string) []netip.Prefix {
	out := make([]netip.Prefix, len(ss))
	for i, s := range ss {
		out[i] = netip.MustParsePrefix(s)
	}
	return out
}

// allowed reports whether the policy lets a delivery connect to ip: a global
// unicast address outside every internal and reserved range, or loopback
// where the policy allows it. IPv6 forms that carry an IPv4 address
// (IPv4-mapped, IPv4-compatible, NAT64, 6to4) are judged by that address.
func (g *guard) allowed(ip netip.Addr) bool {
	if !ip.IsValid() {
		return false
	}
	ip = ip.WithZone("").Unmap()
	if ip.IsLoopback() {
		return g.policy.AllowLoopback
	}
	if ip.IsUnspecified() {
		return false
	}
	if ip.Is6() {
		if v4, ok := embeddedV4(ip); ok {
			return g.allowed(v4)
		}
	}
	if ip.IsPrivate() || ip.IsLinkLocalUnicast() || ip.IsLinkLocalMulticast() ||
		ip.IsInterfaceLocalMulticast() || ip.IsMulticast() || !ip.IsGlobalUnicast() {
		return false
	}
	for _, p := range refusedPrefixes {
		if p.Contains(ip) {
			return false
		}
	}
	return true
}

// embeddedV4 returns the IPv4 address inside an IPv6 address that carries
// one.
func embeddedV4(ip netip.Addr) (netip.Addr, bool) {
	b := ip.As16()
	switch {
	case v4compat.Contains(ip), nat64.Contains(ip):
		return netip.AddrFrom4([4]byte{b[12], b[13], b[14], b[15]}), true
	case sixToFour.Contains(ip):
		return netip.AddrFrom4([4]byte{b[2], b[3], b[4], b[5]}), true
	}
	return netip.Addr{}, false
}
