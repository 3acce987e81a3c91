// Package publish carries one job through its phases to the external API:
// token → download → upload → publish → succeeded. Each phase's state is
// persisted on the job, so a redelivered or retried job resumes at its first
// unfinished phase and item. Before repeating a call whose outcome was lost
// (the process died after the call returned), it asks the API what already
// happened, so no item is ever published twice.
package publish

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/conveyor/conveyor/internal/aws/bucket"
	"github.com/conveyor/conveyor/internal/deviantart"
	"github.com/conveyor/conveyor/internal/job"
	"github.com/conveyor/conveyor/internal/kind"
	"github.com/conveyor/conveyor/internal/resources"
	"github.com/conveyor/conveyor/internal/retry"
	"github.com/conveyor/conveyor/internal/store"
)

// API is the external publishing API (deviantart.Client, possibly behind
// the circuit breaker).
type API interface {
	Submit(ctx context.Context, accessToken string, s deviantart.Submission) (int64, error)
	Publish(ctx context.Context, accessToken string, itemID int64) (deviantart.Deviation, error)
	Item(ctx context.Context, accessToken string, itemID int64) (deviantart.StashItem, error)
	FindByStack(ctx context.Context, accessToken, stack string) (deviantart.StashItem, bool, error)
}

// Tokens hands out a valid access token for a user's connected account,
// refreshing (serialised per account) when it expired.
type Tokens interface {
	AccessToken(ctx context.Context, owner string) (string, error)
	// ForceRefresh returns a token other than rejected, which the API
	// just refused with 401, refreshing if nobody has yet.
	ForceRefresh(ctx context.Context, owner, rejected string) (string, error)
}

// Objects streams the items' uploaded objects (bucket.Bucket).
type Objects interface {
	// Get streams key's object as o narrows it: bucket.ErrNotFound when
	// it (or its version) is gone, bucket.ErrPreconditionFailed when it is
	// not the one o.IfMatch names.
	Get(ctx context.Context, key string, o bucket.GetOptions) (io.ReadCloser, bucket.Object, error)
}

// Crash points: a test hook may fail the run at each of them, the way a
// process dies between two steps.
const (
	AfterClaim   = "after-claim"
	AfterToken   = "after-token"
	AfterSubmit  = "after-submit"  // the API returned the itemid, nothing persisted yet
	AfterUpload  = "after-upload"  // the itemid is persisted, or (the last item to upload) held for the publish write
	AfterPublish = "after-publish" // the API published, nothing persisted yet
	AfterItem    = "after-item"    // the item's output is persisted
	BeforeFinish = "before-finish"
)

// ErrCrash is what a crash hook returns; the run stops as if killed.
var ErrCrash = errors.New("injected crash")

// Config configures a Publisher.
type Config struct {
	Store *store.Store
	// Objects is the upload bucket the items' images are read from.
	Objects Objects
	Tokens  Tokens
	API     API
	// Policy decides retries (backoff, attempts).
	Policy retry.Policy
	// Heartbeat is how often a running job's heartbeat is written (default 30s).
	Heartbeat time.Duration
	// Worker names this instance in leases (default a random id).
	Worker string
	// Now defaults to time.Now.
	Now func() time.Time
	// Logger defaults to slog.Default().
	Logger *slog.Logger
	// Crash, when set, is called at each crash point; a non-nil return
	// aborts the run without any further write (tests only).
	Crash func(point string, j *job.Job) error
	// MaxReceives is the queues' maxReceiveCount (default
	// resources.DefaultMaxReceiveCount): a job that must wait parks in the
	// table before its message gets near the dead-letter queue.
	MaxReceives int
	// Kinds are the kinds of job the run loop runs (default: publish
	// alone). A job of a kind not in it fails, permanently.
	Kinds *kind.Registry
	// Provider is the external provider whose connected account a publish
	// job needs (default "deviantart").
	Provider string
	// CallTimeout is the deadline of one call to the external API sending
	// size bytes (deviantart.Client.Timeout); a run holds the job's lease
	// for at least that long before each call (default: half the lease).
	CallTimeout func(size int64) time.Duration
	// DeadlineMargin is what a run leaves of its invocation: the work runs
	// under the context's deadline less this margin, and a call that could
	// not end before then is not started (default DeadlineMarginDefault).
	DeadlineMargin time.Duration
	// InvocationTimeout is the longest an invocation lasts (the function's
	// timeout; default resources.ConsumerTimeout). A call that could not
	// end within a whole invocation is started anyway (bounded by the
	// invocation), since handing it back could never help.
	InvocationTimeout time.Duration
	// HandBack is how soon a job handed back for lack of time, or because
	// the run before still holds it, is delivered again (default 1s).
	HandBack time.Duration
}

// DeadlineMarginDefault is Config.DeadlineMargin's default: time to record
// what the last call did and answer the queue.
const DeadlineMarginDefault = 10 * time.Second

// Publisher runs jobs: the run loop (claim, lease and heartbeat, the
// outcome recorded through the retry policy) of every kind in
// Config.Kinds, and the publish kind's own phases (Kind).
type Publisher struct{ cfg Config }

