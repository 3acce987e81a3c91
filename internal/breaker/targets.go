package breaker

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/conveyor/conveyor/internal/retry"
)

// Targets are the circuits of hosts that users choose themselves (the
// http kind's targets). The risk of such a host is its owner's, so its
// circuit is too: one per (owner, host), opened only by that owner's calls
// and holding back only that owner's jobs. The product's own circuits
// (the publishing API's host and tokens, Breaker) never see these calls.
//
// An owner's records live in a partition of their own (Store),
// never in the one every instance reads in full: a call reads its owner's
// partition (one Query over at most MaxPerOwner+1 small items), cached
// per owner for Config.CacheTTL. An owner has at most MaxPerOwner host
// records, in numbered slots taken with a conditional write, so the bound
// holds across concurrent instances; the hosts beyond it share one
// owner-wide circuit (the "shared" slot, key "http:*"). A slot frees when
// its circuit closes (the record is deleted) or its record expires.
type Targets struct {
	b   *Breaker
	max int

	mu    sync.Mutex
	views map[string]ownerView
}

// MaxPerOwnerDefault is the number of host circuits an owner may have
// before further hosts share one.
const MaxPerOwnerDefault = 20

// maxCachedOwners bounds an instance's cache of owners' records.
const maxCachedOwners = 4096

// SharedKey is the key of an owner's shared circuit: the hosts beyond
// MaxPerOwner.
const SharedKey = "http:*"

const sharedSlot = "slot#shared"

// TargetKey is the key of the circuit of host for its owner, as it appears
// in errors and logs ("http:" and the host).
func TargetKey(host string) string { return Key("http", host) }

func slotSK(i int) string { return fmt.Sprintf("slot#%03d", i) }

// Targets returns the target circuits over b's table, configuration and
// clock, with at most maxPerOwner host records per owner (≤ 0: the
// default).
func (b *Breaker) Targets(maxPerOwner int) *Targets {
	if maxPerOwner <= 0 {
		maxPerOwner = MaxPerOwnerDefault
	}
	return &Targets{b: b, max: maxPerOwner, views: map[string]ownerView{}}
}

// MaxPerOwner is the bound on an owner's host records.
func (t *Targets) MaxPerOwner() int { return t.max }

// ownerView is an instance's copy of an owner's live slots, by slot.
type ownerView struct {
	at    time.Time
	slots map[string]TargetRecord
}

// List returns owner's live target records (for tests and operators).
func (t *Targets) List(ctx context.Context, owner string) ([]Record, error) {
	v, err := t.query(ctx, owner)
	if err != nil {
		return nil, err
	}
	out := make([]Record, 0, len(v.slots))
	for _, r := range v.slots {
		out = append(out, r.Record)
	}
	return out, nil
}

// query reads owner's partition (consistently); expired slots are free.
func (t *Targets) query(ctx context.Context, owner string) (ownerView, error) {
	now := t.b.o.Now()
	recs, err := t.b.o.Store.BreakerTargets(ctx, owner, now)
	if err != nil {
		return ownerView{}, err
	}
	v := ownerView{at: now, slots: make(map[string]TargetRecord, len(recs))}
	for _, r := range recs {
		v.slots[r.Slot] = r
	}
	return v, nil
}

// view returns owner's slots, from the cache when it is younger than
// CacheTTL and fresh is false.
func (t *Targets) view(ctx context.Context, owner string, fresh bool) (ownerView, error) {
	now := t.b.o.Now()
	if !fresh {
		t.mu.Lock()
		v, ok := t.views[owner]
		t.mu.Unlock()
		if ok && now.Sub(v.at) < t.b.o.Config.CacheTTL {
			return v, nil
		}
	}
	v, err := t.query(ctx, owner)
	if err != nil {
		return ownerView{}, err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.views) >= maxCachedOwners {
		for o, old := range t.views {
			if now.Sub(old.at) >= t.b.o.Config.CacheTTL {
				delete(t.views, o)
			}
		}
		if len(t.views) >= maxCachedOwners {
			clear(t.views)
		}
	}
	if cur, ok := t.views[owner]; !ok || !now.Before(cur.at) {
		t.views[owner] = v
	}
	return v, nil
}

