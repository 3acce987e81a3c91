package netguard

import (
	"context"
	"errors"
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

func TestDialControl(t *testing.T) {
	t.Parallel()
	for addr, ok := range map[string]bool{"93.184.216.34:443": true, "127.0.0.1:80": false, "[::1]:443": false, "10.0.0.1:443": false, "169.254.169.254:80": false} {
		if err := DialControl("tcp", addr, nil); (err == nil) != ok {
			t.Errorf("DialControl(%s) = %v, want ok=%v", addr, err, ok)
		}
	}
}