// New returns a Publisher.
func New(cfg Config) *Publisher {
	if cfg.Heartbeat == 0 {
		cfg.Heartbeat = 30 * time.Second
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Worker == "" {
		cfg.Worker = fmt.Sprintf("w-%d", time.Now().UnixNano())
	}
	if cfg.MaxReceives == 0 {
		cfg.MaxReceives = resources.DefaultMaxReceiveCount
	}
	if cfg.Provider == "" {
		cfg.Provider = "deviantart"
	}
	if cfg.DeadlineMargin == 0 {
		cfg.DeadlineMargin = DeadlineMarginDefault
	}
	if cfg.InvocationTimeout == 0 {
		cfg.InvocationTimeout = resources.ConsumerTimeout
	}
	if cfg.HandBack == 0 {
		cfg.HandBack = time.Second
	}
	p := &Publisher{cfg: cfg}
	if p.cfg.Kinds == nil {
		p.cfg.Kinds = kind.NewRegistry(p.Kind())
	}
	return p
}

// Verdict tells the queue consumer what to do with the message.
type Verdict struct {
	// Done: delete the message (the job finished, or the message is moot).
	Done bool
	// RetryIn: leave the message and make it visible again after this long.
	RetryIn time.Duration
	// Reason is for logs.
	Reason string
}

// leaseFor is how long a claim holds without a heartbeat.
func (p *Publisher) leaseFor() time.Duration { return 3 * p.cfg.Heartbeat }

// callTimeout is the deadline of one external call sending size bytes.
func (p *Publisher) callTimeout(size int64) time.Duration {
	if p.cfg.CallTimeout != nil {
		return p.cfg.CallTimeout(size)
	}
	return p.leaseFor() / 2
}

// budgetEnd is when the work of a run started under ctx must end: the
// invocation's deadline less the margin (zero: ctx has no deadline).
func (p *Publisher) budgetEnd(ctx context.Context) time.Time {
	d, ok := ctx.Deadline()
	if !ok {
		return time.Time{}
	}
	return d.Add(-p.cfg.DeadlineMargin)
}

// outOfTime reports whether a call taking need cannot end before end (the
// run's budget, zero for none) and could in a fresh invocation: only then
// is handing it back of use.
func (p *Publisher) outOfTime(end time.Time, need time.Duration) bool {
	return !end.IsZero() && time.Now().Add(need).After(end) && need <= p.cfg.InvocationTimeout-p.cfg.DeadlineMargin
}

// heldWait is how long a delivery for a job another run still holds waits:
// until the lease ends at the latest, sooner (HandBack to a heartbeat) as
// that run usually releases the job when its call returns.
func (p *Publisher) heldWait(until, now time.Time, receives int) time.Duration {
	left := until.Sub(now)
	if receives+2 >= p.cfg.MaxReceives {
		return max(left, p.cfg.HandBack)
	}
	return min(max(left, p.cfg.HandBack), max(p.cfg.Heartbeat, p.cfg.HandBack))
}

// Delivery is one message for a job, as the queue handed it over.
type Delivery struct {
	// JobID is the job the message names.
	JobID string
	// Receives is the message's ApproximateReceiveCount (0 if unknown).
	Receives int
	// Owner is the job's owner as the message names it (queue.Message's
	// owner; empty in messages sent before it was added). When set, the
	// job and the owner's connected account are read in one request.
	Owner string
	// Uploads are the uploads the message names (queue.Message.Uploads):
	// read in that same request, they describe the job's items.
	Uploads []string
}

// AccountTokens is what Tokens may also do: hand out a token from an
// account the caller has just read with a strongly consistent read,
// without reading it again (accounts.Service).
type AccountTokens interface {
	AccessTokenFrom(ctx context.Context, a store.Account) (string, error)
}

// Run processes a delivery of job id once: claims the job, runs its
// unfinished phases, and records the outcome. A job that must wait long
// (or whose message nears the DLQ) is parked in the table and its message
// let go. A run whose outcome could not be recorded gives the job back to
// the queue, claimable at once, and its message comes back after HandBack
// (after the run's lease, when not even that could be written). The error
// is non-nil only when the job could not be read or claimed, or the run
// crashed (a test's crash hook): the message must then come back.
func (p *Publisher) Run(ctx context.Context, d Delivery) (Verdict, error) {
	id := d.JobID
	log := p.cfg.Logger.With("job_id", id, "worker", p.cfg.Worker)
	j, acct, err := p.load(ctx, d)
	if errors.Is(err, store.ErrNotFound) {
		log.WarnContext(ctx, "message for an unknown job dropped")
		return Verdict{Done: true, Reason: "unknown job"}, nil
	}
	if err != nil {
		return Verdict{}, err
	}
	now := p.cfg.Now()
	switch {
	case j.Status == job.Queued && j.Waiting != "" && j.RetryAt != nil && j.RetryAt.After(now):
		// A leftover message of a parked job: the release sweep sends a
		// fresh one when it is due.
		return Verdict{Done: true, Reason: "waiting in the table"}, nil
	case j.Status == job.Queued && j.RetryAt != nil && j.RetryAt.After(now):
		wait := j.RetryAt.Sub(now)
		if p.cfg.Policy.Park(wait, d.Receives, p.cfg.MaxReceives) {
			return p.park(ctx, log, id, "not_due", *j.RetryAt)
		}
		return Verdict{RetryIn: wait, Reason: "backing off"}, nil
	case j.Status == job.Running && j.LeaseUntil != nil && j.LeaseUntil.After(now):
		return Verdict{Done: true, Reason: "running elsewhere"}, nil
	case j.Status != job.Queued && j.Status != job.Running:
		return p.settleFinished(ctx, log, j, d), nil
	}
	if until, held := j.HeldBy(p.cfg.Worker, now); held {
		// A cancelled or stopped run is finishing its last call: the
		// retry waits until it released the job or its lease ended,
		// spending nothing.
		return Verdict{RetryIn: p.heldWait(until, now, d.Receives), Reason: "the previous run still holds the job"}, nil
	}
	end := p.budgetEnd(ctx)
	k, known := p.cfg.Kinds.Get(j.Type)
	if b, ok := k.(kind.Budgeter); known && ok && p.outOfTime(end, b.NextCall(j)) {
		// Its next call would outlive the invocation: not started, handed
		// back at once, no attempt spent (nothing was claimed).
		if p.cfg.Policy.Park(p.cfg.HandBack, d.Receives, p.cfg.MaxReceives) {
			return p.park(ctx, log, id, "deadline", now)
		}
		return Verdict{RetryIn: p.cfg.HandBack, Reason: "not enough time left in this invocation"}, nil
	}
	tried, err := j.Claim(p.cfg.Worker, now.Add(p.leaseFor()), now)
	if err != nil {
		return Verdict{Done: true, Reason: err.Error()}, nil
	}
	switch err := p.cfg.Store.ClaimJob(ctx, &j); {
	case errors.Is(err, store.ErrPaused):
		// Paused before this claim: the job waits for the resume, in the
		// table; the release sweep sends it once the tier runs again.
		return p.park(ctx, log, id, "paused", now)
	case errors.Is(err, store.ErrConflict):
		return Verdict{Done: true, Reason: "claimed by another worker"}, nil
	case err != nil:
		return Verdict{}, err
	}
	log = log.With("attempt", j.Attempts, "tier", j.Tier)
	log.InfoContext(ctx, "job started", "resumed", slices.Contains(tried, true))
	if err := p.crash(AfterClaim, &j); err != nil {
		return Verdict{}, err
	}

	r := &run{p: p, log: log, tried: tried, receives: d.Receives, account: acct, end: end}
	r.job = j
	r.noteLease()
	hbCtx, stopHB := context.WithCancel(ctx)
	// The work ends with the budget; what is left of the invocation
	// records the outcome.
	workCtx, cancelWork := context.WithCancel(ctx)
	if !end.IsZero() {
		workCtx, cancelWork = context.WithDeadline(ctx, end)
	}
	var hb sync.WaitGroup
	hb.Go(func() { r.heartbeat(hbCtx) })
	if known {
		err = k.Work(workCtx, r)
	} else {
		err = retry.Permanent(fmt.Errorf("no kind %q is registered with this worker", j.Type))
	}
	stopHB()
	hb.Wait()
	cancelWork()
	if errors.Is(err, ErrCrash) {
		return Verdict{}, err
	}
	if errors.Is(err, errLostLease) {
		return r.unrecorded(ctx, err)
	}
	if errors.Is(err, kind.ErrOutOfTime) {
		return r.handBack(ctx)
	}
	if err == nil {
		return Verdict{Done: true, Reason: "succeeded"}, nil
	}
	return r.settleFailure(ctx, err)
}

// release lets go of the job when r's run ends without recording an
// outcome, so that the next run may claim it at once instead of waiting
// for r's lease to lapse, with what r learnt of its calls and had not
// written yet (an uploaded item's stash id):
//   - a job that stopped being r's (a cancel or a stop kept r's lease while
//     r finished its call) is released (job.Release);
//   - a job still running under r's lease, whose outcome r could not write
//     (the table failed, or the invocation's time ran out), goes back to
//     the queue (job.Abandon): requeued reports it, and the message must
//     then come back, the job has no other.
//
// Nothing is written when r no longer holds the job. ok reports that r
// does not hold it any more (let go now, or before); false, the write
// failed. The write does not end with ctx: it is what is left to do when
// ctx ended.
func (p *Publisher) release(ctx context.Context, r *run) (requeued, ok bool) {
	r.mu.Lock()
	held := slices.Clone(r.unsaved)
	r.mu.Unlock()
	_, err := p.cfg.Store.UpdateJob(context.WithoutCancel(ctx), r.job.ID, func(j *job.Job) error {
		requeued = false
		if j.LeaseOwner != p.cfg.Worker {
			return errNothing
		}
		// Facts the run learnt and had not written yet (an uploaded
		// item's stash id) go with the release.
		for _, f := range held {
			f(j)
		}
		if j.Abandon(p.cfg.Worker, p.cfg.Now()) {
			requeued = true
			return nil
		}
		j.Release(p.cfg.Worker, p.cfg.Now())
		return nil
	})
	switch {
	case err == nil && requeued:
		return true, true
	case err == nil:
		r.log.InfoContext(ctx, "job released by the run it stopped being")
		return false, true
	case errors.Is(err, errNothing), errors.Is(err, store.ErrNotFound):
		return false, true // not r's any more (taken over, requeued by recovery), or gone
	}
	r.log.WarnContext(ctx, "releasing the job failed; its lease lapses instead", "error", err)
	return false, false
}

// unrecorded answers the queue for a run that ends without recording its
// outcome: it lost the job (err is errLostLease), or the write of its
// outcome failed (err says why). The job is let go (release) and the
// message deleted, or, when the job went back to the queue, delivered
// again after HandBack. When not even that could be written (the table
// unreachable), r's lease is left to lapse and the message comes back
// only after it, to take the job over: a delivery before would find the
// job running under the lease, and be dropped.
func (r *run) unrecorded(ctx context.Context, err error) (Verdict, error) {
	requeued, ok := r.p.release(ctx, r)
	switch {
	case requeued:
		r.log.WarnContext(ctx, "the run's outcome could not be recorded; the job is back in the queue", "error", err)
		return Verdict{RetryIn: r.p.cfg.HandBack, Reason: "outcome not recorded; job requeued"}, nil
	case ok || errors.Is(err, errLostLease):
		return Verdict{Done: true, Reason: "job changed under the worker (cancelled or taken over)"}, nil
	}
	r.mu.Lock()
	until := r.leased
	r.mu.Unlock()
	wait := max(r.p.cfg.HandBack, until.Sub(r.p.cfg.Now())+r.p.cfg.Heartbeat)
	r.log.ErrorContext(ctx, "the run's outcome could not be recorded, nor the job let go; the next delivery takes it over once the lease lapsed",
		"error", err, "retry_in", wait.String())
	return Verdict{RetryIn: wait, Reason: "outcome not recorded; back once the lease lapsed"}, nil
}

// errNothing aborts an update that has nothing to write.
var errNothing = errors.New("nothing to write")

// handBack gives a claimed job back because the invocation has no time
// left for its next call: requeued at once, the attempt its claim counted
// undone (job.Snooze), and the message made visible again after HandBack
// (or parked when it nears the dead-letter queue).
func (r *run) handBack(ctx context.Context) (Verdict, error) {
	p := r.p
	now := p.cfg.Now()
	verdict := Verdict{RetryIn: p.cfg.HandBack, Reason: "handed back: not enough time left in this invocation"}
	err := r.save(ctx, func(j *job.Job) {
		_ = j.Snooze("deadline", now.Add(p.cfg.HandBack), now)
		j.Phase = "queued"
		if p.cfg.Policy.Park(p.cfg.HandBack, r.receives, p.cfg.MaxReceives) {
			_ = j.Park("deadline", now.Add(p.cfg.HandBack), now)
			verdict = Verdict{Done: true, Reason: verdict.Reason + "; parked"}
		}
	})
	if err != nil {
		if !errors.Is(err, errLostLease) {
			err = fmt.Errorf("handing job %s back: %w", r.job.ID, err)
		}
		return r.unrecorded(ctx, err)
	}
	r.log.InfoContext(ctx, "job handed back: its next call would outlive the invocation", "retry_in", p.cfg.HandBack.String())
	return verdict, nil
}

// load reads the delivery's job with its items described (their uploads
// read with it) and, when the message names the owner and the Tokens can use
// it, the owner's account with it: one request, and the token phase then
// needs no read of its own.
func (p *Publisher) load(ctx context.Context, d Delivery) (job.Job, *store.Account, error) {
	if _, ok := p.cfg.Tokens.(AccountTokens); !ok || d.Owner == "" {
		j, err := p.cfg.Store.GetJob(ctx, d.JobID)
		if err != nil {
			return j, nil, err
		}
		return j, nil, p.cfg.Store.DescribeItems(ctx, &j, nil)
	}
	return p.cfg.Store.GetJobAndAccount(ctx, d.JobID, d.Owner, p.cfg.Provider, d.Uploads)
}

// settleFinished answers a message for a job that will not run again. If
// an earlier run may have reached the API without recording what happened,
// it asks the API first (reconcile); when the API cannot be asked, the
// message comes back (short of the DLQ); past that the items keep "tried",
// so a retry by the owner asks again.
//
// While the job's last run still holds it (a cancel or a stop keeps the
// lease until that run has finished its call), the message waits: that run
// records what its call did and releases the job; what it could not learn
// is asked of the API once it is gone.
func (p *Publisher) settleFinished(ctx context.Context, log *slog.Logger, j job.Job, d Delivery) Verdict {
	k, _ := p.cfg.Kinds.Get(j.Type)
	rec, ok := k.(kind.Reconciler)
	if !ok || !j.Unsettled() {
		return Verdict{Done: true, Reason: "job is " + string(j.Status)}
	}
	now := p.cfg.Now()
	if until, held := j.HeldBy(p.cfg.Worker, now); held {
		return Verdict{RetryIn: p.heldWait(until, now, d.Receives), Reason: "the cancelled run still holds the job"}
	}
	if err := rec.Reconcile(ctx, j); err != nil && d.Receives+1 < p.cfg.MaxReceives {
		return Verdict{RetryIn: p.cfg.Policy.Backoff(max(d.Receives, 1)), Reason: "reconciling: " + err.Error()}
	}
	return Verdict{Done: true, Reason: "job is " + string(j.Status)}
}

// park moves a queued job to wait in the table until until (job.Park) and
// lets its message go. If the job changed meanwhile, the message is moot
// or another delivery handles it.
func (p *Publisher) park(ctx context.Context, log *slog.Logger, id, reason string, until time.Time) (Verdict, error) {
	_, err := p.cfg.Store.UpdateJob(ctx, id, func(j *job.Job) error {
		return j.Park(reason, until, p.cfg.Now())
	})
	var te *job.TransitionError
	switch {
	case errors.As(err, &te), errors.Is(err, store.ErrNotFound):
		return Verdict{Done: true, Reason: "job changed meanwhile"}, nil
	case err != nil:
		return Verdict{}, err
	}
	log.InfoContext(ctx, "job parked until it is due", "reason", reason, "until", until)
	return Verdict{Done: true, Reason: "parked: " + reason}, nil
}

// reconcile asks the API what became of a finished job's unsettled items
// and records it on them, so that a publication that happened is never
// lost, whatever the job's status. When the API cannot be asked, the job
// stays as it is (its items keep "tried", so a later delivery or a retry
// asks again) and the error is returned.
func (p *Publisher) reconcile(ctx context.Context, log *slog.Logger, j job.Job) error {
	token, err := p.cfg.Tokens.AccessToken(ctx, j.Owner)
	if err != nil {
		log.WarnContext(ctx, "could not ask the API about a finished job's items", "error", err)
		return err
	}
	type fact struct {
		stash int64
		out   *job.Output
	}
	facts := map[string]fact{}
	for _, it := range j.Items {
		if !it.Tried || it.Status == job.ItemPublished {
			continue
		}
		id := it.StashItemID
		if id == 0 {
			found, ok, err := p.cfg.API.FindByStack(ctx, token, it.ID)
			if err != nil {
				log.WarnContext(ctx, "could not ask the API about an item", "item_id", it.ID, "error", err)
				return err
			}
			if !ok {
				facts[it.ID] = fact{}
				continue
			}
			id = found.ItemID
		}
		st, err := p.cfg.API.Item(ctx, token, id)
		if err != nil {
			log.WarnContext(ctx, "could not ask the API about an item", "item_id", it.ID, "error", err)
			return err
		}
		f := fact{stash: id}
		if st.Published {
			f.out = &job.Output{DeviationID: st.DeviationID, URL: st.URL}
		}
		facts[it.ID] = f
	}
	_, err = p.cfg.Store.UpdateJob(ctx, j.ID, func(cur *job.Job) error {
		for i := range cur.Items {
			it := &cur.Items[i]
			f, ok := facts[it.ID]
			if !ok || it.Status == job.ItemPublished {
				continue
			}
			if f.stash != 0 && it.StashItemID == 0 {
				it.StashItemID = f.stash
				if it.Status == job.ItemPending {
					it.Status = job.ItemUploaded
				}
			}
			if f.out != nil {
				it.Status, it.Output, it.Error = job.ItemPublished, f.out, nil
			}
			it.Tried = false // what happened is recorded
		}
		return nil
	})
	if err != nil {
		log.WarnContext(ctx, "recording what the API did for a finished job failed", "error", err)
		return err
	}
	log.InfoContext(ctx, "recorded what an interrupted run did for a finished job", "items", len(facts))
	return nil
}

func (p *Publisher) crash(point string, j *job.Job) error {
	if p.cfg.Crash == nil {
		return nil
	}
	if err := p.cfg.Crash(point, j); err != nil {
		return fmt.Errorf("%w at %s: %v", ErrCrash, point, err)
	}
	return nil
}

// errLostLease is kind.ErrLostJob: Hold and save return it once the job
// stopped being the run's.
var errLostLease = kind.ErrLostJob

// run is one attempt at one job.
type run struct {
	p   *Publisher
	log *slog.Logger
	// tried says, per item, whether an earlier run may have reached the
	// external API for it (job.Claim): only then are lookups needed.
	tried []bool
	// receives is the delivery's receive count (see Policy.Park).
	receives int
	mu       sync.Mutex // guards job against the heartbeat
	job      job.Job
	// token is the access token the run calls the API with; reauthed says
	// whether a 401 has already forced a refresh in this run.
	token    string
	reauthed bool
	// account is the owner's account as read with the job (nil when it
	// was not): the first access token comes from it, with no read.
	account *store.Account
	// end is when the run's work must end (the invocation's deadline less
	// the margin; zero: no deadline).
	end time.Time
	// lost is set once the run learnt that the job stopped being its own:
	// no call is made after that (Hold).
	lost bool
	// unsaved are facts about the outside world (an uploaded item's stash
	// id) already applied to job but not yet written: the next write
	// carries them (the post-upload write folded into the publish write).
	// save re-applies them when a conflict makes it re-read the job, and
	// record's fallback writes them too (a record whose save failed adds
	// its facts here). Until they are written, a
	// crash leaves the item "tried", so the next run asks the API (by
	// stack) before submitting: nothing is uploaded twice.
	unsaved []func(*job.Job)
	// leased is the latest end of the job's lease this run has read or
	// tried to write (a write that failed may have landed): until then,
	// a delivery finds the job running elsewhere.
	leased time.Time
}

// authed calls the API through call with the run's access token. The API
// may refuse a token before its stated expiry (revoked, rotated by a
// reconnect elsewhere): the first 401 of a run forces one refresh and one
// retry with the new token; a second 401 is returned as it is.
func (r *run) authed(ctx context.Context, owner string, call func(token string) error) error {
	err := call(r.token)
	var sc interface{ StatusCode() int }
	if err == nil || r.reauthed || !errors.As(err, &sc) || sc.StatusCode() != http.StatusUnauthorized {
		return err
	}
	r.reauthed = true
	r.log.InfoContext(ctx, "the API refused the access token; refreshing it once")
	tok, ferr := r.p.cfg.Tokens.ForceRefresh(ctx, owner, r.token)
	if ferr != nil {
		return ferr
	}
	r.token = tok
	return call(tok)
}

// record persists facts about the outside world (what the external API
// did for an item) together with this run's mutate. If that save fails —
// the job stopped being this run's meanwhile (cancelled, stopped, taken
// over: errLostLease), or the store failed — the facts are still written
// on the job as it is now, so a publication that happened is never
// dropped; the save's error is returned.
func (r *run) record(ctx context.Context, facts, mutate func(*job.Job)) error {
	err := r.save(ctx, func(j *job.Job) { facts(j); mutate(j) })
	if err == nil {
		return nil
	}
	// The failed save left the job as last saved: the facts stay on it,
	// unsaved, for whatever the run writes next (the failure, a release).
	r.mu.Lock()
	facts(&r.job)
	r.unsaved = append(r.unsaved, facts)
	held := slices.Clone(r.unsaved)
	r.mu.Unlock()
	_, uerr := r.p.cfg.Store.UpdateJob(context.WithoutCancel(ctx), r.job.ID, func(j *job.Job) error {
		for _, f := range held {
			f(j)
		}
		if errors.Is(err, errLostLease) {
			// What the run's last call did is recorded: the job may go.
			j.Release(r.p.cfg.Worker, r.p.cfg.Now())
		}
		return nil
	})
	if uerr != nil {
		r.log.ErrorContext(ctx, "recording what the API did on a job that changed meanwhile failed", "error", uerr)
	}
	return err
}

// save persists the in-memory job. On a version conflict (the heartbeat or
// a user wrote meanwhile) it re-reads: if the job is still ours and
// running, mutate is applied again to the fresh copy and saved. When it
// fails, the in-memory job is left as it was before (as last saved, with
// the unsaved facts): what comes next — the failure's record, a release —
// starts from what the table holds, not from a change that was not
// written (a success whose write failed is not a success).
func (r *run) save(ctx context.Context, mutate func(*job.Job)) (err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	before := cloneJob(r.job)
	defer func() {
		if err != nil {
			r.job = before
		}
	}()
	mutate(&r.job)
	r.noteLease()
	r.job.UpdatedAt = r.p.cfg.Now().UTC()
	for range 5 {
		err := r.p.cfg.Store.SaveJob(ctx, &r.job)
		if err == nil {
			r.unsaved = nil
		}
		if !errors.Is(err, store.ErrConflict) {
			return err
		}
		fresh, err := r.p.cfg.Store.GetJob(ctx, r.job.ID)
		if err != nil {
			return err
		}
		if fresh.Status != job.Running || fresh.LeaseOwner != r.p.cfg.Worker {
			r.lost = true
			return errLostLease
		}
		r.job = fresh
		r.noteLease()
		for _, f := range r.unsaved {
			f(&r.job)
		}
		mutate(&r.job)
		r.noteLease()
		r.job.UpdatedAt = r.p.cfg.Now().UTC()
	}
	return fmt.Errorf("saving job %s: %w", r.job.ID, store.ErrConflict)
}

// cloneJob returns a copy of j that shares nothing a mutation writes
// through (slices' elements, the wait and the error).
func cloneJob(j job.Job) job.Job {
	j.Phases, j.Items, j.Pending, j.MediaRefs = slices.Clone(j.Phases), slices.Clone(j.Items), slices.Clone(j.Pending), slices.Clone(j.MediaRefs)
	if j.Wait != nil {
		w := *j.Wait
		j.Wait = &w
	}
	if j.Error != nil {
		e := *j.Error
		j.Error = &e
	}
	return j
}

// noteLease keeps the job's lease end in leased when it is the latest
// yet; the caller holds mu (or the run is not shared yet).
func (r *run) noteLease() {
	if u := r.job.LeaseUntil; u != nil && u.After(r.leased) {
		r.leased = *u
	}
}

// accessToken returns an access token for owner: the first from the
// account read with the job, when it was, the others as Tokens gives them.
func (r *run) accessToken(ctx context.Context, owner string) (string, error) {
	a := r.account
	r.account = nil
	if at, ok := r.p.cfg.Tokens.(AccountTokens); ok && a != nil && a.Owner == owner {
		return at.AccessTokenFrom(ctx, *a)
	}
	return r.p.cfg.Tokens.AccessToken(ctx, owner)
}

// snapshot returns a copy of the job for reading outside the lock.
func (r *run) snapshot() job.Job {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.job
}

// heartbeat refreshes the job's heartbeat and lease until ctx ends; if the
// job stops being ours (cancelled, taken over), it stops, and Hold refuses
// every further call. A call in flight is not cut: its outcome would be
// unknown, and the lease a cancel keeps covers it until it returns.
func (r *run) heartbeat(ctx context.Context) {
	t := time.NewTicker(r.p.cfg.Heartbeat)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			err := r.save(ctx, func(j *job.Job) {
				now := r.p.cfg.Now().UTC()
				until := now.Add(r.p.leaseFor())
				if j.LeaseUntil != nil && j.LeaseUntil.After(until) {
					until = *j.LeaseUntil // extended for a long call (Hold)
				}
				j.HeartbeatAt, j.LeaseUntil = &now, &until
			})
			if errors.Is(err, errLostLease) {
				r.log.WarnContext(ctx, "job changed under the worker; no further call")
				return
			}
			if err != nil && ctx.Err() == nil {
				r.log.WarnContext(ctx, "heartbeat failed", "error", err)
			}
		}
	}
}

