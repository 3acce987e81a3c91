package admin

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/conveyor/conveyor/internal/aws/queue"
	"github.com/conveyor/conveyor/internal/aws/store"
	"github.com/conveyor/conveyor/internal/ids"
	"github.com/conveyor/conveyor/internal/invalid"
	"github.com/conveyor/conveyor/internal/job"
)

// Bulk operations: a bulk action by filter that selects more jobs than
// fit well inside one request runs as an operation, worked off by the
// system function one chunk per message.
const (
	// ActionRestart and ActionStop are the actions of an operation.
	ActionRestart = "restart"
	ActionStop    = "stop"
	// OperationSucceeded and OperationFailed are the statuses of a
	// finished operation (running: store.OperationRunning).
	OperationSucceeded = "succeeded"
	OperationFailed    = "failed"
	// ReasonGone counts, once an operation has walked its filter, the
	// jobs it matched at the start that it did not find any more (they
	// left the filter's status meanwhile): done plus every skipped
	// reason is then matched.
	ReasonGone = "no longer matches"

	// BulkSyncMaxDefault is the most matching jobs a bulk call by filter
	// without limit acts on inside the request (CONVEYOR_BULK_SYNC_MAX);
	// more make an operation.
	BulkSyncMaxDefault = 100
	// BulkChunkDefault / MaxBulkChunk bound the jobs one invocation of an
	// operation's worker acts on (CONVEYOR_BULK_CHUNK).
	BulkChunkDefault = 200
	MaxBulkChunk     = 200
	// OperationQuietAfterDefault: a running operation whose record was not
	// written for this long has lost its worker; recovery sends its
	// message again (CONVEYOR_OPERATION_QUIET_AFTER).
	OperationQuietAfterDefault = 2 * time.Minute
)

// Operation is a bulk operation as operators see it
// (GET /v1/admin/operations/{id}).
type Operation struct {
	ID     string `json:"id"`
	Action string `json:"action"`
	Filter Filter `json:"filter"`
	// Status is running, succeeded or failed.
	Status string `json:"status"`
	// Matched is how many jobs the filter selected when the operation
	// started; once it has finished, Done plus every Skipped count.
	Matched int `json:"matched"`
	// Done counts the jobs acted on; Skipped the others, by reason.
	Done    int            `json:"done"`
	Skipped map[string]int `json:"skipped"`
	// Progress is the share of Matched handled, 0–100 (100 once finished).
	Progress  int       `json:"progress"`
	Error     *string   `json:"error"`
	CreatedAt time.Time `json:"createdAt"`
	UpdatedAt time.Time `json:"updatedAt"`
}

// Location is the operation's path in the API.
func (o Operation) Location() string { return "/v1/admin/operations/" + o.ID }

// Finished reports whether the operation has no work left.
func (o Operation) Finished() bool { return o.Status != store.OperationRunning }

