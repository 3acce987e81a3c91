// Package job is Conveyor's public vocabulary: the Job, its statuses, phases
// and items, the state machine that says which transitions are allowed, its
// events, and the kinds' API (kind.go). It does no I/O; the store persists
// what this package decides.
//
// A kind of job implements Kind: a Front (name, normalisation, validation,
// preparation, phases), all that submitting or checking a job needs, and the
// Work the run loop calls. The core (submission, the run loop, recovery,
// admin) knows a job only through its kind: a name, params it may not read,
// phases, items, and a Work step whose errors internal/retry classifies. The
// functions that only submit hold a Fronts registry, those that run jobs a
// Registry. Adding a kind is writing one Kind and registering it
// (ExampleKind, and docs/kinds.md). The shape follows River's
// JobArgs/Worker[T] (a kind names itself and works on its own args) and
// asynq's Handler (one method that runs the work and says, by its error,
// what happens next), kept small.
package job

import (
	"errors"
	"fmt"
	"time"

	"github.com/conveyor/conveyor/internal/envelope"
)

// Status is the source of truth of a job's lifecycle.
type Status string

// The statuses of the contract.
const (
	Scheduled Status = "scheduled"
	Queued    Status = "queued"
	Running   Status = "running"
	Succeeded Status = "succeeded"
	Failed    Status = "failed"
	Cancelled Status = "cancelled"
	Stale     Status = "stale"
)

// Statuses lists every status.
var Statuses = []Status{Scheduled, Queued, Running, Succeeded, Failed, Cancelled, Stale}

// ParseStatus returns the Status named s.
func ParseStatus(s string) (Status, error) {
	for _, st := range Statuses {
		if string(st) == s {
			return st, nil
		}
	}
	return "", fmt.Errorf("unknown status %q", s)
}

// Active reports whether the job still has work ahead (scheduled, queued or
// running). An active job blocks an identical submission.
func (s Status) Active() bool { return s == Scheduled || s == Queued || s == Running }

// Finished reports whether the job reached an end (succeeded, failed,
// cancelled) and is waiting for retention.
func (s Status) Finished() bool { return s == Succeeded || s == Failed || s == Cancelled }

// Action is something that moves a job from one status to another.
type Action string

// The actions of the state machine.
const (
	// Release moves a scheduled job to the queue when its time has come.
	Release Action = "release"
	// Start is a worker claiming a queued job (or resuming a running one
	// whose previous worker's lease expired).
	Start Action = "start"
	// Succeed ends a running job whose every item is published.
	Succeed Action = "succeed"
	// Fail ends a job with an error kept on it.
	Fail Action = "fail"
	// Requeue puts a job back in the queue for another attempt.
	Requeue Action = "requeue"
	// Cancel stops a job; outputs already produced are kept.
	Cancel Action = "cancel"
	// Retry is a user or operator restarting a finished job's unfinished work.
	Retry Action = "retry"
	// Expire marks a finished job stale (first retention stage).
	Expire Action = "expire"
)

// transitions is the whole state machine: for each action, the statuses it
// may start from and the status it leads to.
var transitions = map[Action]struct {
	from []Status
	to   Status
}{
	Release: {[]Status{Scheduled}, Queued},
	Start:   {[]Status{Queued, Running}, Running},
	Succeed: {[]Status{Running}, Succeeded},
	Fail:    {[]Status{Scheduled, Queued, Running}, Failed},
	Requeue: {[]Status{Queued, Running}, Queued},
	Cancel:  {[]Status{Scheduled, Queued, Running}, Cancelled},
	Retry:   {[]Status{Failed, Cancelled, Stale}, Queued},
	Expire:  {[]Status{Succeeded, Failed, Cancelled}, Stale},
}

// ErrTransition is returned (wrapped in *TransitionError) when an action is
// not allowed from the job's status.
var ErrTransition = errors.New("transition not allowed")

// TransitionError says which action was refused from which status.
type TransitionError struct {
	From   Status
	Action Action
}