// phases runs every unfinished phase and item, then succeeds the job.
func (r *run) phases(ctx context.Context) error {
	j := r.snapshot()
	if err := r.tokenPhase(ctx, &j); err != nil {
		return err
	}
	if err := r.uploadPhase(ctx, &j); err != nil {
		return err
	}
	if done, err := r.publishPhase(ctx, &j); done || err != nil {
		return err
	}
	// Every item was already published (a resumed job): finish.
	if err := r.p.crash(BeforeFinish, &j); err != nil {
		return err
	}
	if err := r.save(ctx, r.finish); err != nil {
		return err
	}
	r.log.InfoContext(ctx, "job succeeded")
	return nil
}

// tokenPhase gets the access token the external calls use.
func (r *run) tokenPhase(ctx context.Context, j *job.Job) error {
	now := r.p.cfg.Now
	r.mu.Lock()
	r.job.StartPhase(PhaseToken, "getting an access token", now())
	r.mu.Unlock()
	token, err := r.accessToken(ctx, j.Owner)
	if err != nil {
		return r.phaseErr(ctx, PhaseToken, err)
	}
	r.token = token
	r.mu.Lock()
	r.job.CompletePhase(PhaseToken, "access token ready", now())
	r.mu.Unlock()
	return r.p.crash(AfterToken, j)
}

