// Package netguard decides whether an outbound URL may be called: webhook
// targets must be public. It refuses private, loopback, link-local,
// unspecified, multicast and cloud metadata addresses, including the
// numeric host spellings (0x7f000001, 2130706433, 0177.0.0.1) and the IPv6
// forms that embed an IPv4 address (::ffff:7f00:1, 64:ff9b::a9fe:a9fe,
// 2002:a9fe:a9fe::) that reach them, and checks names by what they resolve
// to — at validation with CheckURL and again at connect time with
// DialControl, so that DNS rebinding cannot slip past.
package netguard

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// ErrForbidden is wrapped by every refusal.
var ErrForbidden = errors.New("target address is not public")

// Resolver looks names up; *net.Resolver satisfies it.
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// DialTimeoutDefault bounds one connection attempt of Policy.DialContext.
const DialTimeoutDefault = 5 * time.Second

// Policy says what a URL may be.
type Policy struct {
	// AllowHTTP permits plain http (the local environment only).
	AllowHTTP bool
	// AllowPrivate permits private and loopback targets (local only).
	AllowPrivate bool
	// Resolver defaults to net.DefaultResolver.
	Resolver Resolver
}

// For is the policy of an environment: a deployed one (local false) allows
// https to public addresses only; the local one allows plain http and
// private targets too. r resolves host names (nil: net.DefaultResolver).
func For(local bool, r Resolver) Policy {
	return Policy{AllowHTTP: local, AllowPrivate: local, Resolver: r}
}

func (p Policy) resolver() Resolver {
	if p.Resolver == nil {
		return net.DefaultResolver
	}
	return p.Resolver
}

// DialContext is an http.Transport DialContext that applies p at connect
// time: it resolves the host itself (with p.Resolver), refuses the whole
// connection if any address is not public, and dials the checked address
// literally, with DialControl on the socket as a second guard. A name that
// resolved to a public address when CheckURL looked and to a private one
// now (DNS rebinding) is refused here.
func (p Policy) DialContext(ctx context.Context, network, address string) (net.Conn, error) {
	host, port, err := net.SplitHostPort(address)
	if err != nil {
		return nil, fmt.Errorf("dialing %s: %w", address, err)
	}
	var addrs []netip.Addr
	if a, ok := ParseHost(host); ok {
		addrs = []netip.Addr{a}
	} else {
		if !p.AllowPrivate && isLocalhost(host) {
			return nil, fmt.Errorf("%w: %s", ErrForbidden, host)
		}
		if addrs, err = p.resolver().LookupNetIP(ctx, "ip", host); err != nil {
			return nil, fmt.Errorf("resolving %s: %w", host, err)
		}
	}
	d := net.Dialer{Timeout: DialTimeoutDefault}
	if !p.AllowPrivate {
		for _, a := range addrs {
			if !Public(a) {
				return nil, fmt.Errorf("%w: %s resolves to %s", ErrForbidden, host, a)
			}
		}
		d.Control = DialControl
	}
	var firstErr error
	for _, a := range addrs {
		c, err := d.DialContext(ctx, network, net.JoinHostPort(a.String(), port))
		if err == nil {
			return c, nil
		}
		if firstErr == nil {
			firstErr = err
		}
	}
	if firstErr == nil {
		firstErr = fmt.Errorf("%s has no address", host)
	}
	return nil, fmt.Errorf("dialing %s: %w", host, firstErr)
}

func isLocalhost(host string) bool {
	return strings.EqualFold(strings.TrimSuffix(host, "."), "localhost") || strings.HasSuffix(strings.ToLower(strings.TrimSuffix(host, ".")), ".localhost")
}

// CheckURL parses raw and refuses it unless it is an absolute http(s) URL to
// a public address under p. Names are resolved; every address must be public.
func (p Policy) CheckURL(ctx context.Context, raw string) (*url.URL, error) {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" || u.Opaque != "" {
		return nil, errors.New("must be an absolute URL")
	}
	switch u.Scheme {
	case "https":
	case "http":
		if !p.AllowHTTP {
			return nil, errors.New("must use https")
		}
	default:
		return nil, errors.New(p.schemes())
	}
	if u.User != nil {
		return nil, errors.New("must not carry credentials")
	}
	if p.AllowPrivate {
		return u, nil
	}
	host := u.Hostname()
	if addr, ok := ParseHost(host); ok {
		if !Public(addr) {
			return nil, fmt.Errorf("%w: %s", ErrForbidden, addr)
		}
		return u, nil
	}
	if isLocalhost(host) {
		return nil, fmt.Errorf("%w: %s", ErrForbidden, host)
	}
	addrs, err := p.resolver().LookupNetIP(ctx, "ip", host)
	if err != nil {
		return nil, fmt.Errorf("cannot resolve %s", host)
	}
	for _, a := range addrs {
		if !Public(a) {
			return nil, fmt.Errorf("%w: %s resolves to %s", ErrForbidden, host, a)
		}
	}
	return u, nil
}

// schemes says which schemes p accepts, in the words of a refusal.
func (p Policy) schemes() string {
	if p.AllowHTTP {
		return "must use http or https"
	}
	return "must use https"
}

