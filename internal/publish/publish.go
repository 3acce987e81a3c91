// Package publish is the publish kind of job: confirmed uploads published
// to the external API (DeviantArt-style OAuth). Its front says what a
// publish job's params are and how a submission is normalised, validated
// and turned into a job (front.go); its Work carries the job through its
// phases, token → download → upload → publish → succeeded, through any
// job.Run. Each phase's state is persisted on the job, so a
// redelivered or retried job resumes at its first unfinished phase and
// item. Before repeating a call whose outcome was lost (the process died
// after the call returned), it asks the API what already happened, so no
// item is ever published twice; a finished job whose last run was cut
// mid-call is reconciled the same way (Reconcile).
package publish

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/conveyor/conveyor/internal/accounts"
	"github.com/conveyor/conveyor/internal/breaker"
	"github.com/conveyor/conveyor/internal/deviantart"
	"github.com/conveyor/conveyor/internal/job"
	"github.com/conveyor/conveyor/internal/retry"
	"github.com/conveyor/conveyor/internal/uploads"
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

// AccountTokens is what Tokens may also do: hand out a token from an
// account the caller has just read with a strongly consistent read,
// without reading it again (accounts.Service).
type AccountTokens interface {
	AccessTokenFrom(ctx context.Context, a accounts.Account) (string, error)
}

// Store is what the publish kind reads and writes of the table
// (*store.Store): a delivery's job with its owner's account and its items
// described (Load, LoadBatch), the upload records a refused submission is
// explained by (Explain), a finished job's items reconciled (Reconcile).
type Store interface {
	GetJob(ctx context.Context, id string) (job.Job, error)
	DescribeItems(ctx context.Context, j *job.Job) error
	GetJobAndAccount(ctx context.Context, id, owner, provider string, uploads []string) (job.Job, *accounts.Account, error)
	GetJobsAndAccounts(ctx context.Context, provider string, reads []accounts.JobRead) ([]accounts.JobAndAccount, error)
	GetUploadsAndAccount(ctx context.Context, ids []string, owner, provider string) (map[string]uploads.Upload, bool, error)
	UpdateJob(ctx context.Context, id string, fn func(*job.Job) error) (job.Job, error)
}

// Objects streams the items' uploaded objects (bucket.Bucket).
type Objects interface {
	// Get streams key's object as o narrows it: uploads.ErrObjectNotFound
	// when it (or its version) is gone, uploads.ErrPreconditionFailed when it is
	// not the one o.IfMatch names.
	Get(ctx context.Context, key string, o uploads.GetOptions) (io.ReadCloser, uploads.Object, error)
}

// Crash points of the publish kind's Work (job.Run.Crash): a test
// hook may fail the run at each of them, the way a process dies between
// two steps.
const (
	AfterToken   = "after-token"
	AfterSubmit  = "after-submit"  // the API returned the itemid, nothing persisted yet
	AfterUpload  = "after-upload"  // the itemid is persisted, or (the last item to upload) held for the publish write
	AfterPublish = "after-publish" // the API published, nothing persisted yet
	AfterItem    = "after-item"    // the item's output is persisted
	BeforeFinish = "before-finish"
)

// Config configures the publish kind. A function that only submits jobs
// sets Store alone (Explain); the run loop's sets everything.
type Config struct {
	// Store is the table: a delivery's job is read with its owner's
	// account (Load), a refused submission explained (Explain), a
	// finished job's items reconciled (Reconcile).
	Store Store
	// Objects is the upload bucket the items' images are read from.
	Objects Objects
	// Tokens hands out the owners' access tokens.
	Tokens Tokens
	// API is the external publishing API.
	API API
	// Provider is the external provider whose connected account a publish
	// job needs (default ProviderDefault).
	Provider string
	// CallTimeout is the deadline of one call to the external API sending
	// size bytes (deviantart.Client.Timeout); a run holds the job's lease
	// for at least that long before each call (default: CallTimeoutDefault).
	CallTimeout func(size int64) time.Duration
	// Logger is where Reconcile logs (default slog.Default()); Work logs
	// through its Attempt.
	Logger *slog.Logger
}

