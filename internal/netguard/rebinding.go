package netguard

import (
	"context"
	"net/netip"
	"sync"
)

// Rebinding is a Resolver for tests of the guard: it answers a public
// address to the first lookup of a name and a loopback one afterwards, a
// DNS rebinding attack.
type Rebinding struct {
	mu    sync.Mutex
	calls int
}

// LookupNetIP implements Resolver.
func (r *Rebinding) LookupNetIP(context.Context, string, string) ([]netip.Addr, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls++
	if r.calls == 1 {
		return []netip.Addr{netip.MustParseAddr("93.184.216.34")}, nil
	}
	return []netip.Addr{netip.MustParseAddr("127.0.0.1")}, nil
}
