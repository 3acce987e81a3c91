package admin

import (
	"context"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/conveyor/conveyor/internal/aws/store"
	"github.com/conveyor/conveyor/internal/ids"
	"github.com/conveyor/conveyor/internal/invalid"
	"github.com/conveyor/conveyor/internal/job"
)

// Inspector bounds.
const (
	// SearchLimitDefault / MaxSearchLimit bound Search's page size.
	SearchLimitDefault = 50
	MaxSearchLimit     = 200
	// MaxFilterLength bounds the free-form filters (owner, type, errorCode).
	MaxFilterLength = 128
	// OrphansLimit is the most orphans one call lists (oldest first per
	// kind); the overview's count is not bounded.
	OrphansLimit = 500
	// JobEventsLimit is the most events InspectJob returns with a job.
	JobEventsLimit = 1000
)

// SearchRequest is an operator's search, as received (strings from the
// query; validated by Search).
type SearchRequest struct {
	Status, Tier, Owner, Type, ErrorCode string
	// CreatedFrom / CreatedTo are RFC 3339 times (inclusive) or empty.
	CreatedFrom, CreatedTo string
	// Limit is the page size (0 counts only; default SearchLimitDefault).
	Limit  *int
	Cursor string
}

// InspectedJob is any user's job as an operator sees it: with its owner.
type InspectedJob struct {
	job.Job
	Owner string `json:"owner"`
}

// SearchResult is one page of a search and the count of every match.
type SearchResult struct {
	Jobs       []InspectedJob
	NextCursor string
	Total      int
}

// Search finds jobs across users by status, tier, owner, type, error code
// and creation window, newest first, from the table's indexes (see
// store/inspect.go for which filter uses which index). Cursors are bound to
// the query; a cursor of another query is store.ErrBadCursor.
func (s *Service) Search(ctx context.Context, r SearchRequest) (SearchResult, error) {
	q, err := r.query()
	if err != nil {
		return SearchResult{}, err
	}
	if r.Limit != nil {
		if *r.Limit < 0 || *r.Limit > MaxSearchLimit {
			return SearchResult{}, invalid.Field("limit", fmt.Sprintf("must be between 0 and %d", MaxSearchLimit))
		}
		q.Limit = *r.Limit
	}
	res := SearchResult{Jobs: []InspectedJob{}}
	if q.Limit > 0 {
		// The page first: a cursor of another query fails before counting.
		jobs, next, err := s.cfg.Store.SearchJobs(ctx, q)
		if err != nil {
			return SearchResult{}, err
		}
		for _, j := range jobs {
			res.Jobs = append(res.Jobs, InspectedJob{Job: j, Owner: j.Owner})
		}
		res.NextCursor = next
	} else if q.Cursor != "" {
		// Validate the cursor even when only counting.
		if _, _, err := s.cfg.Store.SearchJobs(ctx, store.SearchQuery{Status: q.Status, Tier: q.Tier, Owner: q.Owner, Type: q.Type,
			ErrorCode: q.ErrorCode, CreatedFrom: q.CreatedFrom, CreatedTo: q.CreatedTo, Limit: 1, Cursor: q.Cursor}); err != nil {
			return SearchResult{}, err
		}
	}
	total, err := s.cfg.Store.CountSearch(ctx, q)
	if err != nil {
		return SearchResult{}, err
	}
	res.Total = total
	return res, nil
}