func (e *TransitionError) Error() string {
	return fmt.Sprintf("cannot %s a %s job", e.Action, e.From)
}

// Unwrap makes errors.Is(err, ErrTransition) true.
func (e *TransitionError) Unwrap() error { return ErrTransition }

// Next returns the status action leads to from status from, or a
// *TransitionError when the state machine does not allow it.
func Next(from Status, a Action) (Status, error) {
	t, ok := transitions[a]
	if !ok {
		return "", fmt.Errorf("unknown action %q", a)
	}
	for _, s := range t.from {
		if s == from {
			return t.to, nil
		}
	}
	return "", &TransitionError{From: from, Action: a}
}

// Allowed reports whether action a may be taken from status s.
func Allowed(s Status, a Action) bool {
	_, err := Next(s, a)
	return err == nil
}

// PhaseStatus is the status of one phase.
type PhaseStatus string

// Phase statuses.
const (
	PhasePending   PhaseStatus = "pending"
	PhaseRunning   PhaseStatus = "running"
	PhaseCompleted PhaseStatus = "completed"
	PhaseFailed    PhaseStatus = "failed"
)

// Phase is one phase's persisted state.
type Phase struct {
	Name        string      `json:"name" dynamodbav:"name"`
	Status      PhaseStatus `json:"status" dynamodbav:"status"`
	Progress    int         `json:"progress" dynamodbav:"progress"`
	Message     string      `json:"message" dynamodbav:"message"`
	StartedAt   *time.Time  `json:"startedAt" dynamodbav:"startedAt,omitempty"`
	CompletedAt *time.Time  `json:"completedAt" dynamodbav:"completedAt,omitempty"`
	Error       *Error      `json:"error" dynamodbav:"error,omitempty"`
}

// ItemStatus is the status of one item (one file to publish).
type ItemStatus string

// Item statuses, in the order an item moves through them.
const (
	ItemPending   ItemStatus = "pending"
	ItemUploaded  ItemStatus = "uploaded"
	ItemPublished ItemStatus = "published"
	ItemFailed    ItemStatus = "failed"
)

// Output is what an item produced (for publish: the deviation).
type Output struct {
	DeviationID string `json:"deviationId" dynamodbav:"deviationId"`
	URL         string `json:"url" dynamodbav:"url"`
}

// Item is one file of a job, with its own status and output.
type Item struct {
	ID       string     `json:"id" dynamodbav:"id"`
	UploadID string     `json:"uploadId" dynamodbav:"uploadId"`
	Status   ItemStatus `json:"status" dynamodbav:"status"`
	Output   *Output    `json:"output" dynamodbav:"output,omitempty"`
	Error    *Error     `json:"error,omitempty" dynamodbav:"error,omitempty"`
	// Key, ContentType, Size, Filename and Pin describe the confirmed
	// upload. Submission does not read the upload (its confirmation is
	// checked by the creating transaction), so a new job's items carry only
	// UploadID until the worker that first claims the job fills them from the
	// upload records it reads with the job (store.DescribeItems); the claim
	// then stores them.
	Key         string `json:"-" dynamodbav:"key"`
	ContentType string `json:"-" dynamodbav:"contentType"`
	Size        int64  `json:"-" dynamodbav:"size"`
	Filename    string `json:"-" dynamodbav:"filename"`
	// Pin is the object the upload's confirmation checked: the publisher
	// downloads that object or none (a later PUT to the same key fails
	// the job with media_changed).
	Pin Pin `json:"-" dynamodbav:"pin,omitempty"`
	// StashItemID is the external API's id of the uploaded file.
	StashItemID int64 `json:"-" dynamodbav:"stashItemId,omitempty"`
	// Tried is set when a run claimed the job while this item was
	// unfinished: an earlier run may have reached the external API for it,
	// so a later run asks the API what happened before repeating a call.
	// Unlike the attempt counter, a retry does not reset it.
	Tried bool `json:"-" dynamodbav:"tried,omitempty"`
}

