// Package stream serves job events as Server-Sent Events: a snapshot
// first, then every persisted event as it appears, a ping at least every
// PingInterval, and resumption after Last-Event-ID. It reads the event log
// that is written in the same transaction as each change, so an event a
// client sees always describes state that is already stored. In AWS it
// runs behind a Lambda function URL in response-streaming mode
// (handler.StreamHandler, the only way in); the stream ends when the client goes
// away.
//
// Cost: an idle stream makes one DynamoDB read per PollInterval (1s by
// default), so a transition reaches its client within about a second. A
// user may hold at most MaxPerUser streams at once across every instance:
// each open stream holds one of the user's lease slots in the table
// (lease.go).
package stream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/conveyor/conveyor/internal/fault"
	"github.com/conveyor/conveyor/internal/ids"
	"github.com/conveyor/conveyor/internal/job"
	"github.com/conveyor/conveyor/internal/resources"
)

// Defaults.
const (
	// PollIntervalDefault is how often a stream reads for news.
	PollIntervalDefault = time.Second
	// MaxPerUserDefault caps a user's open streams.
	MaxPerUserDefault = 5
	// LeaseDefault is how long a stream's slot is held without renewal; a
	// stream renews it every third of it, and a crashed instance's slots
	// free themselves after it.
	LeaseDefault = time.Minute
	// LifetimeDefault is how long a stream runs before it ends for its
	// client to resume.
	LifetimeDefault = time.Minute
	// feedLookback re-reads the newest part of the all-users feed, whose
	// index is eventually consistent, so a late event is not skipped.
	feedLookback = 3 * time.Second
)

// Store reads the jobs and their events (store.Store, on DynamoDB):
// declared here so that this package links no DynamoDB client.
type Store interface {
	// GetJob returns the job, or fault.ErrNotFound.
	GetJob(ctx context.Context, id string) (job.Job, error)
	// Events returns up to limit of the job's events after sequence after,
	// oldest first.
	Events(ctx context.Context, jobID string, after int64, limit int) ([]job.EventRecord, error)
	// GetEvent returns the job's event seq, or fault.ErrNotFound.
	GetEvent(ctx context.Context, jobID string, seq int64) (job.EventRecord, error)
	// ListJobs returns one page of the query's jobs and the next page's
	// cursor.
	ListJobs(ctx context.Context, q job.ListQuery) ([]job.Job, string, error)
	// ChangedJobs returns up to limit of owner's jobs updated at or after
	// since (a job.SortTime), oldest first.
	ChangedJobs(ctx context.Context, owner, since string, limit int) ([]job.Change, error)
	// Feed returns up to limit events of every user from one shard of the
	// feed index whose feed key is after after (a job.FeedKey or a
	// job.SortTime), oldest first.
	Feed(ctx context.Context, shard int, after string, limit int) ([]job.FeedEvent, error)
}

// Config configures a Server.
type Config struct {
	Store Store
	// Slots keep the users' stream slots, which cap their open streams
	// (*store.Store; nil: no cap).
	Slots Slots
	// PingInterval bounds the silence between messages (required:
	// CONVEYOR_STREAM_PING, whose default lives in internal/config).
	PingInterval time.Duration
	// PollInterval is how often the event log is read (default 1s).
	PollInterval time.Duration
	// MaxPerUser caps a user's open streams across every instance
	// (default 5).
	MaxPerUser int
	// Lease is how long a stream's slot lasts unrenewed (default 1m).
	Lease time.Duration
	// Lifetime is the longest a stream runs (default LifetimeDefault): it
	// then ends cleanly and its client resumes with Last-Event-ID. Behind
	// a function URL a stream whose client went away is not stopped and
	// its writes do not fail, so this is how long it can hold its slot
	// (and its execution) after its client left.
	Lifetime time.Duration
	// Now is the clock of the leases (default time.Now).
	Now    func() time.Time
	Logger *slog.Logger
}

// Server streams events.
type Server struct {
	cfg    Config
	leases *Leases
	active atomic.Int64
	// polls counts the polls made (tests: reads per idle minute).
	polls atomic.Int64
}