// uploadPhase uploads the pending items one by one (each download streams
// into its upload), then completes the download and upload phases and
// starts the publish phase.
func (r *run) uploadPhase(ctx context.Context, j *job.Job) error {
	now := r.p.cfg.Now
	total := len(j.Items)
	for i := range j.Items {
		if err := r.uploadItem(ctx, j, i); err != nil {
			return err
		}
	}
	r.mu.Lock()
	r.job.CompletePhase(PhaseDownload, fmt.Sprintf("%d of %d items", total, total), now())
	r.job.CompletePhase(PhaseUpload, fmt.Sprintf("%d of %d items", total, total), now())
	r.job.StartPhase(PhasePublish, "publishing", now())
	r.mu.Unlock()
	return nil
}

// uploadItem uploads item i when it is still pending and records it
// uploaded, with the phases' progress.
func (r *run) uploadItem(ctx context.Context, j *job.Job, i int) error {
	p, now, total := r.p, r.p.cfg.Now, len(j.Items)
	it := r.snapshot().Items[i]
	if it.Status != job.ItemPending {
		return nil
	}
	r.mu.Lock()
	r.job.StartPhase(PhaseDownload, fmt.Sprintf("item %d of %d", i+1, total), now())
	r.job.StartPhase(PhaseUpload, fmt.Sprintf("item %d of %d", i+1, total), now())
	r.mu.Unlock()
	var itemID int64
	err := r.authed(ctx, j.Owner, func(token string) (err error) {
		itemID, err = r.upload(ctx, token, *j, it, r.tried[i])
		return err
	})
	if err != nil {
		return r.itemErr(ctx, PhaseUpload, i, err)
	}
	if err := p.crash(AfterSubmit, j); err != nil {
		return err
	}
	done := countItems(r.snapshot(), i, job.ItemUploaded, job.ItemPublished)
	uploaded := func(j *job.Job) {
		if j.Items[i].Status == job.ItemPending {
			j.Items[i].StashItemID, j.Items[i].Status = itemID, job.ItemUploaded
		}
	}
	progress := func(j *job.Job) {
		pct := done * 100 / total
		msg := fmt.Sprintf("%d of %d items", done, total)
		j.SetPhaseProgress(PhaseDownload, pct, msg)
		j.SetPhaseProgress(PhaseUpload, pct, msg)
		if done == total {
			// Persisted, and their events emitted, with the next write.
			j.CompletePhase(PhaseDownload, msg, now())
			j.CompletePhase(PhaseUpload, msg, now())
		}
		j.Emit(job.EventProgress, now(), map[string]string{"phase": PhaseUpload, "items": msg})
	}
	if lastPending(r.snapshot(), i) {
		// The last upload: its write is folded into the next one (the
		// publish, or the failure), a round trip less per job. A crash
		// before that write leaves the item tried, and the next run
		// finds the stash item by its stack instead of submitting again.
		r.mu.Lock()
		uploaded(&r.job)
		progress(&r.job)
		r.unsaved = append(r.unsaved, uploaded)
		r.mu.Unlock()
	} else if err := r.record(ctx, uploaded, progress); err != nil {
		return err
	}
	return p.crash(AfterUpload, j)
}

