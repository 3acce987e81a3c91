// Package stream serves job events as Server-Sent Events: a snapshot
// first, then every persisted event as it appears, a ping at least every
// PingInterval, and resumption after Last-Event-ID. It reads the event log
// that is written in the same transaction as each change, so an event a
// client sees always describes state that is already stored. In AWS it
// runs behind a Lambda function URL in response-streaming mode; locally the
// gateway serves it directly. The stream ends when the client goes away.
package stream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/conveyor/conveyor/internal/auth"
	"github.com/conveyor/conveyor/internal/events"
	"github.com/conveyor/conveyor/internal/ids"
	"github.com/conveyor/conveyor/internal/job"
	"github.com/conveyor/conveyor/internal/store"
)

// Defaults.
const (
	PollIntervalDefault = 250 * time.Millisecond
)

// Config configures a Server.
type Config struct {
	Store    *store.Store
	Verifier *auth.Verifier
	// PingInterval bounds the silence between messages (required:
	// CONVEYOR_STREAM_PING, whose default lives in internal/config).
	PingInterval time.Duration
	// PollInterval is how often the event log is read (default 250ms).
	PollInterval time.Duration
	Logger       *slog.Logger
}

// Server streams events.
type Server struct {
	cfg    Config
	active atomic.Int64
}

// New returns a Server, or an error when cfg.PingInterval is not positive.
func New(cfg Config) (*Server, error) {
	if cfg.PingInterval <= 0 {
		return nil, fmt.Errorf("stream: the ping interval must be positive, got %s", cfg.PingInterval)
	}
	if cfg.PollInterval == 0 {
		cfg.PollInterval = PollIntervalDefault
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Server{cfg: cfg}, nil
}

// ErrNotFound is returned before streaming for an unknown or foreign job.
var ErrNotFound = errors.New("no such job")

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
		j, err := json.Marshal(data)
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

// Open checks that owner may stream jobID ("" for all of owner's jobs)
// and returns the snapshot; call it before sending any header.
func (s *Server) Open(ctx context.Context, owner, jobID string) (*job.Job, error) {
	if jobID == "" {
		return nil, nil
	}
	if !ids.Valid(ids.Job, jobID) {
		return nil, ErrNotFound
	}
	j, err := s.cfg.Store.GetJob(ctx, jobID)
	if errors.Is(err, store.ErrNotFound) || (err == nil && j.Owner != owner) {
		return nil, ErrNotFound
	}
	return &j, err
}

// Stream writes the stream to w until ctx ends or writing fails.
func (s *Server) Stream(ctx context.Context, w io.Writer, flush func(), owner, jobID, lastEventID string) error {
	s.active.Add(1)
	defer s.active.Add(-1)
	out := writer{w: w, flush: flush}
	if jobID != "" {
		return s.job(ctx, out, owner, jobID, lastEventID)
	}
	return s.all(ctx, out, owner, lastEventID)
}

// Active returns how many streams are being served now; a stream whose
// client went away is no longer counted once its reads have stopped.
func (s *Server) Active() int64 { return s.active.Load() }

func (s *Server) job(ctx context.Context, out writer, owner, jobID, lastEventID string) error {
	j, err := s.Open(ctx, owner, jobID)
	if err != nil {
		return err
	}
	if err := out.frame("", "snapshot", j); err != nil {
		return err
	}
	after := j.EventSeq
	if n, err := strconv.ParseInt(lastEventID, 10, 64); err == nil && n >= 0 && n < after {
		after = n
	}
	poll := time.NewTicker(s.cfg.PollInterval)
	defer poll.Stop()
	lastSent := time.Now()
	for {
		evs, err := s.cfg.Store.Events(ctx, jobID, after, 100)
		if err != nil && ctx.Err() == nil {
			s.cfg.Logger.WarnContext(ctx, "reading events failed", "job_id", jobID, "error", err)
		}
		for _, ev := range evs {
			if err := out.frame(ev.ID(), ev.Type, eventData(ev)); err != nil {
				return err
			}
			after, lastSent = ev.Seq, time.Now()
		}
		if time.Since(lastSent) >= s.cfg.PingInterval {
			if err := out.frame("", "ping", map[string]string{"at": time.Now().UTC().Format(time.RFC3339)}); err != nil {
				return err
			}
			lastSent = time.Now()
		}
		select {
		case <-ctx.Done():
			return nil
		case <-poll.C:
		}
	}
}

// eventData is what a client receives: the event and the job after it.
func eventData(ev store.EventRecord) events.Body { return events.BodyOf(ev) }

// all streams every job of owner: a snapshot of the newest jobs, then the
// events of every job that changes. Event ids are "<jobId>:<seq>".
func (s *Server) all(ctx context.Context, out writer, owner, lastEventID string) error {
	jobs, _, err := s.cfg.Store.ListJobs(ctx, store.ListQuery{Owner: owner, Limit: 50})
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
	poll := time.NewTicker(s.cfg.PollInterval)
	defer poll.Stop()
	lastSent := time.Now()
	for {
		changed, _, err := s.cfg.Store.ListJobs(ctx, store.ListQuery{Owner: owner, UpdatedSince: store.SinceKey(since), Limit: 100})
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
				seen[j.ID], lastSent = ev.Seq, time.Now()
			}
			if _, ok := seen[j.ID]; !ok {
				seen[j.ID] = j.EventSeq
			}
			if j.UpdatedAt.After(since) {
				since = j.UpdatedAt.Add(-time.Millisecond)
			}
		}
		if time.Since(lastSent) >= s.cfg.PingInterval {
			if err := out.frame("", "ping", map[string]string{"at": time.Now().UTC().Format(time.RFC3339)}); err != nil {
				return err
			}
			lastSent = time.Now()
		}
		select {
		case <-ctx.Done():
			return nil
		case <-poll.C:
		}
	}
}

// ServeHTTP serves GET /v1/jobs/{id}/events and GET /v1/events for the local
// gateway, with the API's JSON errors before the stream starts.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	fail := func(status int, code, msg string) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_ = json.NewEncoder(w).Encode(map[string]any{"error": map[string]string{"code": code, "message": msg}})
	}
	claims, err := s.cfg.Verifier.Verify(r.Header.Get("Authorization"))
	if err != nil {
		fail(http.StatusUnauthorized, "unauthorized", "a valid bearer token is required")
		return
	}
	jobID := r.PathValue("id")
	if strings.HasSuffix(r.URL.Path, "/events") && strings.HasPrefix(r.URL.Path, "/v1/jobs/") {
		if _, err := s.Open(r.Context(), claims.Subject, jobID); err != nil {
			if errors.Is(err, ErrNotFound) {
				fail(http.StatusNotFound, "not_found", "no such resource")
				return
			}
			fail(http.StatusInternalServerError, "internal", "could not open the stream")
			return
		}
	}
	flusher, _ := w.(http.Flusher)
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.Header().Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	flush := func() {
		if flusher != nil {
			flusher.Flush()
		}
	}
	flush()
	if err := s.Stream(r.Context(), w, flush, claims.Subject, jobID, r.Header.Get("Last-Event-ID")); err != nil && r.Context().Err() == nil {
		s.cfg.Logger.WarnContext(r.Context(), "stream ended", "error", err)
	}
}