// CallTimeoutDefault is the deadline of one external call when
// Config.CallTimeout is nil: half the lease a claim holds with the
// default heartbeat.
const CallTimeoutDefault = 45 * time.Second

// Kind is the publish kind (job.Kind, job.Explainer, job.BatchLoader,
// job.Budgeter and job.Reconciler).
type Kind struct{ cfg Config }

// New returns the publish kind.
func New(cfg Config) *Kind {
	if cfg.Provider == "" {
		cfg.Provider = ProviderDefault
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Kind{cfg: cfg}
}

// callTimeout is the deadline of one external call sending size bytes.
func (k *Kind) callTimeout(size int64) time.Duration {
	if k.cfg.CallTimeout != nil {
		return k.cfg.CallTimeout(size)
	}
	return CallTimeoutDefault
}

// Load reads a delivery's job with its items described (their uploads
// read with it) and, when the message names the owner and the Tokens can
// use it, the owner's account with it: one request, and the token phase
// then needs no read of its own (job.Loader; Run.Loaded is the
// *accounts.Account, nil when it was not read).
func (k *Kind) Load(ctx context.Context, d job.Delivery) (job.Job, any, error) {
	if _, ok := k.cfg.Tokens.(AccountTokens); !ok || d.Owner == "" {
		j, err := k.cfg.Store.GetJob(ctx, d.JobID)
		if err != nil {
			return j, nil, err
		}
		return j, nil, k.cfg.Store.DescribeItems(ctx, &j)
	}
	j, a, err := k.cfg.Store.GetJobAndAccount(ctx, d.JobID, d.Owner, k.cfg.Provider, d.Uploads)
	return j, a, err
}

// LoadBatch is Load for the jobs of a batch, in one request for up to 100
// keys: every job, each owner's account (when the Tokens can use it) and
// every upload the messages name (job.BatchLoader).
func (k *Kind) LoadBatch(ctx context.Context, ds []job.Delivery) ([]job.Preload, error) {
	_, withAccounts := k.cfg.Tokens.(AccountTokens)
	reads := make([]accounts.JobRead, len(ds))
	for i, d := range ds {
		reads[i] = accounts.JobRead{ID: d.JobID, Uploads: d.Uploads}
		if withAccounts {
			reads[i].Owner = d.Owner
		}
	}
	got, err := k.cfg.Store.GetJobsAndAccounts(ctx, k.cfg.Provider, reads)
	if err != nil {
		return nil, err
	}
	out := make([]job.Preload, len(got))
	for i, g := range got {
		out[i] = job.Preload{Job: g.Job, Err: g.Err}
		if reads[i].Owner != "" {
			out[i].Loaded = g.Account
		}
	}
	return out, nil
}

// Work runs the publish phases through a (job.Kind). Its calls to the
// external API are made for the job's owner (breaker.WithOwner): the
// host's circuit counts the owner once, whatever its tokens.
func (k *Kind) Work(ctx context.Context, a job.Run) error {
	ctx = breaker.WithOwner(ctx, a.Job().Owner)
	r := &run{k: k, a: a, log: a.Logger()}
	if acct, ok := a.Loaded().(*accounts.Account); ok && acct != nil {
		r.account = acct
	}
	return r.phases(ctx)
}

// NextCall is the deadline of the job's next call to the external API:
// the first unfinished item's upload, or its publication (job.Budgeter).
func (k *Kind) NextCall(j job.Job) time.Duration {
	for _, it := range j.Items {
		switch it.Status {
		case job.ItemPending:
			return k.callTimeout(it.Size)
		case job.ItemUploaded:
			return k.callTimeout(0)
		}
	}
	return 0
}

// Reconcile asks the API what became of a finished job's items a run
// marked tried and records it on them (job.Reconciler).
func (k *Kind) Reconcile(ctx context.Context, j job.Job) error {
	return k.reconcile(breaker.WithOwner(ctx, j.Owner), k.cfg.Logger.With("job_id", j.ID), j)
}

// run is one publish Work: its attempt and what it learnt.
type run struct {
	k   *Kind
	a   job.Run
	log *slog.Logger
	// token is the access token the run calls the API with; reauthed says
	// whether a 401 has already forced a refresh in this run.
	token    string
	reauthed bool
	// account is the owner's account as read with the job (nil when it
	// was not): the first access token comes from it, with no read.
	account *accounts.Account
}

// phases runs every unfinished phase and item, then succeeds the job.
func (r *run) phases(ctx context.Context) error {
	j := r.a.Job()
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
	if err := r.a.Crash(BeforeFinish); err != nil {
		return err
	}
	if err := r.a.Save(ctx, r.finish); err != nil {
		return err
	}
	r.log.InfoContext(ctx, "job succeeded")
	return nil
}

// tokenPhase gets the access token the external calls use.
func (r *run) tokenPhase(ctx context.Context, j *job.Job) error {
	now := r.a.Now
	r.a.Defer(nil, func(j *job.Job) {
		j.StartPhase(PhaseToken, "getting an access token", now())
	})
	token, err := r.accessToken(ctx, j.Owner)
	if err != nil {
		return r.phaseErr(ctx, PhaseToken, err)
	}
	r.token = token
	r.a.Defer(nil, func(j *job.Job) {
		j.CompletePhase(PhaseToken, "access token ready", now())
	})
	return r.a.Crash(AfterToken)
}

// uploadPhase uploads the pending items one by one (each download streams
// into its upload), then completes the download and upload phases and
// starts the publish phase.
func (r *run) uploadPhase(ctx context.Context, j *job.Job) error {
	now := r.a.Now
	total := len(j.Items)
	for i := range j.Items {
		if err := r.uploadItem(ctx, j, i); err != nil {
			return err
		}
	}
	r.a.Defer(nil, func(j *job.Job) {
		j.CompletePhase(PhaseDownload, fmt.Sprintf("%d of %d items", total, total), now())
		j.CompletePhase(PhaseUpload, fmt.Sprintf("%d of %d items", total, total), now())
		j.StartPhase(PhasePublish, "publishing", now())
	})
	return nil
}

// uploadItem uploads item i when it is still pending and records it
// uploaded, with the phases' progress.
func (r *run) uploadItem(ctx context.Context, j *job.Job, i int) error {
	now, total := r.a.Now, len(j.Items)
	it := r.a.Job().Items[i]
	if it.Status != job.ItemPending {
		return nil
	}
	r.a.Defer(nil, func(j *job.Job) {
		j.StartPhase(PhaseDownload, fmt.Sprintf("item %d of %d", i+1, total), now())
		j.StartPhase(PhaseUpload, fmt.Sprintf("item %d of %d", i+1, total), now())
	})
	var itemID int64
	err := r.authed(ctx, j.Owner, func(token string) (err error) {
		itemID, err = r.upload(ctx, token, *j, it, r.a.Tried(i))
		return err
	})
	if err != nil {
		return r.itemErr(ctx, PhaseUpload, i, err)
	}
	if err := r.a.Crash(AfterSubmit); err != nil {
		return err
	}
	done := countItems(r.a.Job(), i, job.ItemUploaded, job.ItemPublished)
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
	if lastPending(r.a.Job(), i) {
		// The last upload: its write is folded into the next one (the
		// publish, or the failure), a round trip less per job. A crash
		// before that write leaves the item tried, and the next run
		// finds the stash item by its stack instead of submitting again.
		r.a.Defer(uploaded, progress)
	} else if err := r.a.Record(ctx, uploaded, progress); err != nil {
		return err
	}
	return r.a.Crash(AfterUpload)
}

// publishPhase publishes the uploaded items one by one; done reports that
// the last one was published and the job succeeded with it.
func (r *run) publishPhase(ctx context.Context, j *job.Job) (done bool, err error) {
	total := len(j.Items)
	for i := range j.Items {
		it := r.a.Job().Items[i]
		if it.Status != job.ItemUploaded {
			continue
		}
		var dev deviantart.Deviation
		err := r.authed(ctx, j.Owner, func(token string) (err error) {
			dev, err = r.publish(ctx, token, it, r.a.Tried(i))
			return err
		})
		if err != nil {
			return false, r.itemErr(ctx, PhasePublish, i, err)
		}
		if err := r.a.Crash(AfterPublish); err != nil {
			return false, err
		}
		last := countItems(r.a.Job(), i, job.ItemPublished) == total
		if err := r.a.Record(ctx, func(j *job.Job) {
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
		if err := r.a.Crash(AfterItem); err != nil {
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
	now := r.a.Now()
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
		found, ok, err := r.k.cfg.API.FindByStack(ctx, token, it.ID)
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
	stream, obj, err := r.k.cfg.Objects.Get(ctx, it.Key, pinnedGet(it))
	if err != nil {
		return 0, downloadError(it, err)
	}
	defer stream.Close()
	if err := checkPin(it, obj); err != nil {
		return 0, err
	}
	if err := r.a.Hold(ctx, r.k.callTimeout(it.Size)); err != nil {
		return 0, err
	}
	body := &countingReader{r: stream}
	itemID, err := r.k.cfg.API.Submit(ctx, token, deviantart.Submission{
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
		st, err := r.k.cfg.API.Item(ctx, token, it.StashItemID)
		if err != nil {
			return deviantart.Deviation{}, err
		}
		if st.Published {
			r.log.InfoContext(ctx, "item was already published by an earlier attempt", "item_id", it.ID)
			return deviantart.Deviation{ID: st.DeviationID, URL: st.URL}, nil
		}
	}
	if err := r.a.Hold(ctx, r.k.callTimeout(0)); err != nil {
		return deviantart.Deviation{}, err
	}
	dev, err := r.k.cfg.API.Publish(ctx, token, it.StashItemID)
	if deviantart.IsAlreadyPublished(err) {
		st, ierr := r.k.cfg.API.Item(ctx, token, it.StashItemID)
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
	return job.Step(phase, -1, err)
}

func (r *run) itemErr(_ context.Context, phase string, i int, err error) error {
	return job.Step(phase, i, err)
}

// reconcile asks the API what became of a finished job's unsettled items
// and records it on them, so that a publication that happened is never
// lost, whatever the job's status. When the API cannot be asked, the job
// stays as it is (its items keep "tried", so a later delivery or a retry
// asks again) and the error is returned.
func (k *Kind) reconcile(ctx context.Context, log *slog.Logger, j job.Job) error {
	token, err := k.cfg.Tokens.AccessToken(ctx, j.Owner)
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
			found, ok, err := k.cfg.API.FindByStack(ctx, token, it.ID)
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
		st, err := k.cfg.API.Item(ctx, token, id)
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
	_, err = k.cfg.Store.UpdateJob(ctx, j.ID, func(cur *job.Job) error {
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
	tok, ferr := r.k.cfg.Tokens.ForceRefresh(ctx, owner, r.token)
	if ferr != nil {
		return ferr
	}
	r.token = tok
	return call(tok)
}

// accessToken returns an access token for owner: the first from the
// account read with the job, when it was, the others as Tokens gives them.
func (r *run) accessToken(ctx context.Context, owner string) (string, error) {
	a := r.account
	r.account = nil
	if at, ok := r.k.cfg.Tokens.(AccountTokens); ok && a != nil && a.Owner == owner {
		return at.AccessTokenFrom(ctx, *a)
	}
	return r.k.cfg.Tokens.AccessToken(ctx, owner)
}