// remember puts one slot's new state into the cached view of owner
// (copy on write: views are shared read-only).
func (t *Targets) remember(owner string, r TargetRecord, deleted bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	cur, ok := t.views[owner]
	if !ok {
		return
	}
	slots := make(map[string]TargetRecord, len(cur.slots)+1)
	for k, v := range cur.slots {
		slots[k] = v
	}
	if deleted {
		delete(slots, r.Slot)
	} else {
		slots[r.Slot] = r
	}
	t.views[owner] = ownerView{at: cur.at, slots: slots}
}

func (t *Targets) forget(owner string) {
	t.mu.Lock()
	delete(t.views, owner)
	t.mu.Unlock()
}

// pick finds host's circuit in v: its own slot, or none yet (slot "")
// while the owner has fewer than max host records, else the shared one.
func (t *Targets) pick(v ownerView, host string) TargetRecord {
	own := 0
	for _, r := range v.slots {
		if r.Slot == sharedSlot {
			continue
		}
		if r.Host == host {
			return r
		}
		own++
	}
	if own < t.max {
		return TargetRecord{Record: Record{Key: TargetKey(host), State: Closed}, Host: host}
	}
	if r, ok := v.slots[sharedSlot]; ok {
		return r
	}
	return TargetRecord{Record: Record{Key: SharedKey, State: Closed}, Host: "*", Slot: sharedSlot}
}

// freeSlot is the first of the owner's numbered slots v does not hold.
func (t *Targets) freeSlot(v ownerView) (string, bool) {
	for i := range t.max {
		if _, taken := v.slots[slotSK(i)]; !taken {
			return slotSK(i), true
		}
	}
	return "", false
}

// get reads one slot consistently (zero Record, closed, when absent or
// expired).
func (t *Targets) get(ctx context.Context, owner string, at TargetRecord) (TargetRecord, error) {
	r, found, err := t.b.o.Store.BreakerTarget(ctx, owner, at.Slot, t.b.o.Now())
	if err != nil {
		return TargetRecord{}, err
	}
	if !found {
		return TargetRecord{Record: Record{Key: at.Key, State: Closed}, Host: at.Host, Slot: at.Slot}, nil
	}
	return r, nil
}

// put stores next in at's slot on condition of at's version (a closed
// record is deleted instead).
func (t *Targets) put(ctx context.Context, owner string, at TargetRecord, next Record) error {
	var err error
	switch prev := at.Version; {
	case !stored(next):
		if prev == 0 {
			break
		}
		err = t.b.o.Store.DeleteBreakerTarget(ctx, owner, at.Slot, prev)
	default:
		err = t.b.o.Store.PutBreakerTarget(ctx, owner, at.Slot, at.Host, next, prev, t.b.expiry(next), t.b.o.Now())
	}
	if err != nil {
		return err
	}
	t.remember(owner, TargetRecord{Record: next, Host: at.Host, Slot: at.Slot}, !stored(next))
	return nil
}