// query validates r's filters and window (not its limit) into the store's
// query, with the default page size.
func (r SearchRequest) query() (store.SearchQuery, error) {
	q := store.SearchQuery{Limit: SearchLimitDefault, Cursor: r.Cursor, Owner: r.Owner, Type: r.Type, ErrorCode: r.ErrorCode}
	if r.Status != "" {
		st, err := job.ParseStatus(r.Status)
		if err != nil {
			return store.SearchQuery{}, invalid.Field("status", "must be one of scheduled, queued, running, succeeded, failed, cancelled, stale")
		}
		q.Status = st
	}
	if r.Tier != "" {
		t, err := job.ParseTier(r.Tier)
		if err != nil {
			return store.SearchQuery{}, invalid.Field("tier", "must be one of high, medium, low, system")
		}
		q.Tier = t
	}
	for _, f := range []struct{ name, v string }{{"owner", r.Owner}, {"type", r.Type}, {"errorCode", r.ErrorCode}} {
		if utf8.RuneCountInString(f.v) > MaxFilterLength || strings.ContainsFunc(f.v, func(c rune) bool { return c < 0x20 || c == 0x7f }) {
			return store.SearchQuery{}, invalid.Field(f.name, fmt.Sprintf("must be at most %d printable characters", MaxFilterLength))
		}
	}
	for _, t := range []struct {
		name, v string
		out     *time.Time
	}{{"createdFrom", r.CreatedFrom, &q.CreatedFrom}, {"createdTo", r.CreatedTo, &q.CreatedTo}} {
		if t.v == "" {
			continue
		}
		v, err := time.Parse(time.RFC3339Nano, t.v)
		if err != nil {
			return store.SearchQuery{}, invalid.Field(t.name, "must be an RFC 3339 time")
		}
		*t.out = v
	}
	if !q.CreatedFrom.IsZero() && !q.CreatedTo.IsZero() && q.CreatedTo.Before(q.CreatedFrom) {
		return store.SearchQuery{}, invalid.Unusable("createdTo", "empty_window", "createdTo must not be before createdFrom: the window holds no time")
	}
	return q, nil
}

// JobWithEvents is any user's job with its owner and its persisted events,
// oldest first.
type JobWithEvents struct {
	InspectedJob
	Events []job.Event `json:"events"`
}

// InspectJob returns any user's job with its owner and events, or
// store.ErrNotFound (also for an id that is not a job id).
func (s *Service) InspectJob(ctx context.Context, id string) (JobWithEvents, error) {
	if !ids.Valid("job", id) {
		return JobWithEvents{}, store.ErrNotFound
	}
	j, err := s.cfg.Store.GetJob(ctx, id)
	if err != nil {
		return JobWithEvents{}, err
	}
	recs, err := s.cfg.Store.Events(ctx, id, 0, JobEventsLimit)
	if err != nil {
		return JobWithEvents{}, err
	}
	out := JobWithEvents{InspectedJob: InspectedJob{Job: j, Owner: j.Owner}, Events: make([]job.Event, 0, len(recs))}
	for _, r := range recs {
		out.Events = append(out.Events, job.Event{Seq: r.Seq, Type: r.Type, At: r.At, Detail: r.Detail})
	}
	return out, nil
}

// Orphan is a job recovery would take back on its next run, and why.
type Orphan struct {
	JobID  string   `json:"jobId"`
	Owner  string   `json:"owner"`
	Tier   job.Tier `json:"tier"`
	Status string   `json:"status"`
	// Since is when it was last seen alive: a queued job's time in the
	// queue (entered, or became visible again), a running job's heartbeat.
	Since  time.Time `json:"since"`
	Reason string    `json:"reason"`
}

// Orphan reasons.
const (
	ReasonNotReceived = "not_received"
	ReasonNoHeartbeat = "no_heartbeat"
)

// Orphans lists what the overview counts as orphans (the same queries):
// queued jobs outside paused tiers that no worker received for StuckAfter
// (their message may be lost) and running jobs without a heartbeat for
// StuckAfter (their worker died), oldest first per kind, at most
// OrphansLimit of each.
func (s *Service) Orphans(ctx context.Context) ([]Orphan, error) {
	now := s.cfg.Now().UTC()
	paused, err := s.pausedTiers(ctx)
	if err != nil {
		return nil, err
	}
	before := now.Add(-s.cfg.StuckAfter)
	// Waiting behind a pause is not being lost: a paused tier's queued
	// partitions are not read.
	running := []job.Tier{}
	for _, t := range job.Tiers {
		if !paused[t] {
			running = append(running, t)
		}
	}
	out := []Orphan{}
	for _, k := range []struct {
		status job.Status
		reason string
	}{{job.Queued, ReasonNotReceived}, {job.Running, ReasonNoHeartbeat}} {
		jobs, err := s.cfg.Store.Overdue(ctx, k.status, before, running, OrphansLimit)
		if err != nil {
			return nil, fmt.Errorf("listing orphans: %w", err)
		}
		for _, j := range jobs {
			if k.status == job.Queued && paused[j.Tier] {
				continue // an untiered entry of a paused tier's job
			}
			out = append(out, Orphan{JobID: j.ID, Owner: j.Owner, Tier: j.Tier, Status: string(j.Status),
				Since: store.SweepTime(&j).UTC(), Reason: k.reason})
		}
	}
	return out, nil
}
