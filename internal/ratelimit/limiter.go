package ratelimit

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/conveyor/conveyor/internal/fault"
)

// Store keeps the buckets' theoretical arrival times, one per bucket,
// shared by every instance (store.Store.RateLease in the table).
type Store interface {
	// RateLease moves bucket's TAT from prev (zero: the bucket has no
	// item) to next, in one conditional write, if it is still prev. When
	// it is not, it changes nothing and reports false with the bucket's
	// current TAT (zero: no item).
	RateLease(ctx context.Context, bucket string, prev, next time.Time) (ok bool, current time.Time, err error)
}

// CodeThrottled is the code of the answer to a request over its owner's
// rate.
const CodeThrottled = "throttled"

// Defaults of Config.
const (
	// LeaseForDefault is Config.LeaseFor's default: a leased unit not
	// served within a second is dropped.
	LeaseForDefault = time.Second
	// AttemptsDefault is Config.Attempts's default.
	AttemptsDefault = 4
	// OpenForDefault is Config.OpenFor's default.
	OpenForDefault = 5 * time.Second
	// MaxOwnersDefault is Config.MaxOwners's default.
	MaxOwnersDefault = 10000
)

// Config configures a Limiter.
type Config struct {
	// Store keeps the buckets. Required.
	Store Store
	// PerPlan is each plan's limit; a plan not in it gets Fallback's.
	PerPlan map[string]Limit
	// PerOwner overrides PerPlan for named owners.
	PerOwner map[string]Limit
	// Fallback is the plan whose limit an unknown plan gets (default
	// "free").
	Fallback string
	// LeaseFor is the longest a leased unit waits on the instance to be
	// served; beyond, it is dropped (default LeaseForDefault). The bound an
	// owner may exceed its limit by is Rate×LeaseFor (the package's doc).
	LeaseFor time.Duration
	// Attempts is how many conditional writes one lease tries when other
	// instances move the bucket between them (default AttemptsDefault);
	// beyond, the request is refused with a second's wait.
	Attempts int
	// OpenFor is how long after a store failure the limiter serves every
	// request without asking the store again (default OpenForDefault).
	OpenFor time.Duration
	// MaxOwners bounds the owners the instance remembers; past it, the
	// idle ones are forgotten (default MaxOwnersDefault).
	MaxOwners int
	// Now is the clock (default time.Now).
	Now func() time.Time
	// Logger receives the store's failures (default slog.Default()).
	Logger *slog.Logger
}

// Limiter admits requests by their owner's rate. It is safe for concurrent
// use; one per instance, made once at cold start.
type Limiter struct {
	cfg Config

	mu     sync.Mutex
	owners map[string]*owner
	// openUntil: after a store failure, serve without asking until then.
	openUntil time.Time
}

// owner is what the instance knows of one owner's bucket.
type owner struct {
	mu sync.Mutex
	// tat is the bucket's TAT as last seen (zero: none seen, or no item).
	tat time.Time
	// left units of the current block, usable until until.
	left, size, used int
	until            time.Time
	blocks           blocks
}