// publishPhase publishes the uploaded items one by one; done reports that
// the last one was published and the job succeeded with it.
func (r *run) publishPhase(ctx context.Context, j *job.Job) (done bool, err error) {
	p, total := r.p, len(j.Items)
	for i := range j.Items {
		it := r.snapshot().Items[i]
		if it.Status != job.ItemUploaded {
			continue
		}
		var dev deviantart.Deviation
		err := r.authed(ctx, j.Owner, func(token string) (err error) {
			dev, err = r.publish(ctx, token, it, r.tried[i])
			return err
		})
		if err != nil {
			return false, r.itemErr(ctx, PhasePublish, i, err)
		}
		if err := p.crash(AfterPublish, j); err != nil {
			return false, err
		}
		last := countItems(r.snapshot(), i, job.ItemPublished) == total
		if err := r.record(ctx, func(j *job.Job) {
			if out := j.Items[i].Output; out != nil && out.DeviationID != dev.ID {
				// Never overwritten: a second deviation would be a
				// double publication, and the first one stays the item's.
				r.log.ErrorContext(ctx, "item already has another output; keeping it", "item_id", j.Items[i].ID, "kept", out.DeviationID, "other", dev.ID)
				return
			}
			j.Items[i].Status, j.Items[i].Error = job.ItemPublished, nil
			j.Items[i].Output = &job.Output{DeviationID: dev.ID, URL: dev.URL}
		}, func(j *job.Job) {
			done := 0
			for _, it := range j.Items {
				if it.Status == job.ItemPublished {
					done++
				}
			}
			j.SetPhaseProgress(PhasePublish, done*100/total, fmt.Sprintf("%d of %d items", done, total))
			if last {
				r.finish(j)
			}
		}); err != nil {
			return false, err
		}
		if err := p.crash(AfterItem, j); err != nil {
			return false, err
		}
		if last {
			r.log.InfoContext(ctx, "job succeeded")
			return true, nil
		}
	}
	return false, nil
}

