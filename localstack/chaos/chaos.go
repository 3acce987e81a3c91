// Package chaos pushes jobs through the whole local stack while things go
// wrong — workers die between steps, messages are delivered twice, the
// external API answers 429s and 5xx and is slow — and then checks what must
// hold: every job ends, none is lost or stuck, no item is published twice,
// attempts stay within bounds. It prints what it injected and what held.
package chaos

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/conveyor/conveyor/internal/accounts"
	"github.com/conveyor/conveyor/internal/apiclient"
	"github.com/conveyor/conveyor/internal/aws/awsclient"
	"github.com/conveyor/conveyor/internal/aws/queue"
	"github.com/conveyor/conveyor/internal/config"
	"github.com/conveyor/conveyor/internal/httpapi"
	"github.com/conveyor/conveyor/internal/job"
	"github.com/conveyor/conveyor/internal/publish"
	"github.com/conveyor/conveyor/localstack/simulator"
	"github.com/conveyor/conveyor/localstack/stack"
)

// Options configures a run.
type Options struct {
	// Endpoints are the emulators (empty: private ones).
	Endpoints awsclient.Endpoints
	Prefix    string
	Jobs      int
	// CrashRate is the chance a worker dies at each crash point (once per
	// job and point).
	CrashRate float64
	// DuplicateRate is the chance a job's message is sent a second time.
	DuplicateRate float64
	// FaultRate is the chance an external call fails (429 or 500).
	FaultRate float64
	// MidCallCancelRate is the chance that, right after the API uploaded
	// or published for a job, its owner cancels it (and, half of the
	// time, retries it at once) while the worker dies before it recorded
	// anything: a run killed mid-call and cancelled.
	MidCallCancelRate float64
	// Timeout bounds the whole run.
	Timeout time.Duration
	Seed    uint64
	Log     io.Writer
	// Outage, when set, freezes the emulator for the given time (an AWS
	// outage); Outages is how many times it happens during the run.
	Outage  func(time.Duration)
	Outages int
	// LongHaul adds what hours of operation bring, on compressed timings
	// (STUCK_AFTER 2s, breaker cooldown 1s, ParkAfter 2s): a tier paused
	// for longer than 5 × STUCK_AFTER while its jobs wait, an API outage
	// longer than maxReceiveCount × cooldown, cancels during publishing
	// and retries of cancelled jobs.
	LongHaul bool
}

// Report is what was injected and what held.
type Report struct {
	Jobs, Succeeded, Failed, Cancelled        int
	Crashes, Duplicates, Outages              int64
	FaultsInjected                            int
	MaxPublicationsPerItem, MaxAttempts       int
	Lost, Stuck, DoublePublished, OverAttempt []string
	// Long haul: DLQMessages left in every tier's dead-letter queue (must be
	// 0: waiting never dead-letters a job); PausedFor and OutageFor as
	// injected; HeldJobs waited in the paused tier, HeldMaxAttempts is the
	// most attempts one of them spent; LostOutputs are published items
	// without their output on the job.
	DLQMessages          int
	PausedFor, OutageFor time.Duration
	HeldJobs             int
	HeldMaxAttempts      int
	Cancels, Retries     int
	LostOutputs          []string
	// MidCallCancels counts the runs killed mid-call whose job was
	// cancelled meanwhile; MidCallRetries those of them retried at once.
	MidCallCancels, MidCallRetries int64
	// Reconciled counts the jobs failed as stuck that their owner retried
	// (see reconcile); their final state is the retry's.
	Reconciled int
	// FailReasons counts the failed jobs' error codes.
	FailReasons map[string]int
	// FirstFailure is the event history of the first failed job.
	FirstFailure string
	Elapsed      time.Duration
}

// OK reports whether every invariant held.
func (r Report) OK() bool {
	return len(r.Lost)+len(r.Stuck)+len(r.DoublePublished)+len(r.OverAttempt)+len(r.LostOutputs) == 0 &&
		r.Succeeded+r.Failed+r.Cancelled == r.Jobs && r.DLQMessages == 0
}

