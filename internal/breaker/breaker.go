package breaker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
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
// *OpenError: the caller comes back at its RetryAt without spending an
// attempt.
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

// allow is Allow, reporting whether this call holds a probe lease.
func (b *Breaker) allow(ctx context.Context, keys ...string) (probe bool, _ error) {
	for _, key := range keys {
		r, err := b.state(ctx, key)
		if err != nil {
			return probe, b.storageSnooze(key, err)
		}
		now := b.o.Now()
		a := Admit(b.o.Config, r, now)
		if !a.Allow {
			return probe, retry.Snooze(&OpenError{Key: key, RetryAt: a.RetryAt}, a.RetryAt)
		}
		if !a.Probe {
			continue
		}
		// Lease from the stored state, not the cache.
		if r, err = b.read(ctx, key); err != nil {
			return probe, b.storageSnooze(key, err)
		}
		leased, ok := LeaseProbe(b.o.Config, r, b.o.Owner, now)
		if ok {
			err = b.write(ctx, r, leased)
		}
		if !ok || errors.Is(err, ErrConflict) {
			if fresh, rerr := b.read(ctx, key); rerr == nil {
				b.remember(fresh)
			}
			retryAt := now.Add(b.o.Config.ProbeLease)
			return probe, retry.Snooze(&OpenError{Key: key, RetryAt: retryAt}, retryAt)
		}
		if err != nil {
			return probe, b.storageSnooze(key, err)
		}
		probe = true
		b.o.Logger.Info("breaker probe", "breaker", key, "owner", b.o.Owner)
	}
	return probe, nil
}

// Record applies a call's outcome to every key, writing only when the
// state machine says something changed.
func (b *Breaker) Record(ctx context.Context, o Outcome, retryAfter time.Duration, keys ...string) error {
	var errs []error
	for _, key := range keys {
		o, retryAfter := o, retryAfter
		if o == RateLimited && strings.HasPrefix(key, "host:") {
			// A 429 flags the token that got it; for the host it is one
			// failure towards the threshold, so one user's rate limit does
			// not stop everyone.
			o, retryAfter = Failure, 0
		}
		r, err := b.state(ctx, key)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for range 5 {
			next, changed, tr := OnResult(b.o.Config, r, o, retryAfter, b.o.Now())
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
	return err
}