// finish moves the job to succeeded with its result.
func (r *run) finish(j *job.Job) {
	now := r.p.cfg.Now()
	j.CompletePhase(PhasePublish, fmt.Sprintf("%d of %d items", len(j.Items), len(j.Items)), now)
	if len(j.Items) > 0 && j.Items[0].Output != nil {
		if d, err := job.DocOf(j.Items[0].Output); err == nil {
			j.Result = d
		}
	}
	j.Error = nil
	_ = j.Apply(job.Succeed, now)
}

// lastPending reports whether item i is the last item of j still to upload.
func lastPending(j job.Job, i int) bool {
	for k := i + 1; k < len(j.Items); k++ {
		if j.Items[k].Status == job.ItemPending {
			return false
		}
	}
	return true
}

// countItems counts items in one of statuses, counting item i as if it had
// reached the first of them.
func countItems(j job.Job, i int, statuses ...job.ItemStatus) int {
	n := 0
	for k, it := range j.Items {
		if k == i {
			n++
			continue
		}
		for _, s := range statuses {
			if it.Status == s {
				n++
				break
			}
		}
	}
	return n
}

// upload streams the item's object from S3 into stash/submit. On a resumed
// job it first asks the API whether an earlier attempt already submitted
// the item (the stack is named by the item id).
func (r *run) upload(ctx context.Context, token string, j job.Job, it job.Item, tried bool) (int64, error) {
	if tried {
		found, ok, err := r.p.cfg.API.FindByStack(ctx, token, it.ID)
		if err != nil {
			return 0, err
		}
		if ok {
			r.log.InfoContext(ctx, "item was already submitted by an earlier attempt", "item_id", it.ID)
			return found.ItemID, nil
		}
	}
	var params Params
	if err := j.Params.Decode(&params); err != nil {
		return 0, retry.Permanent(fmt.Errorf("reading the job's params: %w", err))
	}
	if it.Key == "" {
		// The worker's read found no upload record to describe the item:
		// it is gone (retention), and its object with it.
		return 0, retry.Permanent(fmt.Errorf("%w: the record of upload %s is gone", ErrMediaExpired, it.UploadID))
	}
	stream, obj, err := r.p.cfg.Objects.Get(ctx, it.Key, pinnedGet(it))
	if err != nil {
		return 0, downloadError(it, err)
	}
	defer stream.Close()
	if err := checkPin(it, obj); err != nil {
		return 0, err
	}
	if err := r.Hold(ctx, r.p.callTimeout(it.Size)); err != nil {
		return 0, err
	}
	body := &countingReader{r: stream}
	itemID, err := r.p.cfg.API.Submit(ctx, token, deviantart.Submission{
		Title: apiTitle(params.Title), Description: params.Description, Tags: params.Tags, Stack: it.ID,
		Filename: it.Filename, ContentType: it.ContentType, Body: body, Size: it.Size,
	})
	if err != nil {
		return 0, err
	}
	if body.n != it.Size {
		return 0, fmt.Errorf("downloaded %d bytes of %s, expected %d", body.n, it.UploadID, it.Size)
	}
	return itemID, nil
}

