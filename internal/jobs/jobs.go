// Package jobs is what users do with jobs: submit one (validated,
// idempotent, stored before it is enqueued), read and list them, cancel and
// retry. Every state change goes through the job state machine and a
// conditional write.
package jobs

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/conveyor/conveyor/internal/canonical"
	"github.com/conveyor/conveyor/internal/ids"
	"github.com/conveyor/conveyor/internal/job"
	"github.com/conveyor/conveyor/internal/netguard"
	"github.com/conveyor/conveyor/internal/queue"
	"github.com/conveyor/conveyor/internal/resources"
	"github.com/conveyor/conveyor/internal/store"
)

// Limits of a submission.
const (
	MaxItems         = 20
	MaxTitle         = 200
	MaxDescription   = 10000
	MaxTags          = 30
	MaxTagLength     = 50
	MaxScheduleAhead = resources.MaxScheduleAhead
	DefaultLimit     = 50
	MaxLimit         = 200
)

// ValidationError is bad input (400), named by field.
type ValidationError struct{ Field, Message string }

func (e *ValidationError) Error() string { return e.Field + " " + e.Message }

// UnusableError is well-formed input that cannot be used (422).
type UnusableError struct{ Code, Field, Message string }

func (e *UnusableError) Error() string { return e.Message }

// ErrNotFound is returned for unknown jobs and for other users' jobs alike.
var ErrNotFound = store.ErrNotFound

// ErrBadCursor (wrapped, with the reason) is returned by List for a cursor
// that does not continue the list asked for.
var ErrBadCursor = store.ErrBadCursor

// Sender puts a job's message on its tier's queue.
type Sender interface {
	Send(ctx context.Context, tier resources.Tier, m queue.Message) error
}

// Config configures a Service.
type Config struct {
	Store  *store.Store
	Sender Sender
	// Provider is the external provider whose connection a job needs.
	Provider string
	// Env decides the webhook URL policy (http and private targets only locally).
	Env resources.Env
	// MaxAttempts is each new job's attempt budget.
	MaxAttempts int
	// Resolver checks webhook host names (default net.DefaultResolver).
	Resolver netguard.Resolver
	// Now defaults to time.Now.
	Now func() time.Time
	// Logger defaults to slog.Default().
	Logger *slog.Logger
}

// Service implements the user-facing job operations.
type Service struct{ cfg Config }

// New returns a Service.
func New(cfg Config) *Service {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Service{cfg: cfg}
}

// Caller is the authenticated user.
type Caller struct {
	Owner string
	Plan  string
}

// SubmitItem names one confirmed upload.
type SubmitItem struct {
	UploadID string `json:"uploadId"`
}

// SubmitRequest is the body of POST /v1/jobs.
type SubmitRequest struct {
	Type       string       `json:"type"`
	Items      []SubmitItem `json:"items"`
	Params     job.Params   `json:"params"`
	ScheduleAt *time.Time   `json:"scheduleAt"`
	WebhookURL string       `json:"webhookUrl"`
}

// Normalize returns the request in its canonical form: trimmed text,
// collapsed whitespace in the title, tags lower-cased, de-duplicated and
// sorted, the schedule in UTC to the second. Two requests that mean the
// same job normalise to the same value (and so the same hash).
func Normalize(r SubmitRequest) SubmitRequest {
	n := SubmitRequest{
		Type:       strings.ToLower(strings.TrimSpace(r.Type)),
		WebhookURL: strings.TrimSpace(r.WebhookURL),
		Params: job.Params{
			Title:       strings.Join(strings.Fields(r.Params.Title), " "),
			Description: strings.TrimSpace(r.Params.Description),
		},
	}
	if n.Type == "" {
		n.Type = job.TypePublish
	}
	for _, it := range r.Items {
		n.Items = append(n.Items, SubmitItem{UploadID: strings.TrimSpace(it.UploadID)})
	}
	for _, tag := range r.Params.Tags {
		if t := strings.ToLower(strings.TrimSpace(tag)); t != "" && !slices.Contains(n.Params.Tags, t) {
			n.Params.Tags = append(n.Params.Tags, t)
		}
	}
	slices.Sort(n.Params.Tags)
	if r.ScheduleAt != nil {
		t := r.ScheduleAt.UTC().Truncate(time.Second)
		n.ScheduleAt = &t
	}
	return n
}