// Pin names one exact S3 object: its ETag and, in a versioned bucket, its
// version. The zero Pin names whatever the key holds (uploads confirmed
// before pins were recorded).
type Pin struct {
	ETag      string `json:"-" dynamodbav:"etag,omitempty"`
	VersionID string `json:"-" dynamodbav:"versionId,omitempty"`
}

// IsZero reports whether p pins nothing.
func (p Pin) IsZero() bool { return p == Pin{} }

// Error is a failure kept on a job, a phase or an item.
type Error struct {
	Code      string `json:"code" dynamodbav:"code"`
	Message   string `json:"message" dynamodbav:"message"`
	Retryable bool   `json:"retryable" dynamodbav:"retryable"`
}

// Job is one unit of work and everything known about it.
type Job struct {
	ID          string     `json:"id" dynamodbav:"id"`
	Type        string     `json:"type" dynamodbav:"type"`
	Status      Status     `json:"status" dynamodbav:"status"`
	Tier        Tier       `json:"tier" dynamodbav:"tier"`
	Phase       string     `json:"phase" dynamodbav:"phase"`
	Progress    int        `json:"progress" dynamodbav:"progress"`
	Phases      []Phase    `json:"phases" dynamodbav:"phases"`
	Items       []Item     `json:"items" dynamodbav:"items"`
	Params      Doc        `json:"params" dynamodbav:"params"`
	Attempts    int        `json:"attempts" dynamodbav:"attempts"`
	MaxAttempts int        `json:"maxAttempts" dynamodbav:"maxAttempts"`
	Error       *Error     `json:"error" dynamodbav:"error,omitempty"`
	Result      Doc        `json:"result" dynamodbav:"result,omitempty"`
	WebhookURL  string     `json:"webhookUrl,omitempty" dynamodbav:"webhookUrl,omitempty"`
	CreatedAt   time.Time  `json:"createdAt" dynamodbav:"createdAt"`
	UpdatedAt   time.Time  `json:"updatedAt" dynamodbav:"updatedAt"`
	ScheduleAt  *time.Time `json:"scheduleAt" dynamodbav:"scheduleAt,omitempty"`
	StartedAt   *time.Time `json:"startedAt" dynamodbav:"startedAt,omitempty"`
	FinishedAt  *time.Time `json:"finishedAt" dynamodbav:"finishedAt,omitempty"`
	// Wait, on a scheduled or queued job, says why it is not running and
	// when it is next tried (null otherwise).
	Wait *Wait `json:"wait" dynamodbav:"wait,omitempty"`

	// Owner is the user id the job belongs to.
	Owner string `json:"-" dynamodbav:"owner"`
	// Plan is the owner's plan at submission: it picks the tier and the
	// owner's share of it (queue.Fairness). Empty on jobs stored before it
	// was kept.
	Plan string `json:"-" dynamodbav:"plan,omitempty"`
	// Hash is the canonical hash of the submission (per owner).
	Hash string `json:"-" dynamodbav:"hash"`
	// Version increases with every write; writes are conditional on it.
	Version int64 `json:"-" dynamodbav:"version"`
	// QueuedAt is when the job last entered the queue (recovery looks at it).
	QueuedAt *time.Time `json:"-" dynamodbav:"queuedAt,omitempty"`
	// Enqueues counts messages sent for the job; it makes each send's
	// deduplication id fresh.
	Enqueues int `json:"-" dynamodbav:"enqueues"`
	// HeartbeatAt is refreshed by the worker while the job runs.
	HeartbeatAt *time.Time `json:"-" dynamodbav:"heartbeatAt,omitempty"`
	// LeaseOwner and LeaseUntil: the worker that runs the job and until when
	// its claim holds without a heartbeat.
	LeaseOwner string     `json:"-" dynamodbav:"leaseOwner,omitempty"`
	LeaseUntil *time.Time `json:"-" dynamodbav:"leaseUntil,omitempty"`
	// RetryAt is when a job requeued after a temporary error may run again.
	RetryAt *time.Time `json:"-" dynamodbav:"retryAt,omitempty"`
	// Waiting, on a queued job, says why it waits in the table instead of
	// the queue (its message was deleted; see Park): the release sweep
	// sends it again at RetryAt. Empty: the job's message is in the queue.
	Waiting string `json:"-" dynamodbav:"waiting,omitempty"`
	// Depth is which of its owner's counters of the tier the job is
	// counted in, as stored: DepthQueue (its message is, or will be again,
	// in the queue), DepthBacklog (it waits in the table for room in the
	// queue), or "" (neither). The store keeps the counters exact by
	// changing them in the same transaction as the job (WantDepth).
	Depth string `json:"-" dynamodbav:"depth,omitempty"`
	// Active says the job is counted in its owner's active-jobs counter,
	// as stored (store: ACTIVE#owner): set by the write that counts it in
	// (its creation, or the first write that finds it active once a quota
	// is configured) and cleared by the one that takes it out, in the same
	// transaction as the counter, so a job is counted once at most and a
	// job stored before the counter never takes one away.
	Active bool `json:"-" dynamodbav:"active,omitempty"`
	// Resends counts the messages recovery sent again because the last
	// one might have been lost; each doubles the time before the next.
	Resends int `json:"-" dynamodbav:"resends,omitempty"`
	// StuckFrom, when set, replaces QueuedAt as the time from which
	// recovery measures how long a queued job went unreceived.
	StuckFrom *time.Time `json:"-" dynamodbav:"stuckFrom,omitempty"`
	// ExpiresAt is the epoch second after which the job is gone (DynamoDB
	// TTL; readers ignore expired items since TTL deletes late).
	ExpiresAt int64 `json:"-" dynamodbav:"expiresAt,omitempty"`
	// MediaRefs are the uploads on which the job holds a reference, which
	// keeps their objects from being deleted: taken when the job is created,
	// released when it goes stale.
	MediaRefs []string `json:"-" dynamodbav:"mediaRefs,omitempty"`
	// Trace is the W3C traceparent of the request that submitted the job:
	// every message that sends the job carries it, so that each run and
	// its external calls join the job's one trace.
	Trace string `json:"-" dynamodbav:"trace,omitempty"`
	// EventSeq is the sequence number of the job's last persisted event.
	EventSeq int64 `json:"-" dynamodbav:"eventSeq"`
	// Pending are events to persist with the next write (not stored).
	Pending []Event `json:"-" dynamodbav:"-"`
	// NeedsAccount, when set, names the provider whose connected account
	// the job needs: the job is created only if its owner has one, checked
	// in the creating transaction (not stored).
	NeedsAccount string `json:"-" dynamodbav:"-"`
	// Sealed is the kind's secret for this job (an http job's header
	// values), sealed at submission and opened only by the run that needs
	// it. It is stored with the job and never rendered: no API response
	// or event snapshot carries it.
	Sealed *envelope.Envelope `json:"-" dynamodbav:"sealed,omitempty"`
	// Snoozes counts the runs handed back without spending an attempt
	// (Snooze: circuit open, 429) since the job was created or last
	// retried; a kind may bound it.
	Snoozes int `json:"-" dynamodbav:"snoozes,omitempty"`
	// RetriedAt is when the job was last retried by its owner or an
	// operator (Retry); see DueSince.
	RetriedAt *time.Time `json:"-" dynamodbav:"retriedAt,omitempty"`
	// Operation is the operator's bulk operation that last acted on the
	// job (an "op_…" id), written in the same conditional write as its
	// change: a chunk of the operation run again finds it here and leaves
	// the job alone (ErrActedOn).
	Operation string `json:"-" dynamodbav:"operation,omitempty"`
}