// Do runs fn under owner's circuit of host: refused fast while it is
// open (a retry.Snooze wrapping an *OpenError), the outcome recorded
// after. As with Breaker.Do, a half-open probe's context ends after
// ProbeCallTimeout(ProbeLease), and a failure to read the state is a
// snooze (the call is not made).
func (t *Targets) Do(ctx context.Context, owner, host string, fn func(context.Context) error) error {
	if owner == "" {
		return errors.New("breaker: a target circuit needs its owner")
	}
	v, err := t.view(ctx, owner, false)
	if err != nil {
		return t.b.storageSnooze(TargetKey(host), err)
	}
	r := t.pick(v, host)
	now := t.b.o.Now()
	a := Admit(t.b.o.Config, r.Record, now)
	if !a.Allow {
		return retry.Snooze(&OpenError{Key: r.Key, RetryAt: a.RetryAt}, a.RetryAt)
	}
	probe := false
	if a.Probe {
		if r, err = t.get(ctx, owner, r); err != nil {
			return t.b.storageSnooze(r.Key, err)
		}
		leased, ok := LeaseProbe(t.b.o.Config, r.Record, t.b.o.Owner, now)
		if ok {
			err = t.put(ctx, owner, r, leased)
		}
		if !ok || errors.Is(err, ErrConflict) {
			t.forget(owner)
			retryAt := now.Add(t.b.o.Config.ProbeLease)
			return retry.Snooze(&OpenError{Key: r.Key, RetryAt: retryAt}, retryAt)
		}
		if err != nil {
			return t.b.storageSnooze(r.Key, err)
		}
		probe = true
		t.b.o.Logger.Info("breaker probe", "breaker", r.Key, "owner", t.b.o.Owner)
	}
	callCtx := ctx
	if probe {
		var cancel context.CancelFunc
		callCtx, cancel = context.WithTimeout(ctx, ProbeCallTimeout(t.b.o.Config.ProbeLease))
		defer cancel()
	}
	err = fn(callCtx)
	o, ra := Classify(err)
	after, rerr := t.record(context.WithoutCancel(ctx), owner, host, o, ra)
	if rerr != nil {
		t.b.o.Logger.Warn("recording a breaker outcome failed", "breaker", r.Key, "error", rerr)
	}
	if o == RateLimited && after.Key != "" {
		if a := Admit(t.b.o.Config, after, t.b.o.Now()); !a.Allow {
			// Not tried again before the circuit lets it through, where it
			// would only find the circuit open (a probe's 429 reopens it
			// for the cooldown, whatever its Retry-After).
			return &reopenedError{err: err, after: a.RetryAt.Sub(t.b.o.Now())}
		}
	}
	return err
}

// Record applies a call's outcome to owner's circuit of host, writing
// only when the state machine says something changed. A host without a
// record takes a free slot, or the shared circuit when none is free.
func (t *Targets) Record(ctx context.Context, owner, host string, o Outcome, retryAfter time.Duration) error {
	_, err := t.record(ctx, owner, host, o, retryAfter)
	return err
}

// record is Record, returning the circuit's record after the outcome (a
// zero Record when it could not be read).
func (t *Targets) record(ctx context.Context, owner, host string, o Outcome, retryAfter time.Duration) (Record, error) {
	fresh := false
	for range 5 {
		v, err := t.view(ctx, owner, fresh)
		if err != nil {
			return Record{}, err
		}
		r := t.pick(v, host)
		next, changed, tr := OnResult(t.b.o.Config, r.Record, o, retryAfter, t.b.o.Now())
		if !changed {
			next.Key = r.Key
			return next, nil
		}
		if r.Slot == "" {
			slot, ok := t.freeSlot(v)
			if !ok {
				fresh = true // the slots filled since the view was read
				continue
			}
			r.Slot = slot
		}
		next.Key = r.Key
		err = t.put(ctx, owner, r, next)
		if errors.Is(err, ErrConflict) {
			fresh = true
			continue
		}
		if err != nil {
			return Record{}, err
		}
		if tr != nil {
			t.b.o.Logger.Warn("breaker state changed", "breaker", r.Key, "from", tr.From, "to", tr.To, "reason", tr.Reason, "open_until", next.OpenUntil)
			if t.b.o.OnTransition != nil {
				t.b.o.OnTransition(*tr)
			}
		}
		return next, nil
	}
	return Record{}, fmt.Errorf("recording breaker %s of %s: %w", TargetKey(host), owner, ErrConflict)
}