// Hash is the request's idempotency hash for owner: SHA-256 over the
// canonical JSON of the normalised request.
func Hash(owner string, r SubmitRequest) (string, error) {
	return canonical.Hash(owner, Normalize(r))
}

// validate checks the shape of a normalised request (400s).
func (s *Service) validate(ctx context.Context, r SubmitRequest) error {
	switch {
	case r.Type != job.TypePublish:
		return &ValidationError{"type", `must be "publish"`}
	case len(r.Items) == 0:
		return &ValidationError{"items", "must hold at least one item"}
	case len(r.Items) > MaxItems:
		return &ValidationError{"items", fmt.Sprintf("must hold at most %d items", MaxItems)}
	case r.Params.Title == "":
		return &ValidationError{"params.title", "is required"}
	case utf8.RuneCountInString(r.Params.Title) > MaxTitle:
		return &ValidationError{"params.title", fmt.Sprintf("must be at most %d characters", MaxTitle)}
	case utf8.RuneCountInString(r.Params.Description) > MaxDescription:
		return &ValidationError{"params.description", fmt.Sprintf("must be at most %d characters", MaxDescription)}
	case len(r.Params.Tags) > MaxTags:
		return &ValidationError{"params.tags", fmt.Sprintf("must hold at most %d tags", MaxTags)}
	}
	seen := map[string]bool{}
	for i, it := range r.Items {
		field := fmt.Sprintf("items[%d].uploadId", i)
		if !ids.Valid(ids.Upload, it.UploadID) {
			return &ValidationError{field, "is not an upload id"}
		}
		if seen[it.UploadID] {
			return &ValidationError{field, "is listed twice"}
		}
		seen[it.UploadID] = true
	}
	for i, tag := range r.Params.Tags {
		if utf8.RuneCountInString(tag) > MaxTagLength {
			return &ValidationError{fmt.Sprintf("params.tags[%d]", i), fmt.Sprintf("must be at most %d characters", MaxTagLength)}
		}
	}
	if r.ScheduleAt != nil && r.ScheduleAt.After(s.cfg.Now().Add(MaxScheduleAhead)) {
		return &ValidationError{"scheduleAt", "must be within a year"}
	}
	if r.WebhookURL != "" {
		local := s.cfg.Env == resources.Local
		p := netguard.Policy{AllowHTTP: local, AllowPrivate: local, Resolver: s.cfg.Resolver}
		if _, err := p.CheckURL(ctx, r.WebhookURL); err != nil {
			return &ValidationError{"webhookUrl", err.Error()}
		}
	}
	return nil
}