func (r Report) String() string {
	return fmt.Sprintf("chaos: %d jobs in %s — injected %d emulator outages, %d crashes, %d duplicate deliveries, %d API faults; "+
		"%d succeeded, %d failed with a reason; lost %d, stuck %d, published twice %d, over the attempt bound %d; max publications per item %d, max attempts %d",
		r.Jobs, r.Elapsed.Round(time.Millisecond), r.Outages, r.Crashes, r.Duplicates, r.FaultsInjected, r.Succeeded, r.Failed,
		len(r.Lost), len(r.Stuck), len(r.DoublePublished), len(r.OverAttempt), r.MaxPublicationsPerItem, r.MaxAttempts) +
		fmt.Sprintf("; failure reasons %v", r.FailReasons) +
		fmt.Sprintf("; long haul: tier paused %s (%d jobs held, at most %d attempts each), API outage %s, %d cancels, %d retries, %d cancelled, %d DLQ messages, %d outputs lost",
			r.PausedFor, r.HeldJobs, r.HeldMaxAttempts, r.OutageFor, r.Cancels, r.Retries, r.Cancelled, r.DLQMessages, len(r.LostOutputs)) +
		fmt.Sprintf("; %d stuck jobs retried by their owner", r.Reconciled) +
		fmt.Sprintf("; %d runs killed mid-call and cancelled (%d of them retried at once)", r.MidCallCancels, r.MidCallRetries)
}

