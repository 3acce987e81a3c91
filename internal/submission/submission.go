// Package submission is what users do with jobs: submit one (validated,
// idempotent, stored before it is enqueued), read and list them, cancel and
// retry. Every state change goes through the job state machine and a
// conditional write. A submission's idempotency hash is the hash of its
// canonical JSON (canonical.go), which the API's Idempotency-Key guard
// uses for request bodies too.
package submission

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/conveyor/conveyor/internal/fault"
	"github.com/conveyor/conveyor/internal/ids"
	"github.com/conveyor/conveyor/internal/invalid"
	"github.com/conveyor/conveyor/internal/job"
	"github.com/conveyor/conveyor/internal/netguard"
	"github.com/conveyor/conveyor/internal/resources"
	"github.com/conveyor/conveyor/internal/telemetry"
)

// Limits of a submission.
const (
	MaxScheduleAhead = resources.MaxScheduleAhead
	DefaultLimit     = 50
	MaxLimit         = 200
)

// UnusableError is well-formed input that cannot be used (422).
type UnusableError = job.UnusableError

// ErrNotFound is returned for unknown jobs and for other users' jobs alike.
var ErrNotFound = fault.ErrNotFound

// ErrBadCursor (wrapped, with the reason) is returned by List for a cursor
// that does not continue the list asked for.
var ErrBadCursor = fault.ErrBadCursor

// Sender puts a job's message on its tier's queue (queue.Sender).
type Sender interface {
	// SendJob puts j's message on j's tier queue.
	SendJob(ctx context.Context, j job.Job) error
}

// Store keeps the jobs (store.Store, on DynamoDB): declared here so that
// this package links no DynamoDB client.
type Store interface {
	// CreateJob stores the new job j, unless an identical active job
	// exists (existing, created false); a refusal is
	// *job.UploadUnavailableError, job.ErrNoAccount or the owner's limits.
	CreateJob(ctx context.Context, j *job.Job) (existing job.Job, created bool, err error)
	// GetJob returns the job with id, or fault.ErrNotFound.
	GetJob(ctx context.Context, id string) (job.Job, error)
	// UpdateJob reads the job, applies fn and saves it, retrying on
	// conflicts; fn returns an error to abort without writing.
	UpdateJob(ctx context.Context, id string, fn func(*job.Job) error) (job.Job, error)
	// LoggedEvents returns a job's events after seq after, oldest first (at
	// most limit), and the number of the last one (after when none).
	LoggedEvents(ctx context.Context, jobID string, after int64, limit int) ([]job.LoggedEvent, int64, error)
	// ListJobs returns one page of jobs and the cursor of the next page
	// (fault.ErrBadCursor for a cursor of another query).
	ListJobs(ctx context.Context, q job.ListQuery) ([]job.Job, string, error)
	// CountJobs counts the jobs q selects (its Limit and Cursor aside).
	CountJobs(ctx context.Context, q job.ListQuery) (int, error)
}