// Submit validates req and creates the job, or returns the caller's active
// job with the same canonical hash (created=false). The job is stored before
// its message is sent; if the send fails, the job stays queued and stuck-job
// recovery sends it (see README, "Submission and the outbox").
func (s *Service) Submit(ctx context.Context, c Caller, req SubmitRequest) (job.Job, bool, error) {
	r := Normalize(req)
	if err := s.validate(ctx, r); err != nil {
		return job.Job{}, false, err
	}
	hash, err := canonical.Hash(c.Owner, r)
	if err != nil {
		return job.Job{}, false, fmt.Errorf("hashing the request: %w", err)
	}
	uploadIDs := make([]string, len(r.Items))
	for i, it := range r.Items {
		uploadIDs[i] = it.UploadID
	}
	// The uploads and the account connection: one read.
	ups, connected, err := s.cfg.Store.GetUploadsAndAccount(ctx, uploadIDs, c.Owner, s.cfg.Provider)
	if err != nil {
		return job.Job{}, false, err
	}
	now := s.cfg.Now().UTC()
	j := job.Job{
		ID:          ids.New(ids.Job),
		Type:        r.Type,
		Status:      job.Queued,
		Tier:        string(resources.TierForPlan(c.Plan)),
		Phase:       "queued",
		Phases:      job.NewPhases(r.Type),
		Params:      r.Params,
		MaxAttempts: s.cfg.MaxAttempts,
		WebhookURL:  r.WebhookURL,
		CreatedAt:   now,
		UpdatedAt:   now,
		Owner:       c.Owner,
		Hash:        hash,
		QueuedAt:    &now,
		Enqueues:    1,
	}
	for i, id := range uploadIDs {
		u, ok := ups[id]
		field := fmt.Sprintf("items[%d].uploadId", i)
		switch {
		case !ok || u.Owner != c.Owner:
			return job.Job{}, false, &UnusableError{"upload_not_found", field, "no such upload"}
		case u.Status == store.UploadExpired:
			return job.Job{}, false, expiredUpload(field, id)
		case u.Status != store.UploadConfirmed:
			return job.Job{}, false, &UnusableError{"upload_not_confirmed", field, fmt.Sprintf("upload %s is %s, not confirmed", id, u.Status)}
		}
		j.Items = append(j.Items, job.Item{
			ID: ids.New(ids.Item), UploadID: id, Status: job.ItemPending,
			Key: u.Key, ContentType: u.ContentType, Size: u.Size, Filename: u.Filename, Pin: u.Pin,
		})
	}
	if !connected {
		return job.Job{}, false, &UnusableError{"account_not_connected", "", "connect a DeviantArt account first (PUT /v1/account/connection)"}
	}
	if r.ScheduleAt != nil && r.ScheduleAt.After(now) {
		j.Status, j.Phase, j.ScheduleAt, j.QueuedAt, j.Enqueues = job.Scheduled, "scheduled", r.ScheduleAt, nil, 0
	} else {
		j.Emit(job.EventEnqueued, now, nil)
	}
	existing, created, err := s.cfg.Store.CreateJob(ctx, &j)
	var gone *store.UploadUnavailableError
	if errors.As(err, &gone) {
		// It expired between the read above and the write.
		i := slices.Index(uploadIDs, gone.UploadID)
		return job.Job{}, false, expiredUpload(fmt.Sprintf("items[%d].uploadId", i), gone.UploadID)
	}
	if err != nil {
		return job.Job{}, false, err
	}
	log := s.cfg.Logger.With("job_id", j.ID, "tier", j.Tier)
	if !created {
		log.InfoContext(ctx, "identical active job exists", "existing_job_id", existing.ID)
		return existing, false, nil
	}
	if j.Status == job.Queued {
		if err := s.cfg.Sender.Send(ctx, resources.Tier(j.Tier), queue.Message{Kind: queue.KindPublish, JobID: j.ID, Send: j.Enqueues}); err != nil {
			// The job is stored and queued: recovery will send it.
			log.ErrorContext(ctx, "enqueue failed; recovery will send the job", "error", err)
		}
	}
	log.InfoContext(ctx, "job submitted", "status", j.Status, "items", len(j.Items))
	return j, true, nil
}

// expiredUpload is the 422 for an upload no new job may name.
func expiredUpload(field, id string) error {
	return &UnusableError{"upload_expired", field, fmt.Sprintf("upload %s has expired; upload the file again", id)}
}

// Get returns owner's job or ErrNotFound (also for someone else's job).
func (s *Service) Get(ctx context.Context, owner, id string) (job.Job, error) {
	if !ids.Valid(ids.Job, id) {
		return job.Job{}, ErrNotFound
	}
	j, err := s.cfg.Store.GetJob(ctx, id)
	if err != nil {
		return job.Job{}, err
	}
	if j.Owner != owner {
		return job.Job{}, ErrNotFound
	}
	return j, nil
}

