package netguard

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"testing"
)

type fakeResolver map[string][]netip.Addr

func (f fakeResolver) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	if a, ok := f[host]; ok {
		return a, nil
	}
	return nil, errors.New("no such host")
}

func TestCheckURL(t *testing.T) {
	t.Parallel()
	res := fakeResolver{
		"hooks.example.com":  {netip.MustParseAddr("93.184.216.34")},
		"internal.evil.test": {netip.MustParseAddr("10.1.2.3")},
		"mixed.evil.test":    {netip.MustParseAddr("93.184.216.34"), netip.MustParseAddr("127.0.0.1")},
	}
	prod := Policy{Resolver: res}
	tests := []struct {
		url string
		ok  bool
	}{
		{"https://hooks.example.com/x", true},
		{"https://93.184.216.34/x", true},
		{"http://hooks.example.com/x", false},
		{"https://10.0.0.1/", false},
		{"https://127.0.0.1/", false},
		{"https://169.254.169.254/latest/meta-data", false},
		{"https://[::1]/", false},
		{"https://[fe80::1]/", false},
		{"https://[::ffff:127.0.0.1]/", false},
		{"https://[::a9fe:a9fe]/", false},
		{"https://[64:ff9b::a9fe:a9fe]/", false},
		{"https://[64:ff9b:1::a9fe:a9fe]/", false},
		{"https://[2002:a9fe:a9fe::]/", false},
		{"https://[2002:5db8:d822::1]/", true},
		{"https://[2001:0:4136:e378:8000:63bf:3fff:fdd2]/", false},
		{"https://[fe80::1%25eth0]/", false},
		{"https://0x7f000001/", false},
		{"https://2130706433/", false},
		{"https://0177.0.0.1/", false},
		{"https://127.1/", false},
		{"https://0/", false},
		{"https://localhost/", false},
		{"https://internal.evil.test/", false},
		{"https://mixed.evil.test/", false},
		{"https://unresolvable.test/", false},
		{"https://user:pw@hooks.example.com/", false},
		{"ftp://hooks.example.com/", false},
		{"/relative", false},
		{"", false},
	}
	for _, tt := range tests {
		_, err := prod.CheckURL(context.Background(), tt.url)
		if (err == nil) != tt.ok {
			t.Errorf("CheckURL(%q) err = %v, want ok=%v", tt.url, err, tt.ok)
		}
	}
	local := Policy{AllowHTTP: true, AllowPrivate: true}
	if _, err := local.CheckURL(context.Background(), "http://127.0.0.1:9000/hook"); err != nil {
		t.Errorf("local policy refused loopback http: %v", err)
	}
}

// TestCheckURLSaysWhatTheModeAccepts: a refused scheme is told the schemes
// this policy takes — http or https locally, https elsewhere.
func TestCheckURLSaysWhatTheModeAccepts(t *testing.T) {
	t.Parallel()
	local := Policy{AllowHTTP: true, AllowPrivate: true}
	prod := Policy{Resolver: fakeResolver{}}
	for _, tt := range []struct {
		name   string
		policy Policy
		url    string
		want   string
	}{
		{"local, ftp", local, "ftp://x", "must use http or https"},
		{"local, javascript", local, "javascript://x/alert(1)", "must use http or https"},
		{"production, ftp", prod, "ftp://x", "must use https"},
		{"production, http", prod, "http://x", "must use https"},
	} {
		_, err := tt.policy.CheckURL(context.Background(), tt.url)
		if err == nil || err.Error() != tt.want {
			t.Errorf("%s: CheckURL(%q) = %v, want %q", tt.name, tt.url, err, tt.want)
		}
	}
}