// Config configures a Service.
type Config struct {
	Store  Store
	Sender Sender
	// Kinds are the kinds of job users may submit ("type"): their fronts
	// only, since submitting runs nothing.
	Kinds *job.Fronts
	// Env decides the webhook URL policy (http and private targets only locally).
	Env job.Env
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

// SubmitItem names one input of a job (a confirmed upload).
type SubmitItem = job.SpecItem

// SubmitRequest is the body of POST /v1/jobs.
type SubmitRequest struct {
	Type       string          `json:"type"`
	Items      []SubmitItem    `json:"items,omitempty"`
	Params     json.RawMessage `json:"params"`
	ScheduleAt *time.Time      `json:"scheduleAt"`
	WebhookURL string          `json:"webhookUrl"`
}

// DefaultType is the kind of a submission that names none.
const DefaultType = "publish"

// Normalize returns the request in its canonical form: the type lower-cased
// (publish when absent), the items and params as the kind normalises them,
// the schedule in UTC to the second. Two requests that mean the same job
// normalise to the same value (and so the same hash). Params the kind
// cannot read are left as they are (Submit refuses them).
func (s *Service) Normalize(r SubmitRequest) SubmitRequest {
	n, _ := s.normalize(r)
	return n
}

func (s *Service) normalize(r SubmitRequest) (SubmitRequest, error) {
	n := SubmitRequest{
		Type:       kindName(r.Type),
		WebhookURL: strings.TrimSpace(r.WebhookURL),
		Items:      r.Items,
		Params:     r.Params,
	}
	if r.ScheduleAt != nil {
		t := r.ScheduleAt.UTC().Truncate(time.Second)
		n.ScheduleAt = &t
	}
	k, ok := s.cfg.Kinds.Get(n.Type)
	if !ok {
		return n, invalid.Field("type", "must be one of "+strings.Join(quoted(s.cfg.Kinds.Names()), ", "))
	}
	spec, err := k.Normalize(job.Spec{Items: r.Items, Params: r.Params})
	if err != nil {
		return n, err
	}
	n.Items, n.Params = spec.Items, spec.Params
	return n, nil
}

// kindName is a request's type as the kinds are named: lower case, and
// DefaultType when it names none.
func kindName(t string) string {
	if t = strings.ToLower(strings.TrimSpace(t)); t == "" {
		return DefaultType
	}
	return t
}

func quoted(names []string) []string {
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = strconv.Quote(n)
	}
	return out
}

// Hash is the request's idempotency hash for owner: SHA-256 over the
// canonical JSON of the normalised request.
func (s *Service) Hash(owner string, r SubmitRequest) (string, error) {
	return CanonicalHash(owner, s.Normalize(r))
}

// validate checks a normalised request (400s): the kind's rules, then the
// core's (schedule, webhook URL).
func (s *Service) validate(ctx context.Context, k job.Front, r SubmitRequest) error {
	local := s.cfg.Env == job.Local
	env := job.ValidationEnv{Local: local, Resolver: s.cfg.Resolver}
	if err := k.Validate(ctx, env, job.Spec{Items: r.Items, Params: r.Params}); err != nil {
		return err
	}
	if len(r.Params) > job.MaxDocBytes {
		return paramsTooLarge(len(r.Params))
	}
	if r.ScheduleAt != nil && r.ScheduleAt.After(s.cfg.Now().Add(MaxScheduleAhead)) {
		return invalid.Unusable("scheduleAt", "schedule_too_far", fmt.Sprintf("scheduleAt must be within a year of now (%s at the latest)", s.cfg.Now().Add(MaxScheduleAhead).UTC().Format(time.RFC3339)))
	}
	if r.WebhookURL != "" {
		if _, err := netguard.For(env.Local, env.Resolver).CheckURL(ctx, r.WebhookURL); err != nil {
			return invalid.Field("webhookUrl", err.Error())
		}
	}
	return nil
}

// Check validates req as Submit would, without creating anything (a
// schedule's job template is checked this way when it is saved).
func (s *Service) Check(ctx context.Context, req SubmitRequest) error {
	r, err := s.normalize(req)
	if err != nil {
		return err
	}
	k, _ := s.cfg.Kinds.Get(r.Type)
	return s.validate(ctx, k, r)
}

// SplitSecrets returns req with the secret values its kind knows of
// redacted, and the values (nil: none), for a template kept beyond one
// job (job.SecretsFront); JoinSecrets puts them back. A kind without
// secrets returns req as it is.
func (s *Service) SplitSecrets(req SubmitRequest) (SubmitRequest, []byte, error) {
	k, ok := s.secrets(req)
	if !ok {
		return req, nil, nil
	}
	spec, secrets, err := k.SplitSecrets(job.Spec{Items: req.Items, Params: req.Params})
	if err != nil {
		return req, nil, err
	}
	req.Params = spec.Params
	return req, secrets, nil
}

