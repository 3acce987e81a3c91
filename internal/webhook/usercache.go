package webhook

import (
	"sync"
	"time"
)

// maxCachedUsers bounds a per-user cache: past it the cache starts over, so
// a long-lived instance's memory stays bounded whatever the users it sees.
const maxCachedUsers = 10000

// userCache keeps a value per user until its own deadline (the endpoints
// and the signing keys each function reuses for a while). It is safe for
// concurrent use; the zero value is ready.
type userCache[T any] struct {
	mu sync.Mutex
	m  map[string]cached[T]
}

type cached[T any] struct {
	v     T
	until time.Time
}

// get returns owner's value if it is still fresh at now.
func (c *userCache[T]) get(owner string, now time.Time) (T, bool) {
	c.mu.Lock()
	e, ok := c.m[owner]
	c.mu.Unlock()
	if !ok || !now.Before(e.until) {
		var zero T
		return zero, false
	}
	return e.v, true
}

// put keeps v for owner until until.
func (c *userCache[T]) put(owner string, v T, until time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil || len(c.m) > maxCachedUsers {
		c.m = map[string]cached[T]{}
	}
	c.m[owner] = cached[T]{v: v, until: until}
}

// forget drops owner's value (it changed).
func (c *userCache[T]) forget(owner string) {
	c.mu.Lock()
	delete(c.m, owner)
	c.mu.Unlock()
}