// New returns a Server, or an error when cfg.PingInterval is not positive.
func New(cfg Config) (*Server, error) {
	if cfg.PingInterval <= 0 {
		return nil, fmt.Errorf("stream: the ping interval must be positive, got %s", cfg.PingInterval)
	}
	if cfg.PollInterval == 0 {
		cfg.PollInterval = PollIntervalDefault
	}
	if cfg.MaxPerUser == 0 {
		cfg.MaxPerUser = MaxPerUserDefault
	}
	if cfg.Lease == 0 {
		cfg.Lease = LeaseDefault
	}
	if cfg.Lifetime == 0 {
		cfg.Lifetime = LifetimeDefault
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	s := &Server{cfg: cfg}
	if cfg.Slots != nil {
		s.leases = &Leases{Slots: cfg.Slots, Max: cfg.MaxPerUser, TTL: cfg.Lease, Now: cfg.Now}
	}
	return s, nil
}

// Errors before streaming.
var (
	// ErrNotFound: an unknown job, or one the caller may not see.
	ErrNotFound error = &fault.NotFound{Msg: "no such job"}
	// ErrTooMany: the caller already holds MaxPerUser streams. An open
	// never waits for a slot: it is refused at once, so a refused open
	// does not hold an execution of the function.
	ErrTooMany = errors.New("too many open streams")
)

// Request says what to stream to whom.
type Request struct {
	// Caller is the token's subject; the cap counts per caller.
	Caller string
	// JobID streams one job; empty streams many.
	JobID string
	// Admin streams any user's job (JobID), or every user's events (no
	// JobID), instead of the caller's own.
	Admin bool
	// LastEventID resumes after that event.
	LastEventID string
}

// Session is an opened stream: its snapshot is read and its slot held.
type Session struct {
	s         *Server
	req       Request
	job       *job.Job
	lease     *Lease
	started   atomic.Bool
	closeOnce sync.Once
}

// Open checks that the caller may stream what req names, takes one of the
// caller's slots (ErrTooMany when none is free) and reads the snapshot;
// call it before sending any header. Close or Run the session.
func (s *Server) Open(ctx context.Context, req Request) (*Session, error) {
	sess := &Session{s: s, req: req}
	if req.JobID != "" {
		if !ids.Valid(ids.Job, req.JobID) {
			return nil, ErrNotFound
		}
		j, err := s.cfg.Store.GetJob(ctx, req.JobID)
		if errors.Is(err, fault.ErrNotFound) || (err == nil && !req.Admin && j.Owner != req.Caller) {
			return nil, ErrNotFound
		}
		if err != nil {
			return nil, err
		}
		sess.job = &j
	}
	if s.leases != nil {
		l, err := s.leases.Acquire(ctx, req.Caller)
		if err != nil {
			return nil, err
		}
		sess.lease = l
	}
	return sess, nil
}

// Close frees the session's slot; Run does it when it ends. It may be
// called more than once, from any goroutine.
func (sess *Session) Close() {
	sess.closeOnce.Do(func() {
		if sess.lease == nil {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := sess.lease.Release(ctx); err != nil {
			sess.s.cfg.Logger.Warn("releasing a stream slot failed; it frees itself when its lease ends", "error", err)
		}
	})
}

// Run writes the stream to w until ctx ends, writing fails or the stream
// has run its Lifetime, then frees the slot.
func (sess *Session) Run(ctx context.Context, w io.Writer, flush func()) error {
	s := sess.s
	s.active.Add(1)
	defer s.active.Add(-1)
	defer sess.Close()
	ctx, cancel := context.WithTimeout(ctx, s.cfg.Lifetime)
	defer cancel()
	if sess.lease != nil {
		go sess.renew(ctx, cancel)
	}
	out := writer{w: w, flush: flush}
	switch {
	case sess.req.JobID != "":
		return s.job(ctx, out, sess.job, sess.req.LastEventID)
	case sess.req.Admin:
		return s.feed(ctx, out, sess.req.LastEventID)
	default:
		return s.all(ctx, out, sess.req.Caller, sess.req.LastEventID)
	}
}

// renew keeps the slot while the stream runs; a lost slot ends the stream,
// so the cap holds.
func (sess *Session) renew(ctx context.Context, cancel func()) {
	t := time.NewTicker(sess.s.cfg.Lease / 3)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if err := sess.lease.Renew(ctx); err != nil && ctx.Err() == nil {
			if errors.Is(err, ErrLeaseLost) {
				sess.s.cfg.Logger.WarnContext(ctx, "stream slot lost; ending the stream", "caller", sess.req.Caller)
				cancel()
				return
			}
			sess.s.cfg.Logger.WarnContext(ctx, "renewing a stream slot failed", "error", err)
		}
	}
}

// Active returns how many streams are being served now; a stream whose
// client went away is no longer counted once its reads have stopped.
func (s *Server) Active() int64 { return s.active.Load() }

// Polls returns how many polls (one DynamoDB read each when idle) the
// server's streams have made.
func (s *Server) Polls() int64 { return s.polls.Load() }

// writer writes SSE frames and flushes them.
type writer struct {
	w     io.Writer
	flush func()
}

func (w writer) frame(id, event string, data any) error {
	var b strings.Builder
	if id != "" {
		b.WriteString("id: " + id + "\n")
	}
	b.WriteString("event: " + event + "\n")
	raw, ok := data.(json.RawMessage)
	if !ok {
		j, err := job.Marshal(data)
		if err != nil {
			return err
		}
		raw = j
	}
	b.WriteString("data: ")
	b.Write(raw)
	b.WriteString("\n\n")
	if _, err := io.WriteString(w.w, b.String()); err != nil {
		return err
	}
	if w.flush != nil {
		w.flush()
	}
	return nil
}

// comment writes an empty SSE comment line.
func (w writer) comment() error {
	if _, err := io.WriteString(w.w, ":\n\n"); err != nil {
		return err
	}
	if w.flush != nil {
		w.flush()
	}
	return nil
}

// ticker paces a stream's polls and pings.
type ticker struct {
	s        *Server
	out      writer
	poll     *time.Ticker
	lastSent time.Time
}

func (s *Server) newTicker(out writer) *ticker {
	return &ticker{s: s, out: out, poll: time.NewTicker(s.cfg.PollInterval), lastSent: time.Now()}
}

func (t *ticker) sent() { t.lastSent = time.Now() }

// wait pings when the stream was silent for PingInterval, else writes an
// SSE comment line (which clients ignore), then waits for the next poll;
// false when the client went away. Writing at every poll is how a stream
// learns that its client left: behind a function URL the function hears of
// a closed connection only when it writes, and until then it holds one of
// the caller's slots.
func (t *ticker) wait(ctx context.Context) (bool, error) {
	if time.Since(t.lastSent) >= t.s.cfg.PingInterval {
		if err := t.out.frame("", "ping", map[string]string{"at": time.Now().UTC().Format(time.RFC3339)}); err != nil {
			return false, err
		}
		t.lastSent = time.Now()
	} else if err := t.out.comment(); err != nil {
		return false, err
	}
	select {
	case <-ctx.Done():
		t.poll.Stop()
		return false, nil
	case <-t.poll.C:
		t.s.polls.Add(1)
		return true, nil
	}
}

// job streams one job: one query of its event log per poll. The stream
// ends once the client has the job's final state: after the snapshot of a
// finished job with nothing to replay, or after a finishing event
// (job.succeeded, job.failed, job.cancelled, job.stale) with nothing
// after it. A client that wants a retried job's new run opens it again.
func (s *Server) job(ctx context.Context, out writer, j *job.Job, lastEventID string) error {
	if err := out.frame("", "snapshot", j); err != nil {
		return err
	}
	after := j.EventSeq
	if n, err := strconv.ParseInt(lastEventID, 10, 64); err == nil && n >= 0 && n < after {
		after = n
	}
	finished := j.Finished()
	t := s.newTicker(out)
	for {
		evs, err := s.cfg.Store.Events(ctx, j.ID, after, eventPage)
		if err != nil && ctx.Err() == nil {
			s.cfg.Logger.WarnContext(ctx, "reading events failed", "job_id", j.ID, "error", err)
		}
		for _, ev := range evs {
			if err := out.frame(ev.ID(), ev.Type, eventData(ev)); err != nil {
				return err
			}
			after = ev.Seq
			finished = job.FinishingEvent(ev.Type)
			t.sent()
		}
		if err == nil && finished && len(evs) < eventPage {
			return nil
		}
		if ok, err := t.wait(ctx); !ok {
			return err
		}
	}
}

// eventPage is the most events one poll of a job's log reads.
const eventPage = 100

// eventData is what a client receives: the event and the job after it.
func eventData(ev job.EventRecord) job.EventBody { return ev.Body() }

// all streams every job of owner: a snapshot of the newest jobs, then the
// events of every job that changes. Event ids are "<jobId>:<seq>". An idle
// poll is one query of the owner's recently updated jobs.
func (s *Server) all(ctx context.Context, out writer, owner, lastEventID string) error {
	jobs, _, err := s.cfg.Store.ListJobs(ctx, job.ListQuery{Owner: owner, Limit: 50})
	if err != nil {
		return err
	}
	if jobs == nil {
		jobs = []job.Job{}
	}
	if err := out.frame("", "snapshot", map[string]any{"jobs": jobs}); err != nil {
		return err
	}
	seen := map[string]int64{}
	since := time.Now().Add(-time.Second)
	for _, j := range jobs {
		seen[j.ID] = j.EventSeq
	}
	if id, seqStr, ok := strings.Cut(lastEventID, ":"); ok {
		if seq, err := strconv.ParseInt(seqStr, 10, 64); err == nil {
			if ev, err := s.cfg.Store.GetEvent(ctx, id, seq); err == nil && ev.Owner == owner {
				seen[id] = seq
				since = ev.At
				for k, v := range seen {
					if k != id && v > 0 {
						// Other jobs: replay what happened after the resumed event.
						delete(seen, k)
					}
				}
			}
		}
	}
	t := s.newTicker(out)
	for {
		changed, err := s.cfg.Store.ChangedJobs(ctx, owner, job.SortTime(since), 100)
		if err != nil && ctx.Err() == nil {
			s.cfg.Logger.WarnContext(ctx, "reading changed jobs failed", "error", err)
		}
		for _, j := range changed {
			after, known := seen[j.ID]
			if known && after >= j.EventSeq {
				continue
			}
			evs, err := s.cfg.Store.Events(ctx, j.ID, after, 100)
			if err != nil {
				continue
			}
			for _, ev := range evs {
				if !known && !ev.At.After(since) {
					continue
				}
				if err := out.frame(fmt.Sprintf("%s:%d", ev.JobID, ev.Seq), ev.Type, eventData(ev)); err != nil {
					return err
				}
				seen[j.ID] = ev.Seq
				t.sent()
			}
			if _, ok := seen[j.ID]; !ok {
				seen[j.ID] = j.EventSeq
			}
			if j.UpdatedAt.After(since) {
				since = j.UpdatedAt.Add(-time.Millisecond)
			}
		}
		if ok, err := t.wait(ctx); !ok {
			return err
		}
	}
}

// feed streams every user's events (operators), from the feed index: one
// query per shard per poll. Event ids are "<jobId>:<seq>"; Last-Event-ID
// resumes after that event. Each poll re-reads the last few seconds of
// each shard (the index is eventually consistent) and sends only what it
// has not sent.
func (s *Server) feed(ctx context.Context, out writer, lastEventID string) error {
	since := time.Now().UTC()
	sent := map[string]time.Time{}
	if id, seqStr, ok := strings.Cut(lastEventID, ":"); ok {
		if seq, err := strconv.ParseInt(seqStr, 10, 64); err == nil {
			if ev, err := s.cfg.Store.GetEvent(ctx, id, seq); err == nil {
				since = ev.At
				sent[job.FeedKey(ev)] = ev.At
			}
		}
	}
	if err := out.frame("", "snapshot", map[string]any{"since": since.Format(time.RFC3339Nano)}); err != nil {
		return err
	}
	// newest[n] is the time of the newest event read from shard n.
	newest := make([]time.Time, resources.FeedShards)
	for n := range newest {
		newest[n] = since
	}
	t := s.newTicker(out)
	for {
		var batch []job.FeedEvent
		for n := range newest {
			from := newest[n].Add(-feedLookback)
			if from.Before(since) {
				from = since
			}
			evs, err := s.cfg.Store.Feed(ctx, n, job.SortTime(from), 200)
			if err != nil && ctx.Err() == nil {
				s.cfg.Logger.WarnContext(ctx, "reading the event feed failed", "error", err)
			}
			for _, ev := range evs {
				if _, dup := sent[ev.Key]; dup {
					continue
				}
				batch = append(batch, ev)
				if ev.At.After(newest[n]) {
					newest[n] = ev.At
				}
			}
		}
		sort.Slice(batch, func(i, j int) bool { return batch[i].Key < batch[j].Key })
		for _, ev := range batch {
			sent[ev.Key] = ev.At
			if err := out.frame(fmt.Sprintf("%s:%d", ev.JobID, ev.Seq), ev.Type, eventData(ev.EventRecord)); err != nil {
				return err
			}
			t.sent()
		}
		// Forget what no later read can return again.
		floor := slices.MinFunc(newest, func(a, b time.Time) int { return a.Compare(b) }).Add(-2 * feedLookback)
		for k, at := range sent {
			if at.Before(floor) {
				delete(sent, k)
			}
		}
		if ok, err := t.wait(ctx); !ok {
			return err
		}
	}
}