// reconcile retries, as their owners would, the jobs that failed as
// `stuck` with their runs spent, waits until each finished again and
// replaces its final state in final.
func reconcile(ctx context.Context, s *stack.Stack, ids, owners []string, final map[string]job.Job, deadline time.Time, rep *Report) error {
	var retried []string
	for i, id := range ids {
		j, ok := final[id]
		if !ok || j.Status != job.Failed || j.Error == nil || j.Error.Code != job.CodeStuck || !j.Error.Retryable {
			continue
		}
		if _, err := apiclient.New(s.APIURL, apiclient.WithToken(owners[i])).RetryJob(ctx, id); err != nil {
			return fmt.Errorf("retrying stuck job %s: %w", id, err)
		}
		retried = append(retried, id)
		rep.Reconciled++
	}
	for _, id := range retried {
		delete(final, id)
		for time.Now().Before(deadline) {
			j, err := s.App.Store.GetJob(ctx, id)
			if err == nil && (j.Status == job.Succeeded || j.Status == job.Failed || j.Status == job.Cancelled) {
				final[id] = j
				break
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	return nil
}

// addFaults injects the run's background faults: 500s and 429s at rate
// (half each) and some latency on the upload and publish calls.
func addFaults(sim *simulator.Server, rate float64) {
	for _, path := range []string{simulator.PathSubmit, simulator.PathPublish} {
		sim.AddFault(simulator.Fault{Path: path, Status: 500, Rate: rate / 2})
		sim.AddFault(simulator.Fault{Path: path, Status: 429, Rate: rate / 2, RetryAfter: 1})
		sim.AddFault(simulator.Fault{Path: path, LatencyMs: 20, Rate: 0.3})
	}
}

// Run runs the chaos and checks the invariants.
func Run(ctx context.Context, o Options) (Report, error) {
	if o.Timeout == 0 {
		o.Timeout = 2 * time.Minute
	}
	if o.Log == nil {
		o.Log = io.Discard
	}
	c := &runner{o: o, rng: rand.New(rand.NewPCG(o.Seed, 42)), crashed: map[string]bool{}, owners: map[string]string{}, cancelled: map[string]bool{}}
	s, err := c.start(ctx)
	if err != nil {
		return c.rep, err
	}
	defer s.Close()
	c.s = s
	start := time.Now()
	addFaults(s.Simulator, o.FaultRate)
	ids, owners, err := c.submit(ctx)
	if err != nil {
		return c.rep, err
	}
	outagesDone := c.outages()
	deadline := time.Now().Add(o.Timeout)
	final := c.wait(ctx, ids, deadline)
	<-outagesDone
	// A job whose runs were spent while its last worker went silent fails
	// as `stuck`, retryable: that worker may have reached the API. The
	// owner's retry must reconcile it — find what was published, record the
	// output, publish nothing twice — so the invariants below are checked
	// after those retries.
	if err := reconcile(ctx, s, ids, owners, final, deadline, &c.rep); err != nil {
		return c.rep, err
	}
	c.rep.Elapsed = time.Since(start)
	c.check(ctx, ids, final)
	if c.lh != nil {
		if c.rep.DLQMessages, err = dlqDepth(ctx, s); err != nil {
			return c.rep, err
		}
	}
	return c.rep, nil
}

// runner is one chaos run.
type runner struct {
	o       Options
	s       *stack.Stack
	lh      *longHaul
	rep     Report
	rngMu   sync.Mutex
	rng     *rand.Rand
	crashMu sync.Mutex
	crashed map[string]bool // job id/crash point → already fired
	// owners maps a job to its owner's token; cancelled holds the jobs
	// cancelled mid-call and not retried (under crashMu).
	owners    map[string]string
	cancelled map[string]bool
}

// chance is true with probability p (seeded: a run can be replayed).
func (c *runner) chance(p float64) bool {
	c.rngMu.Lock()
	defer c.rngMu.Unlock()
	return c.rng.Float64() < p
}

// start runs a private stack on compressed timings whose workers die at
// the crash points by chance (once per job and point).
func (c *runner) start(ctx context.Context) (*stack.Stack, error) {
	env := map[string]string{
		"CONVEYOR_HEARTBEAT_INTERVAL": "200ms", "CONVEYOR_RETRY_BASE": "50ms", "CONVEYOR_RETRY_MAX": "400ms",
		"CONVEYOR_BREAKER_THRESHOLD": "8", "CONVEYOR_BREAKER_WINDOW": "2s", "CONVEYOR_BREAKER_COOLDOWN": "1s", "CONVEYOR_BREAKER_CACHE": "100ms",
		"CONVEYOR_STUCK_AFTER": "15s", "CONVEYOR_RECOVERY_INTERVAL": "500ms", "CONVEYOR_SCHEDULE_INTERVAL": "300ms", "CONVEYOR_MAX_ATTEMPTS": "7",
		// A run holds its job's lease over each call's deadline: a killed
		// run's job waits that long for the next run.
		"CONVEYOR_CALL_TIMEOUT": "2s", "CONVEYOR_BREAKER_PROBE_LEASE": "3s",
		config.VarRateLimits: stack.RateLimitsForLoad,
	}
	if c.o.LongHaul {
		env["CONVEYOR_STUCK_AFTER"], env["CONVEYOR_PARK_AFTER"] = longHaulStuckAfter.String(), "2s"
	}
	return stack.Start(ctx, stack.Options{
		Endpoints: c.o.Endpoints, Prefix: c.o.Prefix, APIAddr: "127.0.0.1:0",
		Getenv: func(k string) string { return env[k] }, Metrics: io.Discard,
		Logger: slog.New(slog.NewJSONHandler(c.o.Log, &slog.HandlerOptions{Level: slog.LevelWarn})),
		Crash:  c.crash,
	})
}

func (c *runner) crash(point string, j *job.Job) error {
	key := j.ID + "/" + point
	c.crashMu.Lock()
	defer c.crashMu.Unlock()
	if c.midCall(point, j.ID) {
		c.crashed[key] = true
		atomic.AddInt64(&c.rep.Crashes, 1)
		return errors.New("chaos: worker killed mid-call while its job was cancelled")
	}
	if c.crashed[key] || !c.chance(c.o.CrashRate) {
		return nil
	}
	c.crashed[key] = true
	atomic.AddInt64(&c.rep.Crashes, 1)
	return errors.New("chaos: worker killed")
}

// midCall, by chance, has the job's owner cancel it right after the API
// did an upload or a publication for it (and retry it, half of the time),
// before the worker recorded anything: the caller then kills the worker.
// Once per job; under crashMu.
func (c *runner) midCall(point, id string) bool {
	if point != publish.AfterSubmit && point != publish.AfterPublish || c.o.MidCallCancelRate == 0 || c.crashed[id+"/mid-call"] {
		return false
	}
	tok, ok := c.owners[id]
	if !ok || !c.chance(c.o.MidCallCancelRate) {
		return false
	}
	c.crashed[id+"/mid-call"] = true
	api := apiclient.New(c.s.APIURL, apiclient.WithToken(tok))
	if _, err := api.CancelJob(context.Background(), id); err != nil {
		return false // finished meanwhile (a duplicate delivery's run)
	}
	atomic.AddInt64(&c.rep.MidCallCancels, 1)
	if c.chance(0.5) {
		if _, err := api.RetryJob(context.Background(), id); err == nil {
			atomic.AddInt64(&c.rep.MidCallRetries, 1)
			return true
		}
	}
	c.cancelled[id] = true
	return true
}

// submit connects an owner, uploads an image and submits the jobs (a
// share of them delivered twice); with the long haul, a quarter goes to a
// free-plan owner whose tier is paused. It returns the job ids and each
// one's owner's token.
func (c *runner) submit(ctx context.Context) (ids, owners []string, err error) {
	s := c.s
	tok, err := httpapi.Mint(s.Config.JWTSecret, httpapi.Claims{Subject: "chaos", Role: httpapi.RoleUser, Plan: "pro", ExpiresAt: time.Now().Add(time.Hour)})
	if err != nil {
		return nil, nil, err
	}
	api := apiclient.New(s.APIURL)
	if err := api.As(tok).Connect(ctx, accounts.ConnectRequest{Provider: "deviantart", RefreshToken: "rt-chaos"}); err != nil {
		return nil, nil, err
	}
	upload, err := api.As(tok).Upload(ctx, "image.png", "image/png", simulator.PNG(8))
	if err != nil {
		return nil, nil, err
	}
	up := upload.ID
	if c.o.LongHaul {
		if c.lh, err = startLongHaul(ctx, s, c.o, &c.rep, c.chance); err != nil {
			return nil, nil, err
		}
	}
	ids, owners = make([]string, c.o.Jobs), make([]string, c.o.Jobs)
	for i := range c.o.Jobs {
		tk, upl := tok, up
		if c.lh != nil && i%4 == 3 {
			tk, upl = c.lh.freeTok, c.lh.freeUp // a quarter waits in the paused low tier
		}
		j, _, err := api.As(tk).SubmitJob(ctx, apiclient.PublishRequest(publish.Params{Title: fmt.Sprintf("chaos %d", i)}, upl))
		if err != nil {
			return nil, nil, err
		}
		ids[i], owners[i] = j.ID, tk
		c.crashMu.Lock()
		c.owners[j.ID] = tk
		c.crashMu.Unlock()
		if c.lh != nil {
			c.lh.submitted(i, ids[i], tk)
		}
		if c.chance(c.o.DuplicateRate) {
			// A second delivery of the same job while the first is in flight.
			if err := s.App.Sender.Send(ctx, job.Medium, queue.Message{Kind: queue.KindJob, JobID: ids[i], Send: 1000 + i}); err == nil {
				atomic.AddInt64(&c.rep.Duplicates, 1)
			}
		}
	}
	c.rep.Jobs = c.o.Jobs
	return ids, owners, nil
}

// outages freezes the emulator o.Outages times, two seconds apart; the
// channel closes after the last.
func (c *runner) outages() <-chan struct{} {
	outage := c.o.Outage
	if outage == nil {
		outage = c.s.PauseEmulator // our own emulator, if we started one
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for range c.o.Outages {
			time.Sleep(2 * time.Second)
			outage(1500 * time.Millisecond)
			atomic.AddInt64(&c.rep.Outages, 1)
		}
	}()
	return done
}

// wait returns, by the deadline, the jobs that finished: it waits until
// the index counts every job finished (a few Count queries per poll,
// whatever the number of jobs), then reads each job, again until each
// one read finished.
func (c *runner) wait(ctx context.Context, ids []string, deadline time.Time) map[string]job.Job {
	for time.Now().Before(deadline) {
		if c.lh != nil && !c.lh.done() {
			time.Sleep(200 * time.Millisecond)
			continue
		}
		n := 0
		for _, st := range []job.Status{job.Succeeded, job.Failed, job.Cancelled} {
			cnt, err := c.s.App.Store.CountStatus(ctx, st)
			if err != nil {
				break
			}
			n += cnt
		}
		if n >= len(ids) {
			break
		}
		time.Sleep(500 * time.Millisecond)
	}
	if c.lh != nil {
		c.lh.wait()
	}
	// The count can reach every job while one of them is between a
	// cancel and its owner's retry (midCall): that job is read queued
	// again, and waited for until it finishes, or the deadline.
	final := map[string]job.Job{}
	pending := ids
	for {
		var left []string
		for _, id := range pending {
			j, err := c.s.App.Store.GetJob(ctx, id)
			if err == nil && j.Status.Finished() {
				final[id] = j
				continue
			}
			left = append(left, id)
		}
		if pending = left; len(pending) == 0 || !time.Now().Before(deadline) {
			break
		}
		time.Sleep(500 * time.Millisecond)
	}
	c.settle(ctx, final, deadline)
	return final
}

// settle re-reads, until they settled or the deadline, the finished jobs
// that are not settled yet: a job cancelled while its run was in a call
// is cancelled at once, and what that call did reaches its items after
// (the run's release, or a later delivery that asks the API once the
// run's lease lapsed: Worker.settleFinished). A job is settled once every
// item the API published has its output and no run holds its lease; the
// check then judges its items, and a job still unsettled at the deadline
// is judged as it is. An item tried by a run killed before the API saw it
// stays tried (the next run asks the API first), so tried alone is no
// reason to wait; nor is a lapsed lease, which a killed run never clears
// (a live run keeps its lease over its call: Hold). Waiting for either
// held a run to its deadline whenever a run was killed.
func (c *runner) settle(ctx context.Context, final map[string]job.Job, deadline time.Time) {
	unsettled := func(j job.Job, published map[string]bool) bool {
		if j.Status == job.Cancelled && j.LeaseOwner != "" && j.LeaseUntil != nil && time.Now().Before(*j.LeaseUntil) {
			return true
		}
		for _, it := range j.Items {
			if published[it.ID] && (it.Status != job.ItemPublished || it.Output == nil) {
				return true
			}
		}
		return false
	}
	for {
		published := map[string]bool{}
		for _, p := range c.s.Simulator.Publications() {
			published[p.Stack] = true
		}
		var waiting []string
		for id, j := range final {
			if unsettled(j, published) {
				waiting = append(waiting, id)
			}
		}
		if len(waiting) == 0 || !time.Now().Before(deadline) {
			return
		}
		time.Sleep(200 * time.Millisecond)
		for _, id := range waiting {
			if j, err := c.s.App.Store.GetJob(ctx, id); err == nil {
				final[id] = j
			}
		}
	}
}

// check fills the report from the jobs' final states and what the
// external API saw.
func (c *runner) check(ctx context.Context, ids []string, final map[string]job.Job) {
	rep, s, lh := &c.rep, c.s, c.lh
	for _, f := range s.Simulator.Faults() {
		if f.Status != 0 {
			rep.FaultsInjected += f.Fired
		}
	}
	pubs := map[string]int{}
	for _, p := range s.Simulator.Publications() {
		pubs[p.Stack]++
	}
	for _, id := range ids {
		j, ok := final[id]
		if !ok {
			cur, err := s.App.Store.GetJob(ctx, id)
			if err != nil {
				rep.Lost = append(rep.Lost, id)
			} else {
				rep.Stuck = append(rep.Stuck, fmt.Sprintf("%s (%s)", id, describeStuck(cur)))
			}
			continue
		}
		if lh != nil && lh.held[id] {
			rep.HeldMaxAttempts = max(rep.HeldMaxAttempts, j.Attempts)
		}
		switch j.Status {
		case job.Cancelled:
			rep.Cancelled++
			c.crashMu.Lock()
			midCall := c.cancelled[id]
			c.crashMu.Unlock()
			if !midCall && (lh == nil || !lh.cancelled[id]) {
				rep.Stuck = append(rep.Stuck, id+" cancelled without a cancel")
			}
		case job.Succeeded:
			rep.Succeeded++
		default:
			c.failed(ctx, j)
		}
		rep.MaxAttempts = max(rep.MaxAttempts, j.Attempts)
		if j.Attempts > j.MaxAttempts {
			rep.OverAttempt = append(rep.OverAttempt, id)
		}
		for _, it := range j.Items {
			if pubs[it.ID] > 0 && (it.Status != job.ItemPublished || it.Output == nil) {
				rep.LostOutputs = append(rep.LostOutputs, it.ID)
			}
			rep.MaxPublicationsPerItem = max(rep.MaxPublicationsPerItem, pubs[it.ID])
			if pubs[it.ID] > 1 {
				rep.DoublePublished = append(rep.DoublePublished, it.ID)
			}
		}
	}
}

// failed counts a failed job by its reason and keeps the first one's
// event history.
func (c *runner) failed(ctx context.Context, j job.Job) {
	rep := &c.rep
	rep.Failed++
	if rep.FailReasons == nil {
		rep.FailReasons = map[string]int{}
	}
	if j.Error == nil || j.Error.Message == "" {
		rep.Stuck = append(rep.Stuck, j.ID+" failed without a reason")
	} else {
		rep.FailReasons[j.Error.Code+": "+j.Error.Message]++
	}
	if rep.FirstFailure == "" {
		evs, _ := c.s.App.Store.Events(ctx, j.ID, 0, 200)
		var b strings.Builder
		for _, ev := range evs {
			fmt.Fprintf(&b, "%s %s %v; ", ev.At.Format("15:04:05.000"), ev.Type, ev.Detail)
		}
		rep.FirstFailure = j.ID + ": " + b.String()
	}
}

// describeStuck is what a job left unfinished at the deadline says of
// where it waits: its status, and the fields the run loop and the sweeps
// decide by (a parking, a backoff, a lease, the messages sent for it).
func describeStuck(j job.Job) string {
	at := func(t *time.Time) string {
		if t == nil {
			return "-"
		}
		return t.UTC().Format("15:04:05.000")
	}
	return fmt.Sprintf("%s; waiting %q, retryAt %s, queuedAt %s, lease %q until %s, attempts %d/%d, enqueues %d, updated %s",
		j.Status, j.Waiting, at(j.RetryAt), at(j.QueuedAt), j.LeaseOwner, at(j.LeaseUntil), j.Attempts, j.MaxAttempts, j.Enqueues, j.UpdatedAt.UTC().Format("15:04:05.000"))
}