func TestPublic(t *testing.T) {
	t.Parallel()
	tests := []struct {
		addr string
		want bool
		why  string
	}{
		{"93.184.216.34", true, "public IPv4"},
		{"8.8.8.8", true, "public IPv4"},
		{"2606:2800:220:1:248:1893:25c8:1946", true, "public IPv6"},
		{"10.1.2.3", false, "private 10/8"},
		{"172.16.0.1", false, "private 172.16/12"},
		{"192.168.1.1", false, "private 192.168/16"},
		{"127.0.0.1", false, "loopback"},
		{"127.255.255.254", false, "loopback /8"},
		{"169.254.169.254", false, "metadata"},
		{"169.254.1.1", false, "link-local"},
		{"0.0.0.0", false, "unspecified"},
		{"0.1.2.3", false, "this network 0/8"},
		{"100.64.0.1", false, "CGNAT"},
		{"100.127.255.254", false, "CGNAT end"},
		{"100.128.0.1", true, "just past CGNAT"},
		{"192.0.0.8", false, "IETF 192.0.0/24"},
		{"192.0.2.1", false, "TEST-NET-1"},
		{"198.51.100.1", false, "TEST-NET-2"},
		{"203.0.113.1", false, "TEST-NET-3"},
		{"198.18.0.1", false, "benchmarking"},
		{"198.19.255.255", false, "benchmarking end"},
		{"224.0.0.1", false, "multicast"},
		{"239.255.255.250", false, "multicast SSDP"},
		{"240.0.0.1", false, "reserved"},
		{"255.255.255.255", false, "broadcast"},
		{"::1", false, "IPv6 loopback"},
		{"::", false, "IPv6 unspecified"},
		{"fe80::1", false, "IPv6 link-local"},
		{"fe80::1%eth0", false, "IPv6 link-local with a zone"},
		{"fc00::1", false, "ULA fc00::/7"},
		{"fd12:3456::1", false, "ULA fd"},
		{"fd00:ec2::254", false, "EC2 IPv6 metadata"},
		{"ff02::1", false, "IPv6 multicast"},
		{"100::1", false, "discard-only"},
		{"::ffff:127.0.0.1", false, "IPv4-mapped loopback"},
		{"::ffff:169.254.169.254", false, "IPv4-mapped metadata"},
		{"::ffff:93.184.216.34", true, "IPv4-mapped public"},
		{"::ffff:0:a9fe:a9fe", false, "SIIT IPv4-translated"},
		{"::a9fe:a9fe", false, "IPv4-compatible metadata"},
		{"::7f00:1", false, "IPv4-compatible loopback"},
		{"::5db8:d822", false, "IPv4-compatible public (deprecated form, refused whole)"},
		{"64:ff9b::a9fe:a9fe", false, "NAT64 metadata"},
		{"64:ff9b::10.0.0.1", false, "NAT64 private"},
		{"64:ff9b::127.0.0.1", false, "NAT64 loopback"},
		{"64:ff9b::93.184.216.34", true, "NAT64 public"},
		{"64:ff9b:1::a9fe:a9fe", false, "local-use NAT64 (refused whole)"},
		{"64:ff9b:1:fffe::5db8:d822", false, "local-use NAT64 public (refused whole)"},
		{"2002:a9fe:a9fe::", false, "6to4 metadata"},
		{"2002:7f00:1::1", false, "6to4 loopback"},
		{"2002:c0a8:101::1", false, "6to4 private"},
		{"2002:5db8:d822::1", true, "6to4 public"},
		{"2001:0:4136:e378:8000:63bf:3fff:fdd2", false, "Teredo (refused whole)"},
		{"2001:0:a9fe:a9fe::", false, "Teredo with a metadata server"},
		{"2001:2::1", false, "benchmarking IPv6"},
		{"2001:db8::1", false, "documentation"},
		{"3fff::1", false, "documentation 3fff::/20"},
	}
	for _, tt := range tests {
		a, err := netip.ParseAddr(tt.addr)
		if err != nil {
			t.Fatalf("%s: %v", tt.addr, err)
		}
		if got := Public(a); got != tt.want {
			t.Errorf("Public(%s) = %v, want %v (%s)", tt.addr, got, tt.want, tt.why)
		}
	}
	if Public(netip.Addr{}) {
		t.Error("the zero Addr is public")
	}
}

// TestDialContextRefusesRebinding: a name checked public by CheckURL and
// resolving to loopback when the connection is made is refused at connect
// time; the listener never sees a connection.
func TestDialContextRefusesRebinding(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan struct{}, 1)
	go func() {
		if c, err := ln.Accept(); err == nil {
			accepted <- struct{}{}
			c.Close()
		}
	}()
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	p := Policy{Resolver: &Rebinding{}}
	ctx := context.Background()
	if _, err := p.CheckURL(ctx, "https://rebind.test:"+port+"/hook"); err != nil {
		t.Fatalf("CheckURL: %v, want the first (public) answer to pass", err)
	}
	for _, addr := range []string{"rebind.test:" + port, "127.0.0.1:" + port, "[::ffff:127.0.0.1]:" + port, "[64:ff9b::7f00:1]:" + port, "localhost:" + port} {
		c, err := p.DialContext(ctx, "tcp", addr)
		if !errors.Is(err, ErrForbidden) {
			if c != nil {
				c.Close()
			}
			t.Errorf("DialContext(%s) = %v, want ErrForbidden", addr, err)
		}
	}
	select {
	case <-accepted:
		t.Error("a connection reached the loopback listener")
	default:
	}
	local := Policy{AllowPrivate: true}
	c, err := local.DialContext(ctx, "tcp", "127.0.0.1:"+port)
	if err != nil {
		t.Fatalf("local policy: %v", err)
	}
	c.Close()
	<-accepted
}

func TestDialControl(t *testing.T) {
	t.Parallel()
	for addr, ok := range map[string]bool{"93.184.216.34:443": true, "127.0.0.1:80": false, "[::1]:443": false, "10.0.0.1:443": false, "169.254.169.254:80": false,
		"[::ffff:a9fe:a9fe]:80": false, "[::a9fe:a9fe]:80": false, "[64:ff9b::a9fe:a9fe]:80": false, "[2002:a9fe:a9fe::]:80": false, "[fe80::1%eth0]:80": false} {
		if err := DialControl("tcp", addr, nil); (err == nil) != ok {
			t.Errorf("DialControl(%s) = %v, want ok=%v", addr, err, ok)
		}
	}
}
