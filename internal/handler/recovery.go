package handler

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"

	"github.com/conveyor/conveyor/internal/admin"
	"github.com/conveyor/conveyor/internal/aws/bucket"
	"github.com/conveyor/conveyor/internal/aws/queue"
	"github.com/conveyor/conveyor/internal/aws/scheduler"
	"github.com/conveyor/conveyor/internal/aws/sealer"
	"github.com/conveyor/conveyor/internal/aws/store"
	"github.com/conveyor/conveyor/internal/breaker"
	"github.com/conveyor/conveyor/internal/ids"
	"github.com/conveyor/conveyor/internal/job"
	"github.com/conveyor/conveyor/internal/recovery"
	"github.com/conveyor/conveyor/internal/resources"
	"github.com/conveyor/conveyor/internal/schedule"
)

// Sweeper is what the recovery function runs.
type Sweeper interface {
	Run(ctx context.Context) (recovery.Result, error)
	ReleaseScheduled(ctx context.Context, shards []int) (recovery.Result, error)
	Retain(ctx context.Context, shards []int) (recovery.Result, error)
}

// BreakerGauge reports which circuits are open (breaker.Breaker).
type BreakerGauge interface {
	ReportOpen(ctx context.Context, s breaker.Sink) (int, error)
}

// Firer submits a recurring schedule's job for one tick.
type Firer interface {
	Fire(ctx context.Context, t schedule.Tick) (schedule.FireResult, error)
}

// RecoveryHandler is the scheduled recovery function's handler. The
// schedule's detail names the task: "release" (every minute: scheduled jobs
// whose time came and parked jobs whose wait is over), "retain" (every
// minute: retention's stale stage and unreferenced uploads) — each over the
// sweep index's shards the detail lists, or every shard when it lists none
// (resources.Schedule.Detail) —, "schedule" (a user's recurring schedule
// ticked: submit its job) or "recover" (stuck jobs; the default). Release,
// retain and recover also send the breakers' open gauge.
func RecoveryHandler(s Sweeper, breakers BreakerGauge, ticks Firer, ops OperationResumer, emf *Emitter, log *slog.Logger) func(context.Context, events.EventBridgeEvent) error {
	return func(ctx context.Context, ev events.EventBridgeEvent) error {
		var detail struct {
			Task   string `json:"task"`
			Shards []int  `json:"shards"`
		}
		_ = json.Unmarshal(ev.Detail, &detail)
		if detail.Task == schedule.TaskTick {
			return tick(ctx, ticks, ev, log)
		}
		var res recovery.Result
		var err error
		switch detail.Task {
		case resources.TaskRelease:
			res, err = s.ReleaseScheduled(ctx, detail.Shards)
		case resources.TaskRetain:
			res, err = s.Retain(ctx, detail.Shards)
		default:
			res, err = s.Run(ctx)
			if err == nil && ops != nil {
				resumeOperations(ctx, ops, log)
			}
		}
		if err != nil {
			return err
		}
		// The breaker gauge: an open circuit keeps its alarm up between
		// transitions (one datapoint per open host circuit per run).
		if _, berr := breakers.ReportOpen(ctx, emf); berr != nil {
			log.WarnContext(ctx, "reading the breakers for their gauge failed", "error", berr)
		}
		emf.Emit(map[string]float64{"Orphans": float64(res.Orphans), "Requeued": float64(res.Requeued),
			"FailedStuck": float64(res.FailedStuck), "Staled": float64(res.Staled), "Released": float64(res.Released),
			"Unparked": float64(res.Unparked), "MediaExpired": float64(res.MediaExpired), "SweepLeft": float64(res.Left)}, nil)
		log.InfoContext(ctx, "scheduled task done", "task", detail.Task, "shards", detail.Shards, "released", res.Released, "unparked", res.Unparked,
			"orphans", res.Orphans, "requeued", res.Requeued, "failed_stuck", res.FailedStuck, "staled", res.Staled,
			"media_expired", res.MediaExpired, "left", res.Left)
		return nil
	}
}

// OperationResumer sends again the message of every running bulk
// operation whose worker went quiet (admin.Worker plus its threshold).
type OperationResumer interface {
	Resume(ctx context.Context, limit int) (int, error)
}

// QuietOperations is a Worker and the time after which a running
// operation's worker counts as gone (CONVEYOR_OPERATION_QUIET_AFTER).
type QuietOperations struct {
	Worker *admin.Worker
	After  time.Duration
	Now    func() time.Time
}

// Resume is the worker's Resume of the operations quiet for After.
func (q QuietOperations) Resume(ctx context.Context, limit int) (int, error) {
	return q.Worker.Resume(ctx, q.Now().Add(-q.After), limit)
}

// resumeOperationsMax bounds the operations one recovery run resumes.
const resumeOperationsMax = 100

// resumeOperations resumes the quiet operations; a failure is logged, and
// the next run tries again.
func resumeOperations(ctx context.Context, ops OperationResumer, log *slog.Logger) {
	n, err := ops.Resume(ctx, resumeOperationsMax)
	if err != nil {
		log.WarnContext(ctx, "resuming quiet bulk operations failed; the next run tries again", "error", err)
	}
	if n > 0 {
		log.InfoContext(ctx, "bulk operations resumed", "resumed", n)
	}
}