func skippedTotal(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

// progress is the share of matched that done and skipped make, 0–99
// while running, 100 once finished.
func progress(matched, handled int, finished bool) int {
	switch {
	case finished:
		return 100
	case matched <= 0:
		return 0
	}
	return min(handled*100/matched, 99)
}

// viewOf renders a stored operation.
func viewOf(op store.Operation) Operation {
	v := Operation{ID: op.ID, Action: op.Action, Filter: filterOf(op.Filter), Status: op.Status, Matched: op.Matched,
		Done: op.Done, Skipped: map[string]int{}, CreatedAt: op.CreatedAt.UTC(), UpdatedAt: op.UpdatedAt.UTC()}
	for k, n := range op.Skipped {
		v.Skipped[k] = n
	}
	v.Progress = progress(op.Matched, op.Done+skippedTotal(op.Skipped), v.Finished())
	if op.Error != "" {
		e := op.Error
		v.Error = &e
	}
	return v
}

func (f Filter) toMap() map[string]string {
	m := map[string]string{"status": f.Status}
	for k, v := range map[string]string{"tier": f.Tier, "errorCode": f.ErrorCode, "type": f.Type, "owner": f.Owner} {
		if v != "" {
			m[k] = v
		}
	}
	return m
}

func filterOf(m map[string]string) Filter {
	return Filter{Status: m["status"], Tier: m["tier"], ErrorCode: m["errorCode"], Type: m["type"], Owner: m["owner"]}
}

// finish closes op's walk: the jobs matched at the start and not found
// any more are skipped as ReasonGone, a walk that found more raises
// Matched, and op succeeds.
func finish(op *store.Operation) {
	if op.Skipped == nil {
		op.Skipped = map[string]int{}
	}
	walked := op.Done + skippedTotal(op.Skipped)
	switch {
	case walked < op.Matched:
		op.Skipped[ReasonGone] += op.Matched - walked
	case walked > op.Matched:
		op.Matched = walked
	}
	op.Status = OperationSucceeded
}

// record adds a chunk's outcomes to op and moves its walk past the chunk.
func record(op *store.Operation, chunk []string, res []outcome) {
	if op.Skipped == nil {
		op.Skipped = map[string]int{}
	}
	for i := range chunk {
		if res[i].done {
			op.Done++
		} else {
			op.Skipped[res[i].reason]++
		}
	}
	op.Cursor, op.Next, op.Chunk = op.Next, "", nil
	op.Seq++
	if op.Cursor == "" {
		finish(op)
	}
}

// OperationMessage is the system tier's message that works op's next
// chunk.
func OperationMessage(op store.Operation) queue.Message {
	return queue.Message{Kind: queue.KindOperation, Operation: op.ID, Send: op.Seq}
}

// startOperation stores an operation of action over f (matched jobs when
// counted) and sends its first message. A lost send is not an error: the
// operation is quiet, and recovery sends its message again.
func (s *Service) startOperation(ctx context.Context, action string, f Filter, matched int, by string) (Operation, error) {
	now := s.cfg.Now()
	op := store.Operation{ID: ids.New(ids.Operation), Action: action, Filter: f.toMap(), By: by, Status: store.OperationRunning,
		Matched: matched, Skipped: map[string]int{}, CreatedAt: now, UpdatedAt: now}
	if err := s.cfg.Store.CreateOperation(ctx, &op); err != nil {
		return Operation{}, fmt.Errorf("starting a bulk %s: %w", action, err)
	}
	log := s.cfg.Logger.With("operation_id", op.ID, "action", action, "filter", f.String(), "by", by, "matched", matched)
	if err := s.cfg.Sender.Send(ctx, job.System, OperationMessage(op)); err != nil {
		log.ErrorContext(ctx, "sending a bulk operation's first message failed; recovery sends it again", "error", err)
	}
	log.InfoContext(ctx, "bulk operation started by an operator")
	return viewOf(op), nil
}

// GetOperation returns bulk operation id; an unknown one is
// store.ErrNotFound.
func (s *Service) GetOperation(ctx context.Context, id string) (Operation, error) {
	if !ids.Valid(ids.Operation, id) {
		return Operation{}, store.ErrNotFound
	}
	op, err := s.cfg.Store.GetOperation(ctx, id)
	if err != nil {
		return Operation{}, err
	}
	return viewOf(op), nil
}

// BulkJobs acts on jobs on behalf of an operation: the change is written
// with the operation's id, and a job the operation acted on already gives
// job.ErrActedOn (submission.Service).
type BulkJobs interface {
	RequeueFor(ctx context.Context, id string, a job.Action, op string) (job.Job, error)
	StopFor(ctx context.Context, id string, why *job.Error, op string) (job.Job, error)
}

// WorkerConfig configures a Worker.
type WorkerConfig struct {
	// Store is the table.
	Store *store.Store
	// Jobs restarts and stops jobs for an operation.
	Jobs BulkJobs
	// Sender sends an operation's next message to the system tier.
	Sender Sender
	// Chunk is the most jobs one Work acts on (default BulkChunkDefault,
	// at most MaxBulkChunk).
	Chunk int
	// Crash, in tests, is called at the worker's crash points
	// (CrashSelected, CrashActed); an error it returns stops the chunk
	// there as if the worker died.
	Crash func(point string, op store.Operation) error
	// Now defaults to time.Now.
	Now func() time.Time
	// Logger defaults to slog.Default().
	Logger *slog.Logger
}

// Crash points of a Worker's chunk.
const (
	// CrashSelected: the chunk's jobs are recorded, none acted on.
	CrashSelected = "operation.selected"
	// CrashActed: every job of the chunk acted on, the progress not
	// recorded.
	CrashActed = "operation.acted"
)

// Worker works off bulk operations, one chunk per call: it selects the
// next jobs of the filter's walk and records them on the operation, acts
// on each (idempotently: a job keeps the operation's id in the write that
// changes it), then records the outcomes and moves the walk on — each
// record a conditional write, so a chunk run again after a crash, or by two
// workers at once, counts every job once and acts on it once.
type Worker struct {
	cfg WorkerConfig
}

// NewWorker returns a Worker, or an error naming what cfg lacks.
func NewWorker(cfg WorkerConfig) (*Worker, error) {
	if cfg.Store == nil || cfg.Jobs == nil || cfg.Sender == nil {
		return nil, errors.New("admin: the operation worker needs Store, Jobs and Sender")
	}
	switch {
	case cfg.Chunk == 0:
		cfg.Chunk = BulkChunkDefault
	case cfg.Chunk < 1 || cfg.Chunk > MaxBulkChunk:
		return nil, fmt.Errorf("admin: Chunk must be between 1 and %d, got %d", MaxBulkChunk, cfg.Chunk)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Worker{cfg: cfg}, nil
}

func (w *Worker) crash(point string, op store.Operation) error {
	if w.cfg.Crash == nil {
		return nil
	}
	return w.cfg.Crash(point, op)
}

// ChunkResult is what one Work did.
type ChunkResult struct {
	// Operation is the operation as recorded after the chunk.
	Operation store.Operation
	// Done and Skipped count the chunk's jobs.
	Done, Skipped int
	// More: the operation has work left, and this worker recorded the
	// chunk (so it sends the next message). False with Lost: another
	// worker recorded first, and goes on.
	More, Lost bool
}

// Work runs one chunk of operation id. An operation that is finished or
// gone does nothing.
func (w *Worker) Work(ctx context.Context, id string) (ChunkResult, error) {
	op, err := w.cfg.Store.GetOperation(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return ChunkResult{}, nil
	}
	if err != nil {
		return ChunkResult{}, err
	}
	if op.Status != store.OperationRunning {
		return ChunkResult{Operation: op}, nil
	}
	if len(op.Chunk) == 0 {
		if err := w.selectChunk(ctx, &op); err != nil {
			if errors.Is(err, store.ErrConflict) {
				return ChunkResult{Operation: op, Lost: true}, nil
			}
			if fail := w.failOn(ctx, &op, err); fail != nil {
				return ChunkResult{}, fail
			}
			return ChunkResult{Operation: op}, nil
		}
		if op.Status != store.OperationRunning {
			w.logFinished(ctx, op)
			return ChunkResult{Operation: op}, nil
		}
		if err := w.crash(CrashSelected, op); err != nil {
			return ChunkResult{}, err
		}
	}
	res := w.act(ctx, op)
	if err := w.crash(CrashActed, op); err != nil {
		return ChunkResult{}, err
	}
	chunk := op.Chunk
	record(&op, chunk, res)
	op.UpdatedAt = w.cfg.Now()
	if err := w.cfg.Store.SaveOperation(ctx, &op); err != nil {
		if errors.Is(err, store.ErrConflict) {
			return ChunkResult{Operation: op, Lost: true}, nil
		}
		return ChunkResult{}, err
	}
	out := ChunkResult{Operation: op, More: op.Status == store.OperationRunning}
	for _, o := range res {
		if o.done {
			out.Done++
		} else {
			out.Skipped++
		}
	}
	w.cfg.Logger.InfoContext(ctx, "bulk operation chunk recorded", "operation_id", op.ID, "action", op.Action,
		"chunk", op.Seq, "done", out.Done, "skipped", out.Skipped, "total_done", op.Done, "matched", op.Matched)
	if !out.More {
		w.logFinished(ctx, op)
	}
	return out, nil
}

func (w *Worker) logFinished(ctx context.Context, op store.Operation) {
	w.cfg.Logger.InfoContext(ctx, "bulk operation finished", "operation_id", op.ID, "action", op.Action, "status", op.Status,
		"filter", filterOf(op.Filter).String(), "by", op.By, "matched", op.Matched, "done", op.Done, "skipped", skippedTotal(op.Skipped))
}

// selectChunk reads the next page of the filter's walk into op.Chunk and
// records it (or, at the walk's end, finishes op).
func (w *Worker) selectChunk(ctx context.Context, op *store.Operation) error {
	f := filterOf(op.Filter)
	q, err := SearchRequest{Status: f.Status, Tier: f.Tier, Owner: f.Owner, Type: f.Type, ErrorCode: f.ErrorCode}.query()
	if err != nil {
		return err
	}
	next := ""
	if !op.Started || op.Cursor != "" {
		q.Limit, q.Cursor = w.cfg.Chunk, op.Cursor
		jobs, cursor, err := w.cfg.Store.SearchJobs(ctx, q)
		if err != nil {
			return fmt.Errorf("selecting the next jobs of operation %s: %w", op.ID, err)
		}
		for _, j := range jobs {
			op.Chunk = append(op.Chunk, j.ID)
		}
		next = cursor
	}
	op.Started, op.Next = true, next
	if len(op.Chunk) == 0 {
		op.Cursor = next
		if next == "" {
			finish(op)
		}
	}
	op.UpdatedAt = w.cfg.Now()
	return w.cfg.Store.SaveOperation(ctx, op)
}

// failOn records op as failed when err is one that no retry mends (a
// filter the inspector refuses); other errors are returned.
func (w *Worker) failOn(ctx context.Context, op *store.Operation, err error) error {
	if _, bad := invalid.As(err); !bad && !errors.Is(err, store.ErrBadCursor) {
		return err
	}
	op.Status, op.Error, op.Chunk = OperationFailed, err.Error(), nil
	op.UpdatedAt = w.cfg.Now()
	if serr := w.cfg.Store.SaveOperation(ctx, op); serr != nil && !errors.Is(serr, store.ErrConflict) {
		return serr
	}
	w.cfg.Logger.ErrorContext(ctx, "bulk operation failed", "operation_id", op.ID, "error", err)
	return nil
}

// act applies op's action to every job of its chunk, BulkConcurrency at
// once; a job op acted on already counts as done.
func (w *Worker) act(ctx context.Context, op store.Operation) []outcome {
	res := make([]outcome, len(op.Chunk))
	parallel(len(op.Chunk), BulkConcurrency, func(i int) {
		id := op.Chunk[i]
		var err error
		switch op.Action {
		case ActionRestart:
			_, err = w.cfg.Jobs.RequeueFor(ctx, id, job.Retry, op.ID)
		case ActionStop:
			_, err = w.cfg.Jobs.StopFor(ctx, id, &job.Error{Code: StopCode, Message: "stopped by an operator", Retryable: true}, op.ID)
		default:
			err = fmt.Errorf("unknown action %q", op.Action)
		}
		res[i] = classify(err)
		if res[i].reason == ReasonInternal {
			w.cfg.Logger.ErrorContext(ctx, "bulk operation: acting on a job failed", "operation_id", op.ID, "job_id", id, "error", err)
		}
	})
	return res
}

// classify sorts one job's result into done or skipped with its reason.
func classify(err error) outcome {
	var te *job.TransitionError
	switch {
	case err == nil, errors.Is(err, job.ErrActedOn):
		return outcome{done: true}
	case errors.Is(err, store.ErrNotFound):
		return outcome{reason: ReasonNotFound}
	case errors.As(err, &te):
		return outcome{reason: "job is " + string(te.From)}
	}
	return outcome{reason: ReasonInternal}
}

// Handle works the chunk m names and sends the operation's next message
// when work is left. An error leaves m to come back (its chunk is then run
// again, which acts on no job twice).
func (w *Worker) Handle(ctx context.Context, m queue.Message) error {
	res, err := w.Work(ctx, m.Operation)
	if err != nil {
		return fmt.Errorf("working operation %s: %w", m.Operation, err)
	}
	if !res.More {
		return nil
	}
	if err := w.cfg.Sender.Send(ctx, job.System, OperationMessage(res.Operation)); err != nil {
		return fmt.Errorf("sending operation %s's next message: %w", m.Operation, err)
	}
	return nil
}

// Resume sends again the message of every running operation not written
// since before (its worker died, or its message was lost), at most limit;
// it returns how many it sent. A second worker this starts beside a live
// one is harmless: only one records each chunk.
func (w *Worker) Resume(ctx context.Context, before time.Time, limit int) (int, error) {
	quiet, err := w.cfg.Store.QuietOperations(ctx, before, limit)
	if err != nil {
		return 0, err
	}
	sent := 0
	for _, id := range quiet {
		op, err := w.cfg.Store.GetOperation(ctx, id)
		if err != nil || op.Status != store.OperationRunning {
			continue
		}
		m := OperationMessage(op)
		m.Redelivery = w.cfg.Now().UnixMilli()
		if err := w.cfg.Sender.Send(ctx, job.System, m); err != nil {
			return sent, fmt.Errorf("resuming operation %s: %w", id, err)
		}
		w.cfg.Logger.WarnContext(ctx, "bulk operation resumed: its worker went quiet", "operation_id", id, "chunk", op.Seq,
			"quiet_since", op.UpdatedAt)
		sent++
	}
	return sent, nil
}