// New returns a Limiter for c.
func New(c Config) (*Limiter, error) {
	if c.Store == nil {
		return nil, fmt.Errorf("ratelimit: Config.Store is required")
	}
	for p, l := range c.PerPlan {
		if l.Rate < 1 || l.Burst < 1 {
			return nil, fmt.Errorf("ratelimit: plan %s: rate and burst must be at least 1, got %d/%d", p, l.Rate, l.Burst)
		}
	}
	for o, l := range c.PerOwner {
		if l.Rate < 1 || l.Burst < 1 {
			return nil, fmt.Errorf("ratelimit: owner %s: rate and burst must be at least 1, got %d/%d", o, l.Rate, l.Burst)
		}
	}
	if c.Fallback == "" {
		c.Fallback = "free"
	}
	if _, ok := c.PerPlan[c.Fallback]; !ok {
		return nil, fmt.Errorf("ratelimit: the fallback plan %q has no limit", c.Fallback)
	}
	if c.LeaseFor <= 0 {
		c.LeaseFor = LeaseForDefault
	}
	if c.Attempts < 1 {
		c.Attempts = AttemptsDefault
	}
	if c.OpenFor <= 0 {
		c.OpenFor = OpenForDefault
	}
	if c.MaxOwners < 1 {
		c.MaxOwners = MaxOwnersDefault
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return &Limiter{cfg: c, owners: map[string]*owner{}}, nil
}

// LimitOf is the limit of owner on plan: its own, else its plan's, else
// the fallback plan's.
func (lm *Limiter) LimitOf(ownerID, plan string) Limit {
	if l, ok := lm.cfg.PerOwner[ownerID]; ok {
		return l
	}
	if l, ok := lm.cfg.PerPlan[plan]; ok {
		return l
	}
	return lm.cfg.PerPlan[lm.cfg.Fallback]
}

// bucketOf is the store's name of owner's bucket.
func bucketOf(ownerID string) string { return ownerID }

// Admit takes one unit of owner's bucket for a request. It returns a
// *fault.Throttled when the bucket has none (with how long until it has),
// nil otherwise. When the store fails, it logs the failure and admits the
// request (fail open): a rate check never makes the API unavailable.
func (lm *Limiter) Admit(ctx context.Context, ownerID, plan string) error {
	l := lm.LimitOf(ownerID, plan)
	o := lm.owner(ownerID)
	o.mu.Lock()
	defer o.mu.Unlock()
	now := lm.cfg.Now()
	if o.left > 0 && now.Before(o.until) {
		o.left--
		o.used++
		return nil
	}
	if o.size > 0 {
		o.blocks.used(o.used, o.size, o.left > 0)
		o.left, o.size, o.used = 0, 0, 0
	}
	// The TAT only moves forward, so a bucket seen empty is empty until
	// it refills: a refused caller costs no write until then.
	if !o.tat.IsZero() && l.Available(o.tat, now) < 1 {
		return throttled(l, plan, ownerID, lm.cfg.PerOwner, l.Wait(o.tat, now))
	}
	if lm.isOpen(now) {
		return nil
	}
	n, err := lm.lease(ctx, o, bucketOf(ownerID), l, now)
	if errors.Is(err, errContended) {
		// Other instances keep taking units: refuse this request rather
		// than serve one the bucket may not have.
		return throttled(l, plan, ownerID, lm.cfg.PerOwner, max(l.Wait(o.tat, now), time.Second))
	}
	if err != nil && ctx.Err() != nil {
		// The request ended (its caller went, its deadline passed): not the
		// store's failure.
		return nil
	}
	if err != nil {
		lm.open(now)
		lm.cfg.Logger.ErrorContext(ctx, "rate check failed; serving the request", "user", ownerID, "error", err.Error())
		return nil
	}
	if n == 0 {
		return throttled(l, plan, ownerID, lm.cfg.PerOwner, l.Wait(o.tat, now))
	}
	o.size, o.left, o.used, o.until = n, n-1, 1, now.Add(lm.cfg.LeaseFor)
	return nil
}

// lease takes a block for o from the store: as many units as the block's
// size, or what the bucket has if less (0: none). It tries again, with the
// TAT the store answered, when another instance moved the bucket.
func (lm *Limiter) lease(ctx context.Context, o *owner, bucket string, l Limit, now time.Time) (int, error) {
	want := o.blocks.size(MaxBlock(l))
	for range lm.cfg.Attempts {
		n := min(want, l.Available(o.tat, now))
		if n < 1 {
			return 0, nil
		}
		next := l.Take(o.tat, now, n)
		ok, cur, err := lm.cfg.Store.RateLease(ctx, bucket, o.tat, next)
		if err != nil {
			return 0, err
		}
		if ok {
			o.tat = next
			return n, nil
		}
		o.tat = cur
	}
	return 0, errContended
}

// errContended: other instances moved the bucket under every attempt.
var errContended = errors.New("the bucket moved under every lease attempted")

// owner returns the instance's record of id, forgetting idle ones when
// there are too many.
func (lm *Limiter) owner(id string) *owner {
	lm.mu.Lock()
	defer lm.mu.Unlock()
	o, ok := lm.owners[id]
	if ok {
		return o
	}
	if len(lm.owners) >= lm.cfg.MaxOwners {
		lm.forget(lm.cfg.Now())
	}
	o = &owner{}
	lm.owners[id] = o
	return o
}

// forget drops the owners whose block has lapsed and whose bucket is full
// again as far as the instance knows (lm.mu held): forgetting them loses
// nothing but the size of their next block. If that frees too little, it
// drops every owner not in use.
func (lm *Limiter) forget(now time.Time) {
	for id, o := range lm.owners {
		if o.mu.TryLock() {
			if !now.Before(o.until) && o.tat.Before(now) {
				delete(lm.owners, id)
			}
			o.mu.Unlock()
		}
	}
	if len(lm.owners) >= lm.cfg.MaxOwners {
		for id, o := range lm.owners {
			if o.mu.TryLock() {
				delete(lm.owners, id)
				o.mu.Unlock()
			}
		}
	}
}

func (lm *Limiter) isOpen(now time.Time) bool {
	lm.mu.Lock()
	defer lm.mu.Unlock()
	return now.Before(lm.openUntil)
}

func (lm *Limiter) open(now time.Time) {
	lm.mu.Lock()
	defer lm.mu.Unlock()
	lm.openUntil = now.Add(lm.cfg.OpenFor)
}

// throttled is the refusal of a request of owner over l.
func throttled(l Limit, plan, ownerID string, perOwner map[string]Limit, wait time.Duration) error {
	whose := "the " + plan + " plan's"
	if _, ok := perOwner[ownerID]; ok {
		whose = "your account's"
	}
	secs := RetryAfter(wait)
	return &fault.Throttled{
		Code: CodeThrottled, Limit: l.Rate, Period: time.Second, Burst: l.Burst, RetryAfter: wait,
		Msg: fmt.Sprintf("too many requests: over %s rate of %d a second (bursts of up to %d); retry in %d s", whose, l.Rate, l.Burst, secs),
	}
}