// ParseHost reads host as an IP address in any spelling a resolver or
// browser would accept: dotted quad, IPv6, a single 32-bit number in
// decimal, hex or octal, and dotted parts in hex or octal.
func ParseHost(host string) (netip.Addr, bool) {
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	if a, err := netip.ParseAddr(host); err == nil {
		return a.Unmap(), true
	}
	parts := strings.Split(host, ".")
	if len(parts) > 4 {
		return netip.Addr{}, false
	}
	nums := make([]uint64, len(parts))
	for i, p := range parts {
		n, err := strconv.ParseUint(p, 0, 32) // base 0: 0x hex, 0 octal
		if err != nil || p == "" {
			return netip.Addr{}, false
		}
		nums[i] = n
	}
	// inet_aton: the last part fills the remaining bytes.
	var v uint64
	for i, n := range nums[:len(nums)-1] {
		if n > 255 {
			return netip.Addr{}, false
		}
		v |= n << (24 - 8*i)
	}
	last := nums[len(nums)-1]
	if last >= 1<<(8*(5-len(nums))) {
		return netip.Addr{}, false
	}
	v |= last
	return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)}), true
}

// Public reports whether a is a globally routable unicast address, one a
// webhook may be delivered to. IPv4 must lie outside every special-purpose
// block (private, loopback, link-local and the metadata address
// 169.254.169.254, "this network" 0.0.0.0/8, carrier-grade NAT
// 100.64.0.0/10, IETF 192.0.0.0/24, the documentation nets, benchmarking
// 198.18.0.0/15, the 6to4 relay anycast, multicast, reserved 240.0.0.0/4
// and broadcast). IPv6 must be global unicast (2000::/3): unique-local
// fc00::/7, link-local fe80::/10, multicast ff00::/8, discard 100::/64 and
// the IPv4-compatible ::/96 are refused. IPv6 forms that carry an IPv4
// address are judged by that address: IPv4-mapped ::ffff:a.b.c.d, NAT64
// 64:ff9b::/96 (RFC 6052) and 6to4 2002::/16. Forms whose IPv4 cannot be
// trusted are refused whole: local-use NAT64 64:ff9b:1::/48 (RFC 8215, the
// embedding's position depends on a local prefix length), Teredo 2001::/32
// (a client address obfuscated behind a relay; no webhook receiver needs
// it) and the rest of the IETF block 2001::/23, and documentation
// 2001:db8::/32 and 3fff::/20.
func Public(a netip.Addr) bool {
	if !a.IsValid() {
		return false
	}
	a = a.WithZone("").Unmap()
	if a.Is4() {
		return public4(a)
	}
	if v4, ok := embedded4(a); ok {
		return public4(v4)
	}
	if !globalUnicast6.Contains(a) {
		return false // ::/96 (IPv4-compatible), ::1, ::, 100::/64, 64:ff9b:1::/48, fc00::/7, fe80::/10, ff00::/8
	}
	for _, p := range blocked6 {
		if p.Contains(a) {
			return false
		}
	}
	return true
}

// public4 judges an IPv4 address.
func public4(a netip.Addr) bool {
	switch {
	case a.IsLoopback(), a.IsPrivate(), a.IsLinkLocalUnicast(), a.IsMulticast(), a.IsUnspecified():
		return false
	}
	for _, p := range blocked4 {
		if p.Contains(a) {
			return false
		}
	}
	return true
}

// embedded4 returns the IPv4 address an IPv6 address stands for when it is
// NAT64 (well-known prefix) or 6to4; IPv4-mapped addresses are unmapped
// before.
func embedded4(a netip.Addr) (netip.Addr, bool) {
	b := a.As16()
	switch {
	case nat64.Contains(a):
		return netip.AddrFrom4([4]byte(b[12:16])), true
	case sixToFour.Contains(a):
		return netip.AddrFrom4([4]byte(b[2:6])), true
	}
	return netip.Addr{}, false
}

var (
	globalUnicast6 = netip.MustParsePrefix("2000::/3")
	nat64          = netip.MustParsePrefix("64:ff9b::/96") // RFC 6052: the last 32 bits are the IPv4 address
	sixToFour      = netip.MustParsePrefix("2002::/16")    // RFC 3056: bits 16–47 are the IPv4 address
)

var blocked4 = []netip.Prefix{
	netip.MustParsePrefix("0.0.0.0/8"),       // "this network"
	netip.MustParsePrefix("100.64.0.0/10"),   // carrier-grade NAT
	netip.MustParsePrefix("169.254.0.0/16"),  // link-local, cloud metadata 169.254.169.254
	netip.MustParsePrefix("192.0.0.0/24"),    // IETF protocol assignments
	netip.MustParsePrefix("192.0.2.0/24"),    // TEST-NET-1
	netip.MustParsePrefix("192.88.99.0/24"),  // 6to4 relay anycast (deprecated)
	netip.MustParsePrefix("198.18.0.0/15"),   // benchmarking
	netip.MustParsePrefix("198.51.100.0/24"), // TEST-NET-2
	netip.MustParsePrefix("203.0.113.0/24"),  // TEST-NET-3
	netip.MustParsePrefix("224.0.0.0/4"),     // multicast
	netip.MustParsePrefix("240.0.0.0/4"),     // reserved, and broadcast 255.255.255.255
}

var blocked6 = []netip.Prefix{
	netip.MustParsePrefix("2001::/23"),     // IETF protocol assignments, Teredo 2001::/32 among them
	netip.MustParsePrefix("2001:db8::/32"), // documentation
	netip.MustParsePrefix("3fff::/20"),     // documentation (RFC 9637)
}

// DialControl is a net.Dialer Control function that refuses non-public
// addresses at connect time, after resolution, so that DNS rebinding cannot
// slip past CheckURL.
func DialControl(network, address string, _ syscall.RawConn) error {
	host, _, err := net.SplitHostPort(address)
	if err != nil {
		return err
	}
	a, err := netip.ParseAddr(host)
	if err != nil || !Public(a) {
		return fmt.Errorf("%w: %s", ErrForbidden, host)
	}
	return nil
}