// ErrActedOn is what a change made on behalf of a bulk operation returns
// when that operation already acted on the job (Job.Operation): nothing
// is written, and the operation counts the job as done.
var ErrActedOn = errors.New("the operation already acted on this job")

// DueSince is when the job's current run of attempts became due: the
// latest of its creation, its scheduled time and its last Retry. A kind
// that bounds a job's age measures it from here.
func (j *Job) DueSince() time.Time {
	t := j.CreatedAt
	for _, u := range []*time.Time{j.ScheduleAt, j.RetriedAt} {
		if u != nil && u.After(t) {
			t = *u
		}
	}
	return t
}

// NewPhases returns the initial (pending) phases named, in order: a kind
// declares its phase names (Kind.Phases).
func NewPhases(names ...string) []Phase {
	ps := make([]Phase, 0, len(names))
	for _, n := range names {
		ps = append(ps, Phase{Name: n, Status: PhasePending})
	}
	return ps
}

// Apply moves j with action a at time now, updating status, timestamps and
// the display phase. It returns a *TransitionError and leaves j untouched
// when the action is not allowed.
func (j *Job) Apply(a Action, now time.Time) error {
	next, err := Next(j.Status, a)
	if err != nil {
		return err
	}
	now = now.UTC()
	if ev := eventFor(a, j.Status); ev != "" {
		j.Emit(ev, now, nil)
	}
	j.Status = next
	j.UpdatedAt = now
	// Whatever the job waited for is over; a requeue that waits again
	// (Snooze, RetryLater) says why after it.
	j.Wait = nil
	switch a {
	case Release, Requeue:
		j.Phase = "queued"
		j.QueuedAt = &now
		j.LeaseOwner, j.LeaseUntil = "", nil
		j.Waiting, j.Resends, j.StuckFrom = "", 0, nil
	case Retry:
		// The lease stays: a run that a cancel or stop ended may still be
		// finishing its last call, and the retry is not claimable before
		// that run released the job or its lease expired (Claim).
		j.Phase = "queued"
		j.QueuedAt = &now
		j.RetryAt = nil
		j.Waiting, j.Resends, j.StuckFrom = "", 0, nil
		j.Error, j.FinishedAt, j.ExpiresAt = nil, nil, 0
		j.Attempts, j.Snoozes, j.RetriedAt = 0, 0, &now
		for i := range j.Phases {
			if j.Phases[i].Status != PhaseCompleted {
				j.Phases[i].Status, j.Phases[i].Error, j.Phases[i].Message = PhasePending, nil, ""
			}
		}
		for i := range j.Items {
			if j.Items[i].Status == ItemFailed {
				j.Items[i].Status, j.Items[i].Error = ItemPending, nil
				if j.Items[i].StashItemID != 0 {
					j.Items[i].Status = ItemUploaded
				}
			}
		}
	case Start:
		if j.StartedAt == nil {
			j.StartedAt = &now
		}
		j.HeartbeatAt = &now
		j.RetryAt = nil
		j.Waiting, j.Resends, j.StuckFrom = "", 0, nil
	case Succeed, Fail, Cancel:
		j.FinishedAt = &now
		j.Phase = string(next)
		if a != Cancel {
			// A cancel (the owner's, or an operator's stop) keeps the
			// lease: the cancelled run may be in the middle of a call,
			// and it alone may record what that call did, until it
			// releases the job (Release) or its lease expires.
			j.LeaseOwner, j.LeaseUntil = "", nil
		}
		if a == Succeed {
			j.Progress = 100
		}
	case Expire:
		j.Phase = string(next)
	}
	return nil
}