// tick fires a user's schedule. An error makes Lambda retry the
// asynchronous invocation (resources.AsyncInvokes), then keep it on the
// failure queue; the tick is idempotent, so a retry creates no second job.
func tick(ctx context.Context, ticks Firer, ev events.EventBridgeEvent, log *slog.Logger) error {
	var d schedule.TickDetail
	if err := json.Unmarshal(ev.Detail, &d); err != nil {
		log.ErrorContext(ctx, "dropping an unreadable schedule tick", "error", err)
		return nil
	}
	at, err := time.Parse(time.RFC3339, d.At)
	if err != nil {
		log.ErrorContext(ctx, "dropping a schedule tick without its time", "schedule_id", d.ScheduleID, "at", d.At)
		return nil
	}
	if ticks == nil {
		return errors.New("this function has no schedules wired")
	}
	res, err := ticks.Fire(ctx, schedule.Tick{ScheduleID: d.ScheduleID, Owner: d.Owner, At: at})
	if err != nil {
		return err
	}
	log.InfoContext(ctx, "schedule ticked", "schedule_id", d.ScheduleID, "tick", at, "job_id", res.JobID, "created", res.Created, "skipped", res.Skipped)
	return nil
}

// Recovery is the function EventBridge Scheduler runs: every 5 minutes it
// re-enqueues stuck jobs; every minute it releases scheduled jobs whose time
// came and, in an invocation of its own, moves finished jobs through
// retention; a user's schedule's tick submits its job. It reads no secret
// at cold start.
var Recovery = Function[func(context.Context, events.EventBridgeEvent) error]{Name: resources.FuncRecovery, New: NewRecovery}

// NewRecovery wires the recovery function: the recoverer, the breakers'
// gauge and the users' schedules (whose ticks submit jobs through the
// pipeline).
func NewRecovery(_ context.Context, env Env) (func(context.Context, events.EventBridgeEvent) error, error) {
	env.AWS = Connections(env.AWS)
	db, sqsc, objects := env.DynamoDB(), env.SQS(), bucket.New(env.AWS, env.Config.Bucket)
	st, emf := env.Store(db), env.Emitter()
	// A schedule's tick submits its job: the kinds' fronts are enough (the
	// publisher runs it), so no external API client or token here; KMS
	// only to seal an http job's headers (purpose "http-headers") and to
	// open the schedule's sealed template values ("schedule-template").
	seal := sealer.For(env.AWS, env.Config.KMSKeyID)
	sub := NewSubmission(env, st, sqsc, Fronts(st, seal))
	breakers, err := env.Breaker(db, ids.New("wrk"), emf)
	if err != nil {
		return nil, err
	}
	// The tier flags say which tiers are paused: their queued jobs wait.
	adm, err := env.Admin(AdminParts{Store: st, Jobs: sub.Jobs, Sender: sub.Sender, Breakers: breakers, SQS: sqsc})
	if err != nil {
		return nil, err
	}
	schedules := schedule.New(schedule.Config{Store: st, Jobs: sub.Jobs, Now: env.Now, Logger: env.Log(), Backend: scheduler.For(env.AWS, env.Config), Sealer: seal})
	ops, err := env.Operations(st, sub.Jobs, sub.Sender, nil)
	if err != nil {
		return nil, err
	}
	resumer := QuietOperations{Worker: ops, After: env.Config.OperationQuietAfter, Now: env.Now}
	return RecoveryHandler(Recoverer(env, st, sub.Sender, objects, adm.Paused, emf), breakers, schedules, resumer, emf, env.Log()), nil
}

// Connections returns cfg whose clients keep an idle connection per host
// for each request a sweep has in flight
// (recovery.ConcurrencyDefault), unless cfg has an HTTP client of its
// own. The SDK's default keeps 10: as each burst of 128 requests ended, all
// but 10 of its connections closed and the next burst opened them again,
// each a TCP and TLS handshake's processor time.
func Connections(cfg aws.Config) aws.Config {
	if cfg.HTTPClient != nil {
		return cfg
	}
	cfg.HTTPClient = awshttp.NewBuildableClient().WithTransportOptions(KeepConnections)
	return cfg
}

// KeepConnections sets tr to keep the connections Connections keeps.
func KeepConnections(tr *http.Transport) {
	tr.MaxIdleConnsPerHost = recovery.ConcurrencyDefault
	tr.MaxIdleConns = 4 * recovery.ConcurrencyDefault // DynamoDB, S3, SQS, and the rest
}

// Recoverer is the stuck-job recovery and retention of env, deleting
// expired uploads' objects from objects; paused says which tiers wait
// (their queued jobs are not stuck). Each sweep's figures go to emf
// (dimension Sweep), when it is not nil.
func Recoverer(env Env, st *store.Store, sender *queue.Sender, objects *bucket.Bucket, paused func(context.Context, job.Tier) bool, emf *Emitter) *recovery.Recoverer {
	cfg := env.Config
	return recovery.New(recovery.Config{
		Store: st, Sender: sender, Objects: objects, StuckAfter: cfg.StuckAfter,
		StaleAfter: cfg.StaleAfter, DeleteAfter: cfg.DeleteAfter, Paused: paused, Budget: cfg.SweepBudget,
		Report: SweepMetrics(emf), Now: env.Now, Logger: env.Log(),
	})
}

// SweepMetrics emits one EMF line per sweep and run (dimension Sweep):
// SweepDone, SweepLost, SweepRead, SweepQueries, SweepLeft and SweepMs.
func SweepMetrics(emf *Emitter) func(context.Context, recovery.SweepStats) {
	return func(_ context.Context, st recovery.SweepStats) {
		emf.Emit(map[string]float64{"SweepDone": float64(st.Done + st.Failed), "SweepLost": float64(st.Lost),
			"SweepRead": float64(st.Read), "SweepQueries": float64(st.Queries), "SweepLeft": float64(st.Left),
			"SweepMs": float64(st.Elapsed.Milliseconds())}, map[string]string{"Sweep": st.Sweep})
	}
}