// ListRequest is the query of GET /v1/jobs.
type ListRequest struct {
	Status       string
	UpdatedSince string
	Limit        *int
	Cursor       string
}

// ListResult is one page and the total count for the status filter.
type ListResult struct {
	Jobs       []job.Job
	NextCursor string
	Total      int
}

// List returns a page of owner's jobs and the count of all that match the
// status filter. A cursor taken from another list gives ErrBadCursor.
func (s *Service) List(ctx context.Context, owner string, r ListRequest) (ListResult, error) {
	q := store.ListQuery{Owner: owner, Limit: DefaultLimit, Cursor: r.Cursor}
	if r.Status != "" {
		st, err := job.ParseStatus(r.Status)
		if err != nil {
			return ListResult{}, &ValidationError{"status", "must be one of scheduled, queued, running, succeeded, failed, cancelled, stale"}
		}
		q.Status = st
	}
	if r.UpdatedSince != "" {
		t, err := time.Parse(time.RFC3339Nano, r.UpdatedSince)
		if err != nil {
			return ListResult{}, &ValidationError{"updatedSince", "must be an RFC 3339 time"}
		}
		q.UpdatedSince = store.SinceKey(t)
	}
	if r.Limit != nil {
		if *r.Limit < 0 || *r.Limit > MaxLimit {
			return ListResult{}, &ValidationError{"limit", fmt.Sprintf("must be between 0 and %d", MaxLimit)}
		}
		q.Limit = *r.Limit
	}
	res := ListResult{Jobs: []job.Job{}}
	if q.Limit > 0 {
		// The page first: a cursor that is not this list's fails before
		// anything is counted.
		jobs, next, err := s.cfg.Store.ListJobs(ctx, q)
		if err != nil {
			return ListResult{}, err
		}
		if jobs != nil {
			res.Jobs = jobs
		}
		res.NextCursor = next
	}
	total, err := s.cfg.Store.CountJobs(ctx, q)
	if err != nil {
		return ListResult{}, err
	}
	res.Total = total
	return res, nil
}

// Cancel stops owner's job; outputs already produced are kept. A finished
// job gives a *job.TransitionError (409).
func (s *Service) Cancel(ctx context.Context, owner, id string) (job.Job, error) {
	if _, err := s.Get(ctx, owner, id); err != nil {
		return job.Job{}, err
	}
	now := s.cfg.Now()
	j, err := s.cfg.Store.UpdateJob(ctx, id, func(j *job.Job) error {
		if err := j.Apply(job.Cancel, now); err != nil {
			return err
		}
		j.Error = &job.Error{Code: "cancelled", Message: "cancelled by the user", Retryable: true}
		return nil
	})
	if err == nil {
		s.cfg.Logger.InfoContext(ctx, "job cancelled", "job_id", id)
	}
	return j, err
}

// Retry re-queues owner's failed, cancelled or stale job: finished phases
// and published items are kept, the rest runs again. Any other status gives
// a *job.TransitionError (409).
func (s *Service) Retry(ctx context.Context, owner, id string) (job.Job, error) {
	if _, err := s.Get(ctx, owner, id); err != nil {
		return job.Job{}, err
	}
	return s.Requeue(ctx, id, job.Retry)
}

// Requeue applies a (Retry or Release) to job id and sends its message.
func (s *Service) Requeue(ctx context.Context, id string, a job.Action) (job.Job, error) {
	now := s.cfg.Now()
	j, err := s.cfg.Store.UpdateJob(ctx, id, func(j *job.Job) error {
		if err := j.Apply(a, now); err != nil {
			return err
		}
		j.Enqueues++
		return nil
	})
	if err != nil {
		return j, err
	}
	if err := s.cfg.Sender.Send(ctx, resources.Tier(j.Tier), queue.Message{Kind: queue.KindPublish, JobID: j.ID, Send: j.Enqueues}); err != nil {
		s.cfg.Logger.ErrorContext(ctx, "enqueue failed; recovery will send the job", "job_id", j.ID, "error", err)
	}
	return j, nil
}