// CurrentPhase returns the index of the first phase not completed, or
// len(Phases) when all are.
func (j *Job) CurrentPhase() int {
	for i, p := range j.Phases {
		if p.Status != PhaseCompleted {
			return i
		}
	}
	return len(j.Phases)
}

// PhaseIndex returns the index of the named phase, or -1.
func (j *Job) PhaseIndex(name string) int {
	for i, p := range j.Phases {
		if p.Name == name {
			return i
		}
	}
	return -1
}

// StartPhase marks the named phase running (keeping its first start time)
// and makes it the display phase.
func (j *Job) StartPhase(name, message string, now time.Time) {
	i := j.PhaseIndex(name)
	if i < 0 {
		return
	}
	p := &j.Phases[i]
	if p.StartedAt == nil {
		t := now.UTC()
		p.StartedAt = &t
	}
	p.Status, p.Message, p.Error = PhaseRunning, message, nil
	j.Phase = name
	j.recomputeProgress()
}

// SetPhaseProgress records a running phase's progress (0–100).
func (j *Job) SetPhaseProgress(name string, progress int, message string) {
	if i := j.PhaseIndex(name); i >= 0 {
		j.Phases[i].Progress = min(max(progress, 0), 100)
		if message != "" {
			j.Phases[i].Message = message
		}
	}
	j.recomputeProgress()
}