// JoinSecrets returns req with the values SplitSecrets took put back.
func (s *Service) JoinSecrets(req SubmitRequest, secrets []byte) (SubmitRequest, error) {
	k, ok := s.secrets(req)
	if !ok {
		return req, fmt.Errorf("submission: a %q job keeps no secrets to put back", req.Type)
	}
	spec, err := k.JoinSecrets(job.Spec{Items: req.Items, Params: req.Params}, secrets)
	if err != nil {
		return req, err
	}
	req.Params = spec.Params
	return req, nil
}

func (s *Service) secrets(req SubmitRequest) (job.SecretsFront, bool) {
	f, ok := s.cfg.Kinds.Get(kindName(req.Type))
	if !ok {
		return nil, false
	}
	k, ok := f.(job.SecretsFront)
	return k, ok
}

// SubmitOptions are what a submission made on a user's behalf (a schedule's
// tick) adds to the request.
type SubmitOptions struct {
	// JobID, when set, is the new job's id: a second submission with the
	// same id returns the first job (created=false) whatever its status.
	JobID string
	// HashKey, when set, joins the canonical hash, so that identical
	// requests with different keys are different jobs (a schedule's
	// ticks). It is not the client's Idempotency-Key header: that one is
	// kept per user and route, with the response, by httpapi.Idempotency.
	HashKey string
}

// Submit validates req and creates the job, or returns the caller's active
// job with the same canonical hash (created=false). The job is stored before
// its message is sent; if the send fails, the job stays queued and stuck-job
// recovery sends it (docs/design.md, "Submission and the outbox").
func (s *Service) Submit(ctx context.Context, c Caller, req SubmitRequest) (job.Job, bool, error) {
	return s.SubmitWith(ctx, c, req, SubmitOptions{})
}

// SubmitWith is Submit with options.
func (s *Service) SubmitWith(ctx context.Context, c Caller, req SubmitRequest, o SubmitOptions) (job.Job, bool, error) {
	r, err := s.normalize(req)
	if err != nil {
		return job.Job{}, false, err
	}
	k, _ := s.cfg.Kinds.Get(r.Type)
	if err := s.validate(ctx, k, r); err != nil {
		return job.Job{}, false, err
	}
	var hashed any = r
	if o.HashKey != "" {
		hashed = struct {
			SubmitRequest
			Key string `json:"idempotencyKey"`
		}{r, o.HashKey}
	}
	hash, err := CanonicalHash(c.Owner, hashed)
	if err != nil {
		return job.Job{}, false, fmt.Errorf("hashing the request: %w", err)
	}
	now := s.cfg.Now().UTC()
	id := o.JobID
	if id == "" {
		id = ids.New(ids.Job)
	}
	j := job.Job{
		ID:          id,
		Type:        r.Type,
		Status:      job.Queued,
		Tier:        job.TierForPlan(c.Plan),
		Phase:       "queued",
		Phases:      job.NewPhases(k.Phases()...),
		Params:      job.Doc(r.Params),
		MaxAttempts: s.cfg.MaxAttempts,
		WebhookURL:  r.WebhookURL,
		CreatedAt:   now,
		UpdatedAt:   now,
		Owner:       c.Owner,
		Plan:        c.Plan,
		Hash:        hash,
		QueuedAt:    &now,
		Enqueues:    1,
		Trace:       telemetry.Traceparent(ctx),
	}
	trace.SpanFromContext(ctx).SetAttributes(telemetry.AttrJobID.String(id))
	if err := k.Prepare(ctx, c.Owner, job.Spec{Items: r.Items, Params: r.Params}, &j); err != nil {
		if errors.Is(err, job.ErrDocTooLarge) {
			err = paramsTooLarge(len(j.Params))
		}
		return job.Job{}, false, err
	}
	if r.ScheduleAt != nil && r.ScheduleAt.After(now) {
		j.Status, j.Phase, j.ScheduleAt, j.QueuedAt, j.Enqueues = job.Scheduled, "scheduled", r.ScheduleAt, nil, 0
		j.SetWait(job.WaitScheduled, r.ScheduleAt, "the job was submitted with scheduleAt; it is released to its queue within a minute of that time", "")
	} else {
		j.Emit(job.EventEnqueued, now, nil)
	}
	existing, created, err := s.cfg.Store.CreateJob(ctx, &j)
	if err != nil {
		return job.Job{}, false, s.refused(ctx, k, c.Owner, r, err)
	}
	log := s.cfg.Logger.With("job_id", j.ID, "tier", j.Tier, "type", j.Type)
	if !created {
		log.InfoContext(ctx, "identical active job exists", "existing_job_id", existing.ID)
		return existing, false, nil
	}
	if j.Status == job.Queued && !j.InBacklog() {
		if err := s.cfg.Sender.SendJob(ctx, j); err != nil {
			// The job is stored and queued: recovery will send it.
			log.ErrorContext(ctx, "enqueue failed; recovery will send the job", "error", err)
		}
	}
	log.InfoContext(ctx, "job submitted", "status", j.Status, "items", len(j.Items))
	return j, true, nil
}

