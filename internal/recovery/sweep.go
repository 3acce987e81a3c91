package recovery

import (
	"context"
	"sync"
	"time"

	"github.com/conveyor/conveyor/internal/aws/store"
)

// Names of the sweeps, as SweepStats and the metrics name them.
const (
	SweepScheduled = "release_scheduled"
	SweepParked    = "release_parked"
	SweepStuck     = "stuck"
	SweepStale     = "stale"
	SweepMedia     = "media"
)

// SweepStats is what one sweep of one run did and what it left.
type SweepStats struct {
	// Sweep names the sweep (SweepScheduled …).
	Sweep string
	// Done counts the items the sweep acted on (released, re-sent,
	// staled, expired); Failed the stuck jobs it failed (runs spent).
	Done, Failed int
	// Lost counts the items another writer changed first; Skipped those
	// it found due but let be (no longer due on the fresh copy).
	Lost, Skipped int
	// Behind counts the queued jobs the stuck sweep found unreceived but
	// behind their owner's moving messages: looked at again later, not
	// re-sent.
	Behind int
	// Read counts the items its queries returned; Queries the queries
	// (pages, and the count of what is left).
	Read, Queries int
	// Left counts the due items it did not reach before its time was up
	// (0 when Complete).
	Left int
	// Complete: every due item was read.
	Complete bool
	// Elapsed is the sweep's wall time.
	Elapsed time.Duration
}

// outcome is what handling one due item came to.
type outcome int

const (
	acted outcome = iota
	failedStuck
	lost
	skipped
	// behind: a queued job not received for StuckAfter whose owner's
	// messages move; nothing sent (Recoverer.mayBeLost).
	behind
	// deferredTurn: a due scheduled job whose owner had its turn in this
	// pass; the next pass takes it (Recoverer.ReleaseScheduled).
	deferredTurn
)

// page reads the next page of a scan: jobs or uploads, as the sweep needs.
type page[T any] func(ctx context.Context, limit int) ([]T, error)

// sweep reads scan page by page — round-robin over its partitions, each
// from where it stopped — and handles the items concurrency at a time,
// without waiting for a page to be done before it reads the next (a page's
// query overlaps the previous page's items), until every partition is read
// or until passes: no item starts after it, except those of the sweep's
// first page, so that every sweep moves on in every run however its
// predecessors spent the budget. Then it counts what is left: the items
// read but not started, and the due items behind the cursors (the next run
// reads both). An item's error ends the sweep and is returned. The
// sweep's figures are logged and reported (Config.Report).
func sweep[T any](ctx context.Context, r *Recoverer, name string, scan *store.DueScan, next page[T], until time.Time, concurrency int, handle func(context.Context, T) (outcome, error)) (SweepStats, error) {
	st, err := pass(ctx, r, name, scan, next, until, concurrency, handle)
	r.report(ctx, st)
	return st, err
}

// pass is one sweep's walk of scan (see sweep), unreported: a sweep made
// of several passes (the release's turns, then the rest) sums them with
// merge and reports once.
func pass[T any](ctx context.Context, r *Recoverer, name string, scan *store.DueScan, next page[T], until time.Time, concurrency int, handle func(context.Context, T) (outcome, error)) (SweepStats, error) {
	start := r.cfg.Clock()
	st := SweepStats{Sweep: name}
	var (
		mu       sync.Mutex // guards st's counts and firstErr
		wg       sync.WaitGroup
		firstErr error
	)
	fail := func(err error) {
		mu.Lock()
		defer mu.Unlock()
		if firstErr == nil {
			firstErr = err
		}
	}
	failed := func() bool {
		mu.Lock()
		defer mu.Unlock()
		return firstErr != nil
	}
	sem := make(chan struct{}, concurrency)
	unstarted := 0
	for first := true; !scan.Done() && (first || r.cfg.Clock().Before(until)) && ctx.Err() == nil && !failed(); first = false {
		items, err := next(ctx, r.cfg.Batch)
		if err != nil {
			fail(err)
			break
		}
		for i, it := range items {
			sem <- struct{}{}
			if !first && !r.cfg.Clock().Before(until) || failed() {
				<-sem
				unstarted += len(items) - i
				break
			}
			wg.Go(func() {
				defer func() { <-sem }()
				o, err := handle(ctx, it)
				if err != nil {
					fail(err)
					return
				}
				mu.Lock()
				defer mu.Unlock()
				switch o {
				case acted:
					st.Done++
				case failedStuck:
					st.Failed++
				case lost:
					st.Lost++
				case skipped:
					st.Skipped++
				case behind:
					st.Behind++
				}
			})
		}
	}
	wg.Wait()
	st.Complete = scan.Done() && unstarted == 0
	st.Left = unstarted
	if !scan.Done() && firstErr == nil && ctx.Err() == nil {
		left, err := scan.Left(ctx)
		if err != nil {
			r.cfg.Logger.WarnContext(ctx, "counting what a sweep left failed", "sweep", name, "error", err)
		}
		st.Left += left
	}
	st.Read, st.Queries = scan.Read, scan.Queries
	st.Elapsed = r.cfg.Clock().Sub(start)
	return st, firstErr
}

// merge sums a later pass of the same sweep into st: what is left and
// whether it is complete are the later pass's.
func (st SweepStats) merge(later SweepStats) SweepStats {
	st.Done += later.Done
	st.Failed += later.Failed
	st.Lost += later.Lost
	st.Skipped += later.Skipped
	st.Behind += later.Behind
	st.Read += later.Read
	st.Queries += later.Queries
	st.Elapsed += later.Elapsed
	st.Left, st.Complete = later.Left, later.Complete
	return st
}

// report logs a sweep's figures and hands them to Config.Report.
func (r *Recoverer) report(ctx context.Context, st SweepStats) {
	r.cfg.Logger.InfoContext(ctx, "sweep", "sweep", st.Sweep, "done", st.Done, "failed", st.Failed, "lost", st.Lost,
		"skipped", st.Skipped, "behind", st.Behind, "read", st.Read, "queries", st.Queries, "left", st.Left, "complete", st.Complete,
		"elapsed_ms", st.Elapsed.Milliseconds())
	if r.cfg.Report != nil {
		r.cfg.Report(ctx, st)
	}
}

// budget is the time one invocation's sweeps may work: Budget, cut to the
// context's deadline less Margin.
func (r *Recoverer) budget(ctx context.Context) time.Time {
	until := r.cfg.Clock().Add(r.cfg.Budget)
	if dl, ok := ctx.Deadline(); ok && dl.Add(-r.cfg.Margin).Before(until) {
		until = dl.Add(-r.cfg.Margin)
	}
	return until
}

// share is the part of the time up to until that the next of n sweeps may
// use: the rest split evenly, so time a sweep leaves goes to the ones
// after it.
func (r *Recoverer) share(until time.Time, n int) time.Time {
	now := r.cfg.Clock()
	if n <= 1 || !until.After(now) {
		return until
	}
	return now.Add(until.Sub(now) / time.Duration(n))
}
