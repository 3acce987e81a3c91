// Package netguard decides whether an outbound URL may be called: webhook
// targets must be public. It refuses private, loopback, link-local,
// unspecified, multicast and cloud metadata addresses, including the
// numeric host spellings (0x7f000001, 2130706433, 0177.0.0.1) that resolve
// to them, and checks names by what they resolve to.
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
)

// ErrForbidden is wrapped by every refusal.
var ErrForbidden = errors.New("target address is not public")

// Resolver looks names up; *net.Resolver satisfies it.
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// Policy says what a URL may be.
type Policy struct {
	// AllowHTTP permits plain http (the local environment only).
	AllowHTTP bool
	// AllowPrivate permits private and loopback targets (local only).
	AllowPrivate bool
	// Resolver defaults to net.DefaultResolver.
	Resolver Resolver
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
		return nil, errors.New("must use https")
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
	if strings.EqualFold(strings.TrimSuffix(host, "."), "localhost") || strings.HasSuffix(strings.ToLower(host), ".localhost") {
		return nil, fmt.Errorf("%w: %s", ErrForbidden, host)
	}
	r := p.Resolver
	if r == nil {
		r = net.DefaultResolver
	}
	addrs, err := r.LookupNetIP(ctx, "ip", host)
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

// Public reports whether a is a globally routable unicast address.
func Public(a netip.Addr) bool {
	a = a.Unmap()
	switch {
	case !a.IsValid(), a.IsLoopback(), a.IsPrivate(), a.IsLinkLocalUnicast(), a.IsLinkLocalMulticast(),
		a.IsInterfaceLocalMulticast(), a.IsMulticast(), a.IsUnspecified():
		return false
	}
	for _, p := range blocked {
		if p.Contains(a) {
			return false
		}
	}
	return true
}

var blocked = []netip.Prefix{
	netip.MustParsePrefix("0.0.0.0/8"),     // "this network"
	netip.MustParsePrefix("100.64.0.0/10"), // carrier-grade NAT
	netip.MustParsePrefix("192.0.0.0/24"),  // IETF protocol assignments
	netip.MustParsePrefix("198.18.0.0/15"), // benchmarking
	netip.MustParsePrefix("240.0.0.0/4"),   // reserved
	netip.MustParsePrefix("fd00:ec2::/32"), // EC2 IPv6 metadata
	netip.MustParsePrefix("64:ff9b::/96"),  // NAT64 can reach private IPv4
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