// CompletePhase marks the named phase completed.
func (j *Job) CompletePhase(name, message string, now time.Time) {
	i := j.PhaseIndex(name)
	if i < 0 {
		return
	}
	t := now.UTC()
	p := &j.Phases[i]
	if p.Status == PhaseCompleted {
		return
	}
	if p.StartedAt == nil {
		p.StartedAt = &t
	}
	p.Status, p.Progress, p.Message, p.CompletedAt, p.Error = PhaseCompleted, 100, message, &t, nil
	j.Emit(EventPhaseCompleted, t, map[string]string{"phase": name})
	j.recomputeProgress()
}

// FailPhase marks the named phase failed with e.
func (j *Job) FailPhase(name string, e *Error) {
	if i := j.PhaseIndex(name); i >= 0 {
		j.Phases[i].Status, j.Phases[i].Error = PhaseFailed, e
		if e != nil {
			j.Phases[i].Message = e.Message
		}
	}
}

// recomputeProgress derives overall progress from the phases:
// ((phaseIndex + phaseProgress/100) / phases) * 100.
func (j *Job) recomputeProgress() {
	if len(j.Phases) == 0 {
		return
	}
	total := 0.0
	for _, p := range j.Phases {
		switch p.Status {
		case PhaseCompleted:
			total += 1
		case PhaseRunning, PhaseFailed:
			total += float64(p.Progress) / 100
		}
	}
	j.Progress = int(total / float64(len(j.Phases)) * 100)
}

// Finished reports whether the job's status is an end state or stale.
func (j *Job) Finished() bool { return j.Status.Finished() || j.Status == Stale }

// Unsettled reports whether the job has items an earlier run may have sent
// to the external API without recording what happened (a worker that died
// right after a call). Once the job will not run again (finished, failed as
// stuck, cancelled), one more delivery asks the API and records the answer.
func (j *Job) Unsettled() bool {
	for _, it := range j.Items {
		if it.Tried && it.Status != ItemPublished {
			return true
		}
	}
	return false
}

// ErrLeaseHeld is returned (wrapped in *LeaseHeldError) by Claim while
// another run still holds the job's lease.
var ErrLeaseHeld = errors.New("the job's lease is held by another run")

// LeaseHeldError says who holds the lease and until when.
type LeaseHeldError struct {
	Owner string
	Until time.Time
}

func (e *LeaseHeldError) Error() string {
	return fmt.Sprintf("the job's lease is held by %s until %s", e.Owner, e.Until.Format(time.RFC3339Nano))
}

// Unwrap makes errors.Is(err, ErrLeaseHeld) true.
func (e *LeaseHeldError) Unwrap() error { return ErrLeaseHeld }

// Lease is who holds a job and in which state it is, as the store's
// JobLease reads it (one strongly consistent read of these attributes
// only). The dynamodbav tags are the store's attribute names.
type Lease struct {
	Status  Status     `dynamodbav:"status"`
	Owner   string     `dynamodbav:"leaseOwner"`
	Until   *time.Time `dynamodbav:"leaseUntil"`
	Version int64      `dynamodbav:"version"`
}

// HeldBy reports whether worker's run still holds the job at now: the job
// runs, leased to worker, and the lease has not lapsed.
func (l Lease) HeldBy(worker string, now time.Time) bool {
	return l.Status == Running && l.Owner == worker && l.Until != nil && l.Until.After(now)
}