// publish publishes an uploaded item, unless the API says an earlier attempt
// already did.
func (r *run) publish(ctx context.Context, token string, it job.Item, tried bool) (deviantart.Deviation, error) {
	if tried {
		st, err := r.p.cfg.API.Item(ctx, token, it.StashItemID)
		if err != nil {
			return deviantart.Deviation{}, err
		}
		if st.Published {
			r.log.InfoContext(ctx, "item was already published by an earlier attempt", "item_id", it.ID)
			return deviantart.Deviation{ID: st.DeviationID, URL: st.URL}, nil
		}
	}
	if err := r.Hold(ctx, r.p.callTimeout(0)); err != nil {
		return deviantart.Deviation{}, err
	}
	dev, err := r.p.cfg.API.Publish(ctx, token, it.StashItemID)
	if deviantart.IsAlreadyPublished(err) {
		st, ierr := r.p.cfg.API.Item(ctx, token, it.StashItemID)
		if ierr != nil {
			return deviantart.Deviation{}, ierr
		}
		return deviantart.Deviation{ID: st.DeviationID, URL: st.URL}, nil
	}
	return dev, err
}

// MaxAPITitle is the longest title the external API accepts (in runes);
// longer job titles are cut there, the full title stays on the job.
const MaxAPITitle = 50