// refused turns the store's refusal of a new job into what the submitter
// should see: the transaction checked the uploads and the account without
// reading them, so the kind reads them now to say which and why
// (job.Explainer). If it finds nothing wrong any more (a confirmation or a
// connection landed in between), the refusal stands, as the transaction saw it.
func (s *Service) refused(ctx context.Context, k job.Front, owner string, r SubmitRequest, err error) error {
	var gone *job.UploadUnavailableError
	if !errors.As(err, &gone) && !errors.Is(err, job.ErrNoAccount) {
		return err
	}
	if e, ok := k.(job.Explainer); ok {
		if why := e.Explain(ctx, owner, job.Spec{Items: r.Items, Params: r.Params}); why != nil {
			return why
		}
	}
	if gone == nil {
		return &UnusableError{Code: "account_not_connected", Message: "connect an account first (PUT /v1/account/connection)"}
	}
	i := slices.IndexFunc(r.Items, func(it SubmitItem) bool { return it.UploadID == gone.UploadID })
	return &UnusableError{Code: "upload_not_confirmed", Field: fmt.Sprintf("items[%d].uploadId", i),
		Message: fmt.Sprintf("upload %s was not usable when the job was created (not confirmed, or expired); check it and submit again", gone.UploadID)}
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

// attemptsPage is how many events one read of the log takes.
const attemptsPage = 500

// Attempts returns every attempt of the caller's job, read from its event
// log (job.Attempts), oldest first; ErrNotFound for another user's job.
func (s *Service) Attempts(ctx context.Context, owner, id string) ([]job.Attempt, error) {
	if _, err := s.Get(ctx, owner, id); err != nil {
		return nil, err
	}
	var evs []job.LoggedEvent
	for after := int64(0); ; {
		recs, last, err := s.cfg.Store.LoggedEvents(ctx, id, after, attemptsPage)
		if err != nil {
			return nil, err
		}
		evs = append(evs, recs...)
		after = last
		if len(recs) < attemptsPage {
			return job.Attempts(evs), nil
		}
	}
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
	q := job.ListQuery{Owner: owner, Limit: DefaultLimit, Cursor: r.Cursor}
	if r.Status != "" {
		st, err := job.ParseStatus(r.Status)
		if err != nil {
			return ListResult{}, invalid.Field("status", "must be one of scheduled, queued, running, succeeded, failed, cancelled, stale")
		}
		q.Status = st
	}
	if r.UpdatedSince != "" {
		t, err := time.Parse(time.RFC3339Nano, r.UpdatedSince)
		if err != nil {
			return ListResult{}, invalid.Field("updatedSince", "must be an RFC 3339 time")
		}
		q.UpdatedSince = job.SortTime(t)
	}
	if r.Limit != nil {
		if *r.Limit < 0 || *r.Limit > MaxLimit {
			return ListResult{}, invalid.Field("limit", fmt.Sprintf("must be between 0 and %d", MaxLimit))
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
	j, err := s.Stop(ctx, id, &job.Error{Code: "cancelled", Message: "cancelled by the user", Retryable: true})
	if err == nil {
		s.cfg.Logger.InfoContext(ctx, "job cancelled", "job_id", id)
	}
	return j, err
}

// Stop cancels job id with why as its error (the owner's cancel, an
// operator's stop). A run in progress keeps its lease until it has
// finished its call (job.Apply), and no call starts after the cancel.
// When a run may have reached the external API for some item without
// recording the outcome (the job is unsettled), one more delivery is sent:
// the worker that receives it waits for the run to release the job, then
// asks the API what happened and records it on the cancelled job.
func (s *Service) Stop(ctx context.Context, id string, why *job.Error) (job.Job, error) {
	return s.StopFor(ctx, id, why, "")
}

// StopFor is Stop on behalf of bulk operation op (empty: none): the job
// keeps op in the write that stops it, and a job op already acted on is
// left alone with job.ErrActedOn, so running a chunk of op again never
// stops a job twice.
func (s *Service) StopFor(ctx context.Context, id string, why *job.Error, op string) (job.Job, error) {
	now := s.cfg.Now()
	j, err := s.cfg.Store.UpdateJob(ctx, id, func(j *job.Job) error {
		if op != "" && j.Operation == op {
			return job.ErrActedOn
		}
		if err := j.Apply(job.Cancel, now); err != nil {
			return err
		}
		if op != "" {
			j.Operation = op
		}
		j.Error = why
		if j.Unsettled() {
			j.Enqueues++
		}
		return nil
	})
	if err != nil || !j.Unsettled() {
		return j, err
	}
	// The run's own message may still hold the job's slot: this one, a
	// later send, goes to the owner's next slot (queue.Fairness).
	if err := s.cfg.Sender.SendJob(ctx, j); err != nil {
		// The items stay tried: a retry asks the API before any call.
		s.cfg.Logger.ErrorContext(ctx, "sending the cancelled job for reconciliation failed; a retry asks the API", "job_id", id, "error", err)
	}
	return j, nil
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
	return s.RequeueFor(ctx, id, a, "")
}

// RequeueFor is Requeue on behalf of bulk operation op (empty: none): the
// job keeps op in the write that re-queues it, and a job op already acted
// on is left alone with job.ErrActedOn — even when it has failed again
// since — so running a chunk of op again never restarts a job twice.
func (s *Service) RequeueFor(ctx context.Context, id string, a job.Action, op string) (job.Job, error) {
	now := s.cfg.Now()
	j, err := s.cfg.Store.UpdateJob(ctx, id, func(j *job.Job) error {
		if op != "" && j.Operation == op {
			return job.ErrActedOn
		}
		if err := j.Apply(a, now); err != nil {
			return err
		}
		if op != "" {
			j.Operation = op
		}
		j.Enqueues++
		return nil
	})
	if err != nil || j.InBacklog() {
		return j, err // backlogged: sent when admitted
	}
	// A retried job's earlier message may still hold its slot (a
	// cancelled run finishing its call): this later send goes to the
	// owner's next slot (queue.Fairness).
	if err := s.cfg.Sender.SendJob(ctx, j); err != nil {
		s.cfg.Logger.ErrorContext(ctx, "enqueue failed; recovery will send the job", "job_id", j.ID, "error", err)
	}
	return j, nil
}

// paramsTooLarge refuses params that encode to more than job.MaxDocBytes
// (the kind's own limits, such as the http kind's 64 KiB of headers and
// body, keep what the contract allows within it).
func paramsTooLarge(n int) error {
	return invalid.Field("params", fmt.Sprintf("must encode to at most %d bytes of JSON (%d)", job.MaxDocBytes, n))
}