// ErrPaused is what a claim returns when the job's tier is paused at that
// moment (the store's ClaimJob): the job waits, WaitPaused.
var ErrPaused = errors.New("tier paused")

// RunningUnderLease reports whether a run is running the job under a lease
// that has not ended at now: no other run may take it.
func (j *Job) RunningUnderLease(now time.Time) bool {
	return j.Status == Running && j.LeaseUntil != nil && j.LeaseUntil.After(now)
}

// CodeStuck is the error code of a job failed because its runs are spent
// and the last one stopped without recording its outcome (its worker went
// silent): retryable, since the owner may run it again.
const CodeStuck = "stuck"

// FailStuck fails the job CodeStuck (retryable), message saying why.
func (j *Job) FailStuck(message string, now time.Time) error {
	j.Error = &Error{Code: CodeStuck, Message: message, Retryable: true}
	return j.Apply(Fail, now)
}

// HeldBy reports whether a run other than worker holds the job's lease at
// now, and until when. A cancelled, stopped or retried job stays held by
// its last run until that run releases it or the lease expires.
func (j *Job) HeldBy(worker string, now time.Time) (time.Time, bool) {
	if j.LeaseOwner == "" || j.LeaseOwner == worker || j.LeaseUntil == nil || !j.LeaseUntil.After(now) {
		return time.Time{}, false
	}
	return *j.LeaseUntil, true
}

// Release is the run of worker letting go of a job that stopped being its
// run's (cancelled, stopped, retried meanwhile): the lease is cleared, so
// the next run may claim the job at once. It reports whether worker held
// the lease; a running job is left alone (its run ends it with Succeed,
// Fail or Requeue, which clear the lease).
func (j *Job) Release(worker string, now time.Time) bool {
	if j.Status == Running || j.LeaseOwner != worker {
		return false
	}
	j.LeaseOwner, j.LeaseUntil = "", nil
	j.UpdatedAt = now.UTC()
	return true
}

// Abandon is the run of worker ending without its outcome recorded: the
// write that would have recorded it failed (the table, or the invocation's
// time ran out). The job, still running under worker's lease, goes back to
// the queue claimable at once (Requeue clears the lease) instead of staying
// held until the lease lapses; the attempt its claim counted stays spent
// and its items stay tried, so the next run asks the outside world before
// repeating a call. It reports whether worker's run held the running job;
// anything else is left alone.
func (j *Job) Abandon(worker string, now time.Time) bool {
	if j.Status != Running || j.LeaseOwner != worker {
		return false
	}
	return j.Apply(Requeue, now) == nil
}

// Claim is a worker taking the job for one run: it starts (or resumes) the
// job, counts the attempt, leases it to worker until leaseUntil, and marks
// every unfinished item as tried. It returns which items an earlier run may
// already have sent to the external API (tried before this claim). While
// another run holds the lease (a cancelled run finishing its call before
// a retry) it returns a *LeaseHeldError and leaves j untouched.
func (j *Job) Claim(worker string, leaseUntil, now time.Time) (triedBefore []bool, err error) {
	if until, held := j.HeldBy(worker, now); held {
		return nil, &LeaseHeldError{Owner: j.LeaseOwner, Until: until}
	}
	if err := j.Apply(Start, now); err != nil {
		return nil, err
	}
	j.Attempts++
	j.LeaseOwner = worker
	until := leaseUntil.UTC()
	j.LeaseUntil = &until
	triedBefore = make([]bool, len(j.Items))
	for i := range j.Items {
		triedBefore[i] = j.Items[i].Tried
		if j.Items[i].Status != ItemPublished {
			j.Items[i].Tried = true
		}
	}
	return triedBefore, nil
}

// Snooze hands a claimed job back to wait until until without spending
// the attempt its claim counted: the run did not get to do its work (the
// circuit was open, the API said 429, the tier was paused).
func (j *Job) Snooze(reason string, until, now time.Time) error {
	if err := j.Apply(Requeue, now); err != nil {
		return err
	}
	j.Attempts = max(j.Attempts-1, 0)
	j.Snoozes++
	at := until.UTC()
	j.RetryAt = &at
	j.Phase = "waiting"
	j.SetWait(reason, &at, "", "")
	return nil
}

