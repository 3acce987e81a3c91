package webhook

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/conveyor/conveyor/internal/fault"
)

// Each user's endpoints are also listed in one summary item beside them,
// written in the same transaction as every endpoint's creation and
// deletion, so that the relay reads the endpoints of all the users of a
// stream batch with one BatchGetItem (Endpoints.Prefetch) where it made a
// Query per user. The endpoint items stay the source of truth: a summary
// that is missing (users from before it existed, or with no endpoint yet)
// or older than SummaryRebuildAfter is rebuilt from them, one Query, when
// read — which also heals a summary an older deployment's writes left
// behind during a rolling update. The summary is Summary.

// SummaryRebuildAfter is how long a summary is trusted before its reader
// rebuilds it from the endpoint items.
const SummaryRebuildAfter = time.Hour

// fresh reports whether r may be used as it is at now.
func fresh(r Summary, now time.Time) bool {
	return now.Sub(r.BuiltAt) < SummaryRebuildAfter
}

// current returns owner's summary as it stands, its Version the stored one
// (0: none is stored).
func (s *Endpoints) current(ctx context.Context, owner string) (Summary, error) {
	got, err := s.cfg.Store.GetWebhookSummaries(ctx, []string{owner})
	if err != nil {
		return Summary{}, err
	}
	r, stored := got[owner]
	r, _, err = s.usable(ctx, owner, r, stored, s.cfg.Now())
	return r, err
}

// usable returns r when it is stored and fresh at now; else owner's list
// read again from the endpoint items (BuiltAt now, r's Version kept, so that
// storing it is conditional on r) and true.
func (s *Endpoints) usable(ctx context.Context, owner string, r Summary, stored bool, now time.Time) (Summary, bool, error) {
	if stored && fresh(r, now) {
		return r, false, nil
	}
	list, err := s.List(ctx, owner)
	if err != nil {
		return Summary{}, false, err
	}
	return Summary{Owner: owner, Endpoints: records(list), Version: r.Version, BuiltAt: now.UTC()}, true, nil
}

// errSummaryChanged: a concurrent change of the user's endpoints; read
// again and redo.
var errSummaryChanged = errors.New("webhook endpoints: changed concurrently")

// change applies one endpoint write and the summary's new state, computed
// by edit from the current one, in one transaction (write, given the new
// summary and the version it replaces), retrying when the summary changed
// meanwhile (fault.ErrConflict). edit's and write's other errors abort.
func (s *Endpoints) change(ctx context.Context, owner string, edit func(list []Endpoint) ([]Endpoint, error), write func(next Summary, prev int64) error) error {
	for range 5 {
		cur, err := s.current(ctx, owner)
		if err != nil {
			return err
		}
		list, err := edit(endpoints(cur.Endpoints))
		if err != nil {
			return err
		}
		next := cur
		next.Endpoints = records(list)
		switch err := write(next, cur.Version); {
		case err == nil:
			s.forget(owner)
			return nil
		case errors.Is(err, fault.ErrConflict):
			continue // the summary changed (or a conflict): read again
		default:
			return err
		}
	}
	return errSummaryChanged
}

// rebuild stores r (read from the endpoint items) as owner's summary if
// nobody changed it since; a lost race is no error: r still says what the
// items held when read.
func (s *Endpoints) rebuild(ctx context.Context, r Summary) error {
	if err := s.cfg.Store.PutWebhookSummary(ctx, r, r.Version); err != nil && !errors.Is(err, fault.ErrConflict) {
		return err
	}
	return nil
}

// Prefetch reads the endpoints of the owners not in the cache, all in one
// BatchGetItem (100 users a request), and caches them as Subscribed would:
// the relay calls it once per stream batch with the owners of the events
// that may trigger a webhook. A user without a stored, fresh summary costs
// one Query more (and the summary is stored for next time).
func (s *Endpoints) Prefetch(ctx context.Context, owners []string) error {
	now := s.cfg.Now()
	var missing []string
	for _, o := range owners {
		if _, ok := s.cache.get(o, now); !ok && o != "" && !slices.Contains(missing, o) {
			missing = append(missing, o)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	got, err := s.cfg.Store.GetWebhookSummaries(ctx, missing)
	if err != nil {
		return err
	}
	var errs []error
	for _, o := range missing {
		stored, ok := got[o]
		r, reread, err := s.usable(ctx, o, stored, ok, now)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if reread {
			if err := s.rebuild(ctx, r); err != nil {
				errs = append(errs, err)
			}
		}
		s.cache.put(o, endpoints(r.Endpoints), now.Add(s.cfg.Cache))
	}
	return errors.Join(errs...)
}
