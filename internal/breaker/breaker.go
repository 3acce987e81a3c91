package breaker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/conveyor/conveyor/internal/retry"
)

// Options configures a Breaker.
type Options struct {
	Config Config
	// Store keeps the records (required). Only keys with recent failures
	// have one (closing deletes it, and records expire), so reading them
	// all stays cheap.
	Store Store
	// Owner names this instance (probe leases).
	Owner string
	// Now defaults to time.Now.
	Now func() time.Time
	// Logger defaults to slog.Default().
	Logger *slog.Logger
	// OnTransition is called for every state change this instance makes
	// (metrics).
	OnTransition func(Transition)
}

// Breaker is one instance's view of the shared breakers. It reads the
// whole state with one Query per CacheTTL and writes only on failures and
// transitions.
type Breaker struct {
	o      Options
	mu     sync.Mutex
	snap   map[string]Record
	snapAt time.Time
}

// New returns a Breaker, or the reason o.Config is unusable.
func New(o Options) (*Breaker, error) {
	if err := o.Config.Validate(); err != nil {
		return nil, err
	}
	if o.Store == nil {
		return nil, errors.New("breaker: a Store is required")
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return &Breaker{o: o}, nil
}

// List returns every breaker that has a record (expired ones excluded).
func (b *Breaker) List(ctx context.Context) ([]Record, error) {
	return b.o.Store.BreakerRecords(ctx, b.o.Now())
}

// Reset deletes a key's record: the breaker is closed and forgets its failures.
func (b *Breaker) Reset(ctx context.Context, key string) error {
	if err := b.o.Store.ResetBreaker(ctx, key); err != nil {
		return err
	}
	b.mu.Lock()
	delete(b.snap, key)
	b.mu.Unlock()
	b.o.Logger.Info("breaker reset", "breaker", key)
	return nil
}

// state returns the cached record of key, refreshing the snapshot when it
// is older than CacheTTL.
func (b *Breaker) state(ctx context.Context, key string) (Record, error) {
	now := b.o.Now()
	b.mu.Lock()
	fresh := b.snap != nil && now.Sub(b.snapAt) < b.o.Config.CacheTTL
	r, ok := b.snap[key]
	b.mu.Unlock()
	if !fresh {
		all, err := b.List(ctx)
		if err != nil {
			return Record{}, err
		}
		snap := make(map[string]Record, len(all))
		for _, r := range all {
			snap[r.Key] = r
		}
		// Read from the new map before it is shared: once installed, it is
		// written by remember and may only be touched under the lock.
		r, ok = snap[key]
		b.mu.Lock()
		if !now.Before(b.snapAt) { // never replace a snapshot taken later
			b.snap, b.snapAt = snap, now
		}
		b.mu.Unlock()
	}
	if !ok {
		r = Record{Key: key, State: Closed}
	}
	return r, nil
}

func (b *Breaker) remember(r Record) {
	b.mu.Lock()
	if b.snap == nil {
		b.snap = map[string]Record{}
	}
	b.snap[r.Key] = r
	b.mu.Unlock()
}

// read fetches one key's record with a strongly consistent read.
func (b *Breaker) read(ctx context.Context, key string) (Record, error) {
	r, found, err := b.o.Store.BreakerRecord(ctx, key, b.o.Now())
	if err != nil {
		return Record{}, err
	}
	if !found {
		return Record{Key: key, State: Closed}, nil
	}
	return r, nil
}

// write stores next if the stored version is still prev's (a closed
// record is deleted instead).
func (b *Breaker) write(ctx context.Context, prev, next Record) error {
	var err error
	switch {
	case !stored(next):
		if prev.Version == 0 {
			break
		}
		err = b.o.Store.DeleteBreaker(ctx, next.Key, prev.Version)
	default:
		err = b.o.Store.PutBreaker(ctx, next, prev.Version, b.expiry(next), b.o.Now())
	}
	if err != nil {
		return err
	}
	b.remember(next)
	return nil
}

// stored reports whether r needs a record: a closed circuit without
// failures has none (its record is deleted).
func stored(r Record) bool { return r.State != Closed || r.Failures != 0 }

// expiry is when r's record may go: an hour after the last moment it
// matters (its open period, its failure window, its probe's lease). A
// record that does not exist yet (prev.Version 0) may replace one whose
// expiry has passed but which the table has not deleted yet.
func (b *Breaker) expiry(r Record) time.Time {
	until := r.OpenUntil
	for _, t := range []time.Time{r.WindowStart.Add(b.o.Config.Window), r.ProbeUntil} {
		if t.After(until) {
			until = t
		}
	}
	return until.Add(time.Hour)
}

// Allow decides whether a call guarded by keys may go ahead. When a key is
// half-open it leases the probe for this instance (a conditional write:
// exactly one instance wins). A refusal is a retry.Snooze wrapping an
// *OpenError (the refusing key with the latest RetryAt): the caller comes
// back at its RetryAt without spending an attempt.
//
// A probe is never spent on a call that another of its keys refuses: no
// lease is taken while any key refuses, and before one is, every key is
// read from the stored state (not the snapshot), tokens before hosts, so a
// job whose token another instance has just flagged waits on its token and
// leaves the host's probe to a call that can make it.
//
// A failure to read or write the breakers' state (DynamoDB throttled or
// unreachable) is a snooze too, StorageSnoozeDefault away: the call was not
// made, so no attempt is spent on it.
func (b *Breaker) Allow(ctx context.Context, keys ...string) error {
	_, err := b.allow(ctx, keys...)
	return err
}

// StorageSnoozeDefault is how long a caller waits when the breakers' state
// cannot be read or written.
const StorageSnoozeDefault = 5 * time.Second

// storageSnooze turns a storage failure inside Allow into a snooze.
func (b *Breaker) storageSnooze(key string, err error) error {
	return retry.Snooze(fmt.Errorf("breaker %s: state unavailable: %w", key, err), b.o.Now().Add(StorageSnoozeDefault))
}

// refuse is the snooze of a call refused by key until retryAt.
func refuse(key string, retryAt time.Time) error {
	return retry.Snooze(&OpenError{Key: key, RetryAt: retryAt}, retryAt)
}

// isHost reports whether key names a host's circuit (Key("host", …)): one
// every owner's calls share, counted by OnHostResult.
func isHost(key string) bool { return strings.HasPrefix(key, "host:") }

// ownerCtxKey is the context key of WithOwner.
type ownerCtxKey struct{}

// WithOwner returns ctx naming owner as the tenant the calls made under it
// are made for: a host's circuit counts that owner once per window,
// whatever the tokens (accounts, refreshes) its calls use (OnHostResult).
// An empty owner leaves ctx as it is.
func WithOwner(ctx context.Context, owner string) context.Context {
	if owner == "" {
		return ctx
	}
	return context.WithValue(ctx, ownerCtxKey{}, OwnerKey(owner))
}

// ownerOf is who a call guarded by keys under ctx is made for, as a host's
// circuit counts it: the owner WithOwner named, else the first key that is
// not a host's (its token), else "".
func ownerOf(ctx context.Context, keys []string) string {
	if o, ok := ctx.Value(ownerCtxKey{}).(string); ok {
		return o
	}
	for _, k := range keys {
		if !isHost(k) {
			return k
		}
	}
	return ""
}

// allow is Allow, reporting whether this call holds a probe lease.
func (b *Breaker) allow(ctx context.Context, keys ...string) (probe bool, _ error) {
	now := b.o.Now()
	var refusal *OpenError
	for _, key := range keys {
		r, err := b.state(ctx, key)
		if err != nil {
			return false, b.storageSnooze(key, err)
		}
		a := Admit(b.o.Config, r, now)
		if !a.Allow && (refusal == nil || a.RetryAt.After(refusal.RetryAt)) {
			refusal = &OpenError{Key: key, RetryAt: a.RetryAt}
		}
		probe = probe || a.Probe
	}
	if refusal != nil {
		return false, refuse(refusal.Key, refusal.RetryAt)
	}
	if !probe {
		return false, nil
	}
	return b.leaseProbes(ctx, keys, now)
}

// leaseProbes admits a call of which some key is half-open, from the stored
// state: tokens first, then hosts, each key read consistently; a key that
// refuses refuses the call, a half-open one is leased. When the call is
// refused after a lease was taken, the lease is given back, so the probe is
// not lost for a lease's length.
func (b *Breaker) leaseProbes(ctx context.Context, keys []string, now time.Time) (probe bool, err error) {
	ordered := slices.Clone(keys)
	slices.SortStableFunc(ordered, func(x, y string) int {
		switch {
		case isHost(x) == isHost(y):
			return 0
		case isHost(x):
			return 1
		}
		return -1
	})
	var leased []Record
	defer func() {
		if err == nil {
			return
		}
		for _, l := range leased {
			b.releaseProbe(context.WithoutCancel(ctx), l)
		}
	}()
	for _, key := range ordered {
		r, err := b.read(ctx, key)
		if err != nil {
			return false, b.storageSnooze(key, err)
		}
		a := Admit(b.o.Config, r, now)
		switch {
		case !a.Allow:
			b.remember(r)
			return false, refuse(key, a.RetryAt)
		case !a.Probe:
			b.remember(r)
			continue
		}
		next, ok := LeaseProbe(b.o.Config, r, b.o.Owner, now)
		if ok {
			err = b.write(ctx, r, next)
		}
		if !ok || errors.Is(err, ErrConflict) {
			if fresh, rerr := b.read(ctx, key); rerr == nil {
				b.remember(fresh)
			}
			return false, refuse(key, now.Add(b.o.Config.ProbeLease))
		}
		if err != nil {
			return false, b.storageSnooze(key, err)
		}
		leased = append(leased, next)
		b.o.Logger.Info("breaker probe", "breaker", key, "owner", b.o.Owner)
	}
	return len(leased) > 0, nil
}

// releaseProbe gives back a probe lease this instance took for a call it
// then did not make (best effort: a lease not given back lapses).
func (b *Breaker) releaseProbe(ctx context.Context, leased Record) {
	next := leased
	next.ProbeOwner, next.ProbeUntil = "", time.Time{}
	next.UpdatedAt, next.Version = b.o.Now(), leased.Version+1
	if err := b.write(ctx, leased, next); err != nil {
		b.o.Logger.Info("breaker probe lease not given back", "breaker", leased.Key, "error", err)
	}
}

// Record applies a call's outcome to every key, writing only when the
// state machine says something changed. A host's key counts the outcome
// with OnHostResult, for the owner ctx names (WithOwner) or else the
// call's token, the first key that is not a host's; every other key with
// OnResult.
func (b *Breaker) Record(ctx context.Context, o Outcome, retryAfter time.Duration, keys ...string) error {
	var errs []error
	owner := ownerOf(ctx, keys)
	step := func(key string, r Record) (Record, bool, *Transition) {
		if isHost(key) {
			return OnHostResult(b.o.Config, r, o, owner, b.o.Now())
		}
		return OnResult(b.o.Config, r, o, retryAfter, b.o.Now())
	}
	for _, key := range keys {
		r, err := b.state(ctx, key)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for range 5 {
			next, changed, tr := step(key, r)
			if !changed {
				break
			}
			err = b.write(ctx, r, next)
			if errors.Is(err, ErrConflict) {
				if r, err = b.read(ctx, key); err != nil {
					break
				}
				continue
			}
			if err == nil && tr != nil {
				b.o.Logger.Warn("breaker state changed", "breaker", key, "from", tr.From, "to", tr.To, "reason", tr.Reason, "open_until", next.OpenUntil)
				if b.o.OnTransition != nil {
					b.o.OnTransition(*tr)
				}
			}
			break
		}
		if err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// CallerCaused is what an error says when its caller, not the target,
// made the call fail (a deadline below the floor, an invalid request):
// the breaker ignores it.
type CallerCaused interface{ CallerCaused() bool }

// Classify maps a call's error to an outcome for the breaker: success
// (including a permanent 4xx — the API answered), failure (5xx, timeouts,
// network), rate limited (429, with its Retry-After), or ignored (an
// error in whose chain a CallerCaused says true).
func Classify(err error) (Outcome, time.Duration) {
	if err == nil || errors.Is(err, context.Canceled) {
		return Success, 0
	}
	var cc CallerCaused
	if errors.As(err, &cc) && cc.CallerCaused() {
		return Ignored, 0
	}
	var status interface {
		Temporary() bool
		RetryAfter() time.Duration
	}
	var code interface{ StatusCode() int }
	if errors.As(err, &status) {
		if errors.As(err, &code) && code.StatusCode() == 429 {
			return RateLimited, status.RetryAfter()
		}
		if !status.Temporary() {
			return Success, 0
		}
		return Failure, status.RetryAfter()
	}
	return Failure, 0
}

// ProbeCallTimeout is the longest a probe call may run under a probe lease
// of lease: four fifths of it, so the call has ended (and its outcome is
// being recorded) before the lease lapses and another instance may probe.
// A lapsed lease with the probe still running would let a second probe
// through.
func ProbeCallTimeout(lease time.Duration) time.Duration { return lease - lease/5 }

// Do runs fn under the breakers of keys: refused fast when open, the
// outcome recorded after. When the call is a half-open probe, fn's context
// ends after ProbeCallTimeout(ProbeLease), whatever fn's own timeouts.
func (b *Breaker) Do(ctx context.Context, fn func(context.Context) error, keys ...string) error {
	probe, err := b.allow(ctx, keys...)
	if err != nil {
		return err
	}
	callCtx := ctx
	if probe {
		var cancel context.CancelFunc
		callCtx, cancel = context.WithTimeout(ctx, ProbeCallTimeout(b.o.Config.ProbeLease))
		defer cancel()
	}
	err = fn(callCtx)
	o, ra := Classify(err)
	if rerr := b.Record(context.WithoutCancel(ctx), o, ra, keys...); rerr != nil {
		b.o.Logger.Warn("recording a breaker outcome failed", "error", rerr)
	}
	if o == RateLimited {
		return b.untilAdmitted(ctx, err, keys)
	}
	return err
}

// untilAdmitted is a rate-limited call's err asking, as its RetryAfter,
// for no less than the time until every one of keys admits a call again:
// a call whose 429 opened a circuit (a probe's reopens it for the
// cooldown, whatever its Retry-After) is not tried again before the
// circuit lets it through, where it would only find the circuit open and
// spend a wait.
func (b *Breaker) untilAdmitted(ctx context.Context, err error, keys []string) error {
	now := b.o.Now()
	var until time.Time
	for _, key := range keys {
		r, serr := b.state(ctx, key)
		if serr != nil {
			continue
		}
		if a := Admit(b.o.Config, r, now); !a.Allow && a.RetryAt.After(until) {
			until = a.RetryAt
		}
	}
	if !until.After(now) {
		return err
	}
	return &reopenedError{err: err, after: until.Sub(now)}
}

// reopenedError is a call's error from a circuit its outcome left open:
// its RetryAfter is the time until the circuit admits calls again.
type reopenedError struct {
	err   error
	after time.Duration
}

func (e *reopenedError) Error() string { return e.err.Error() }

// Unwrap returns the call's own error.
func (e *reopenedError) Unwrap() error { return e.err }

// RetryAfter is the time until the circuit admits a call again.
func (e *reopenedError) RetryAfter() time.Duration { return e.after }