// RetryLater requeues a job whose run failed with a temporary error, to
// run again at until; the attempt stays spent.
func (j *Job) RetryLater(e *Error, until, now time.Time) error {
	if err := j.Apply(Requeue, now); err != nil {
		return err
	}
	j.Error = e
	at := until.UTC()
	j.RetryAt = &at
	j.Phase = "retrying"
	detail := ""
	if e != nil {
		detail = e.Message
	}
	j.SetWait(WaitBackoff, &at, detail, "")
	return nil
}

// Park makes a queued job wait in the table rather than in the queue: its
// message is to be deleted, and the release sweep sends a new one at until
// (reason says why it waits: backoff, circuit open, rate limited, paused).
// A long wait then costs no SQS receives, so it can never push the message
// into the dead-letter queue. Parking spends no attempt.
func (j *Job) Park(reason string, until, now time.Time) error {
	if j.Status != Queued {
		return &TransitionError{From: j.Status, Action: "park"}
	}
	at := until.UTC()
	j.Waiting, j.RetryAt = reason, &at
	j.UpdatedAt = now.UTC()
	// The wait keeps its reason and detail when the job parks for what it
	// already waited for (or for a message that came before its time).
	switch {
	case reason == WaitPaused:
		j.SetWait(WaitPaused, nil, "the job's tier is paused; it runs once an operator resumes it", "")
	case j.Wait != nil && (j.Wait.Reason == reason || reason == "not_due"):
		j.Wait.Until = &at
	default:
		j.SetWait(reason, &at, "", "")
	}
	if j.Phase == "queued" || j.Phase == "" {
		j.Phase = "waiting"
	}
	return nil
}

// Unpark is the release sweep sending a parked job's new message: the job
// is back in the queue from now (the sender counts the send).
func (j *Job) Unpark(now time.Time) error {
	if j.Status != Queued || j.Waiting == "" {
		return &TransitionError{From: j.Status, Action: "unpark"}
	}
	now = now.UTC()
	j.Waiting, j.RetryAt, j.Wait = "", nil, nil
	j.QueuedAt, j.StuckFrom, j.Resends = &now, nil, 0
	j.UpdatedAt = now
	return nil
}

// MaxResendDoublings caps the doubling of the interval between re-sends of
// a possibly lost message (2^10 × StuckAfter).
const MaxResendDoublings = 10

// Resend is recovery sending a queued job's message again because the last
// one may have been lost. It spends no attempt — waiting is not a run — and
// the next re-send is due only after twice the previous interval, so a job
// that merely waits in a backlog is re-sent a handful of times, never in a
// loop: after the n-th re-send at now, the next is due at
// now + stuckAfter × 2^n (the sender counts the send).
func (j *Job) Resend(stuckAfter time.Duration, now time.Time) error {
	if j.Status != Queued || j.Waiting != "" {
		return &TransitionError{From: j.Status, Action: "resend"}
	}
	now = now.UTC()
	j.Resends++
	k := min(j.Resends, MaxResendDoublings)
	from := now.Add(stuckAfter * time.Duration((1<<k)-1))
	j.StuckFrom = &from
	j.RetryAt = nil
	j.UpdatedAt = now
	return nil
}

// ErrNoAccount means a job that needs its owner's connected account
// (Job.NeedsAccount) was not created: the owner has none.
var ErrNoAccount = errors.New("no connected account")

// UploadUnavailableError means a job could not take a reference on an
// upload: there is no such upload, or it is not the job owner's, not
// confirmed, or out of its use window (expired). Which of these is for the
// caller to find out, by reading it (the kind's Explain).
type UploadUnavailableError struct{ UploadID string }

func (e *UploadUnavailableError) Error() string {
	return fmt.Sprintf("upload %s can no longer be used", e.UploadID)
}