func apiTitle(t string) string {
	r := []rune(t)
	if len(r) <= MaxAPITitle {
		return t
	}
	return strings.TrimSpace(string(r[:MaxAPITitle-1])) + "…"
}

type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

func (r *run) phaseErr(_ context.Context, phase string, err error) error {
	return kind.Step(phase, -1, err)
}

func (r *run) itemErr(_ context.Context, phase string, i int, err error) error {
	return kind.Step(phase, i, err)
}

// settleFailure decides what a failed attempt means and records it:
// snooze (circuit open, or the OAuth client not set yet: no attempt
// spent, the error's code the reason it waits), retry later, or fail.
func (r *run) settleFailure(ctx context.Context, err error) (Verdict, error) {
	p := r.p
	now := p.cfg.Now()
	j := r.snapshot()
	d := p.cfg.Policy.Decide(err, j.Attempts, now)
	phase, item := "", -1
	var se *kind.StepError
	if errors.As(err, &se) {
		phase, item = se.Phase, se.Item
	}
	msg := err.Error()
	code := failureCode(err, d.Class)
	log := r.log.With("phase", phase, "error", msg, "class", d.Reason)
	var verdict Verdict
	saveErr := r.save(ctx, func(j *job.Job) {
		e := &job.Error{Code: code, Message: msg, Retryable: d.Class != retry.ClassPermanent}
		at := now.Add(d.Delay)
		switch {
		case d.Class == retry.ClassSnooze:
			// The reason it waits is the error's code: circuit_open, or
			// what else was not ready (secretref.CodeOAuthClientNotSet).
			_ = j.Snooze(code, at, now)
			note := "circuit open; waiting"
			if code != job.WaitCircuitOpen {
				note, j.Error = "waiting: "+msg, e
			}
			j.Wait.Detail, j.Wait.Breaker = msg, breakerKey(err)
			if phase != "" {
				if i := j.PhaseIndex(phase); i >= 0 {
					j.Phases[i].Message = note
				}
			}
			verdict = Verdict{RetryIn: d.Delay, Reason: strings.ReplaceAll(code, "_", " ")}
		case d.Retry:
			j.FailPhase(phase, e)
			if phase != "" {
				if i := j.PhaseIndex(phase); i >= 0 {
					j.Phases[i].Status = job.PhasePending
				}
			}
			if d.Spent {
				_ = j.RetryLater(e, at, now)
			} else {
				_ = j.Snooze(job.WaitRateLimited, at, now)
				j.Error, j.Phase = e, "retrying"
				j.Wait.Detail, j.Wait.Breaker = rateLimitDetail(err, msg), breakerKey(err)
			}
			verdict = Verdict{RetryIn: d.Delay, Reason: "temporary error"}
			if !d.Spent {
				verdict.Reason = "rate limited"
			}
		default:
			if d.Exhausted {
				e.Code, e.Message = "attempts_exhausted", fmt.Sprintf("gave up after %d attempts: %s", j.Attempts, msg)
			}
			j.FailPhase(phase, e)
			if item >= 0 && item < len(j.Items) {
				j.Items[item].Status, j.Items[item].Error = job.ItemFailed, e
			}
			j.Error = e
			_ = j.Apply(job.Fail, now)
			verdict = Verdict{Done: true, Reason: "failed"}
		}
		if !verdict.Done && p.cfg.Policy.Park(d.Delay, r.receives, p.cfg.MaxReceives) {
			reason := "backoff"
			if d.Class == retry.ClassSnooze {
				reason = code
			} else if !d.Spent {
				reason = "rate_limited"
			}
			_ = j.Park(reason, at, now)
			verdict = Verdict{Done: true, Reason: verdict.Reason + "; parked until due"}
		}
	})
	if saveErr != nil {
		// Cancelled or stopped meanwhile (errLostLease), or the failure
		// could not be written: what the failed call did is unknown, and
		// the job's items stay tried for whoever comes next (the cancel's
		// delivery, or the next run, asks the API once the job is let go).
		if !errors.Is(saveErr, errLostLease) {
			saveErr = fmt.Errorf("recording the failure of job %s: %w", j.ID, saveErr)
		}
		return r.unrecorded(ctx, saveErr)
	}
	// A wait (circuit open, 429, a secret not set yet) is not a failure:
	// it is logged at INFO, parked or not; only a spent attempt warns.
	switch {
	case d.Class == retry.ClassSnooze || (d.Retry && !d.Spent):
		log.InfoContext(ctx, "job waits: "+verdict.Reason, "retry_in", d.Delay.String(), "code", code, "parked", verdict.Done)
	case d.Retry:
		log.WarnContext(ctx, "job will retry", "retry_in", d.Delay.String(), "parked", verdict.Done)
	default:
		log.WarnContext(ctx, "job failed")
	}
	return verdict, nil
}

// breakerKey is the key of the circuit breaker that refused or flagged
// the call err reports ("" if none).
func breakerKey(err error) string {
	var k interface{ BreakerKey() string }
	if errors.As(err, &k) {
		return k.BreakerKey()
	}
	return ""
}

// rateLimitDetail explains a 429 wait, with the Retry-After the API sent.
func rateLimitDetail(err error, msg string) string {
	var ra interface{ RetryAfter() time.Duration }
	if errors.As(err, &ra) && ra.RetryAfter() > 0 {
		return fmt.Sprintf("the API answered 429 with Retry-After %s: %s", ra.RetryAfter(), msg)
	}
	return "the API answered 429: " + msg
}

// errorCode is the code a failed attempt reports: the one the error names
// (accounts.CodeClientRejected, …) when it names one, else its class's.
func errorCode(err error, c retry.Class) string {
	var coded interface{ JobErrorCode() string }
	if errors.As(err, &coded) && coded.JobErrorCode() != "" {
		return coded.JobErrorCode()
	}
	switch c {
	case retry.ClassPermanent:
		return "permanent_error"
	case retry.ClassSnooze:
		return "circuit_open"
	default:
		return "temporary_error"
	}
}
