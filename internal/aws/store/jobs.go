package store

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/conveyor/conveyor/internal/ids"
	"github.com/conveyor/conveyor/internal/job"
	"github.com/conveyor/conveyor/internal/resources"
)

const (
	jobSK  = "JOB"
	idemSK = "IDEM"
)

func jobPK(id string) string                   { return "JOB#" + id }
func idemPK(owner, hash string) string         { return "IDEM#" + owner + "#" + hash }
func sweepKey(st job.Status, id string) string { return string(st) + "#" + strconv.Itoa(shard(id)) }

// jobSweepKey is j's bySweep partition: status#shard, and for the statuses
// a paused tier holds (queued in the queue, parked in the table)
// status#tier#shard, so that a sweep leaves a paused tier's partitions
// unread instead of reading and skipping its jobs on every run.
func jobSweepKey(j *job.Job) string {
	if j.InBacklog() {
		return backlogKey(j.Owner, j.Tier, depthShard(j.ID))
	}
	st := sweepStatus(j)
	if tierKeyed(st) && j.Tier != "" {
		return TierSweepKey(st, j.Tier, shard(j.ID))
	}
	return sweepKey(st, j.ID)
}

// tierKeyed reports whether the bySweep partitions of st carry the tier.
func tierKeyed(st job.Status) bool { return st == job.Queued || st == Waiting }

// TierSweepKey returns the bySweep partition key of status st, tier t, in
// shard n (queued and waiting jobs).
func TierSweepKey(st job.Status, t job.Tier, n int) string {
	return string(st) + "#" + string(t) + "#" + strconv.Itoa(n)
}

// shard spreads a job over the sweep index's partitions.
func shard(id string) int {
	h := sha256.Sum256([]byte(id))
	return int(binary.BigEndian.Uint32(h[:4]) % resources.SweepShards)
}

// tierShard picks the copy of the tier flag a job's claims check.
func tierShard(id string) int {
	h := sha256.Sum256([]byte(id))
	return int(binary.BigEndian.Uint32(h[4:8]) % TierFlagShards)
}

// Waiting is the bySweep partitions' name for queued jobs parked in the
// table (job.Park): they are found by when they are due, apart from the
// queued jobs whose message is in the queue.
const Waiting job.Status = "waiting"

func sweepStatus(j *job.Job) job.Status {
	if j.Status == job.Queued && j.Waiting != "" {
		return Waiting
	}
	return j.Status
}

// SweepKey returns the bySweep partition key of status st in shard n.
func SweepKey(st job.Status, n int) string { return string(st) + "#" + strconv.Itoa(n) }

// sweepAt is the time a sweep looks at for a job in its status: when a
// scheduled job is due, when a queued job was queued (or may retry), when a
// running job last beat, when a finished job finished.
func sweepAt(j *job.Job) string {
	switch j.Status {
	case job.Scheduled:
		if j.ScheduleAt != nil {
			return sortTime(*j.ScheduleAt)
		}
	case job.Queued:
		// Parked: when it is to be sent again. In the queue: from when
		// recovery measures how long it went unreceived (the latest of
		// entering the queue, a visibility delay, a re-send's doubling).
		var at *time.Time
		for _, t := range []*time.Time{j.QueuedAt, j.RetryAt, j.StuckFrom} {
			if t != nil && (at == nil || t.After(*at)) {
				at = t
			}
		}
		if j.Waiting != "" && j.RetryAt != nil {
			at = j.RetryAt
		}
		if at != nil {
			return sortTime(*at)
		}
	case job.Running:
		if j.HeartbeatAt != nil {
			return sortTime(*j.HeartbeatAt)
		}
	case job.Succeeded, job.Failed, job.Cancelled:
		if j.FinishedAt != nil {
			return sortTime(*j.FinishedAt)
		}
	}
	return sortTime(j.UpdatedAt)
}

// jobItem renders j with its table and index keys, compact unless s
// writes job items with every attribute (WriteJobAttributes).
func (s *Store) jobItem(j *job.Job) (map[string]types.AttributeValue, error) {
	item, err := marshalJob(j)
	if err == nil && !s.jobAttributes {
		err = compactJob(item, j.Status)
	}
	if err != nil {
		return nil, fmt.Errorf("encoding job %s: %w", j.ID, err)
	}
	item[resources.AttrPK] = str(jobPK(j.ID))
	item[resources.AttrSK] = str(jobSK)
	item[resources.AttrOwner] = str(j.Owner)
	item[resources.AttrCreatedKey] = str(sortTime(j.CreatedAt) + "#" + j.ID)
	item[resources.AttrUpdatedKey] = str(sortTime(j.UpdatedAt) + "#" + j.ID)
	if s.jobAttributes {
		// The retired byOwnerStatus's key, for a rollback to code from
		// before the narrow indexes (docs/migrations.md).
		item[resources.AttrOwnerStatus] = str(jobStatusIndexKey(j.Owner, j.Status))
	}
	// The inspector's indexes (see inspect.go).
	item[resources.AttrEntity] = str(resources.EntityJob)
	item[resources.AttrJobStatus] = str(string(j.Status))
	if j.Tier != "" {
		item[resources.AttrJobTier] = str(string(j.Tier))
	}
	if j.Type != "" {
		item[resources.AttrJobType] = str(j.Type)
	}
	if j.Error != nil && j.Error.Code != "" {
		item[resources.AttrJobError] = str(j.Error.Code)
	}
	if j.Status != job.Stale {
		// Stale jobs leave the sparse sweep index: only TTL concerns them.
		item[resources.AttrSweepKey] = str(jobSweepKey(j))
		item[resources.AttrSweepAt] = str(sweepAt(j))
	}
	return item, nil
}

// GetJob returns the job with id, or ErrNotFound (also once it expired).
func (s *Store) GetJob(ctx context.Context, id string) (job.Job, error) {
	var j job.Job
	err := s.getWith(ctx, jobPK(id), jobSK, func(item map[string]types.AttributeValue) error { return unmarshalJob(item, &j) })
	return j, err
}

type idemRecord struct {
	JobID string `dynamodbav:"jobId"`
	// ExpiresAt is the record's TTL (IdempotencyTTL after its job is due).
	ExpiresAt int64 `dynamodbav:"expiresAt,omitempty"`
}

// CreateJob stores a new job together with its idempotency record in one
// transaction. When an active job of the same owner has the same hash, that
// job is returned with created=false and nothing is written. A finished job
// with the same hash does not block: its idempotency record is taken over.
// The same transaction takes a reference on every upload the job names,
// on the condition that it is confirmed, the owner's and usable (when one is
// not, nothing is written and the error is an *UploadUnavailableError), and,
// when j.NeedsAccount is set, checks that the owner has a connected account
// of that provider (else ErrNoAccount) unless this instance has seen it
// connected (knownAccounts). Nothing is read before: submission costs this
// one request.
func (s *Store) CreateJob(ctx context.Context, j *job.Job) (existing job.Job, created bool, err error) {
	seq := j.EventSeq
	c, err := s.newJobCreation(j)
	if err != nil {
		return job.Job{}, false, err
	}
	prev, conflicts := "", 0
	for attempt := 0; attempt < 5; attempt++ {
		tx, firstRef := c.transaction(s.table, prev)
		accountAt := firstRef + len(c.refs)
		activeAt := accountAt
		if c.account != nil {
			activeAt++
		}
		_, err = s.db.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: tx})
		var tc *types.TransactionCanceledException
		if c.depth != nil && c.entering && errors.As(err, &tc) && failedAt(tc, len(tx)-1) && !failedAt(tc, 0) {
			// Its owner's share of the queue is full, or a backlog is
			// ahead of it: the job waits in the backlog.
			j.EventSeq = seq
			if err := j.Backlog(s.QueueBound(j.Owner, j.Plan), s.now()); err != nil {
				return job.Job{}, false, err
			}
			if c, err = s.newJobCreation(j); err != nil {
				return job.Job{}, false, err
			}
			attempt--
			continue
		}
		if err == nil {
			j.Pending = nil
			if c.account != nil {
				s.accounts.add(j.Owner, j.NeedsAccount)
			}
			return *j, true, nil
		}
		if !errors.As(err, &tc) {
			return job.Job{}, false, fmt.Errorf("creating job %s: %w", j.ID, err)
		}
		if cancelled(tc.CancellationReasons, len(tx), 0) == errTxConflict {
			// A concurrent transaction on one of its items (the user's
			// uploads are shared by their jobs, the owner's queue counter
			// by its writes): nothing was written and no condition failed,
			// so the same transaction is sent again, as transact does.
			if conflicts++; conflicts >= txConflictAttempts {
				return job.Job{}, false, fmt.Errorf("creating job %s: transaction conflicts on every one of %d attempts: %w", j.ID, conflicts, err)
			}
			if err := conflictWait(ctx, conflicts-1); err != nil {
				return job.Job{}, false, err
			}
			attempt--
			continue
		}
		if failedAt(tc, 0) {
			// The id is taken: the same submission again (a schedule's
			// tick that fired twice derives the same job id).
			other, gerr := s.GetJob(ctx, j.ID)
			if gerr != nil {
				return job.Job{}, false, fmt.Errorf("creating job %s: the id is taken: %w", j.ID, gerr)
			}
			return other, false, nil
		}
		if !failedAt(tc, 1) {
			for i, id := range j.MediaRefs {
				if failedAt(tc, firstRef+i) {
					return job.Job{}, false, &UploadUnavailableError{UploadID: id}
				}
			}
			if c.account != nil && failedAt(tc, accountAt) {
				return job.Job{}, false, ErrNoAccount
			}
			if c.active != nil && failedAt(tc, activeAt) {
				// The owner has as many active jobs as its quota.
				return job.Job{}, false, activeQuotaError(c.quota)
			}
		}
		active, next, err := s.idempotencyHolder(ctx, j.Owner, j.Hash)
		if err != nil {
			return job.Job{}, false, err
		}
		if active != nil {
			return *active, false, nil
		}
		prev = next
	}
	return job.Job{}, false, fmt.Errorf("creating job %s: too much contention on its idempotency record", j.ID)
}

// jobCreation is what CreateJob writes in one transaction: the job, its
// idempotency record, its first events, its references on uploads and its
// counters.
type jobCreation struct {
	item, idem     map[string]types.AttributeValue
	events         []map[string]types.AttributeValue
	refs, counters []types.TransactWriteItem
	account        *types.TransactWriteItem // the connected-account check, if the job needs one
	// depth is the owner's queue counter's change, last in the
	// transaction; entering says it is conditional on room in the queue.
	depth    *types.TransactWriteItem
	entering bool
	// active is the owner's active-jobs counter's increment, conditional
	// on room under quota, just after the account check.
	active *types.TransactWriteItem
	quota  int
}

// ErrNoAccount means a job that needs its owner's connected account
// (job.Job.NeedsAccount) was not created: the owner has none
// (job.ErrNoAccount).
var ErrNoAccount = job.ErrNoAccount

// newJobCreation makes j's items (j's version, media references and event
// sequence are set as stored).
func (s *Store) newJobCreation(j *job.Job) (jobCreation, error) {
	j.Version = 1
	j.MediaRefs = mediaOf(j)
	var c jobCreation
	var err error
	if c.refs, err = s.referenceOps(j, s.now()); err != nil {
		return jobCreation{}, err
	}
	if c.events, err = s.eventItems(j); err != nil {
		return jobCreation{}, err
	}
	if c.counters, err = counterOps(s.table, j.Pending); err != nil {
		return jobCreation{}, err
	}
	if j.NeedsAccount != "" && !s.accounts.has(j.Owner, j.NeedsAccount) {
		if c.account, err = s.accountCheck(j.Owner, j.NeedsAccount); err != nil {
			return jobCreation{}, err
		}
	}
	j.Depth = ""
	if d, ok := s.depthOf(j); ok {
		op, err := s.depthOp(j, d, false)
		if err != nil {
			return jobCreation{}, err
		}
		c.depth, c.entering, j.Depth = &op, d.entering, d.want
	}
	j.Active = false
	if d, counted := s.activeDelta(j); d > 0 {
		c.quota = s.ActiveQuota(j.Owner, j.Plan)
		op, err := s.activeOp(j, d, c.quota)
		if err != nil {
			return jobCreation{}, err
		}
		c.active, j.Active = &op, counted
	}
	j.EventSeq += int64(len(j.Pending))
	if c.item, err = s.jobItem(j); err != nil {
		return jobCreation{}, err
	}
	due := j.CreatedAt
	if j.ScheduleAt != nil && j.ScheduleAt.After(due) {
		due = *j.ScheduleAt
	}
	if c.idem, err = attributevalue.MarshalMap(idemRecord{JobID: j.ID, ExpiresAt: due.Add(IdempotencyTTL).Unix()}); err != nil {
		return jobCreation{}, err
	}
	for k, v := range keyOf(idemPK(j.Owner, j.Hash), idemSK) {
		c.idem[k] = v
	}
	return c, nil
}

// transaction is the creation's transaction: the job on the condition that
// its id is new, the idempotency record on the condition that it is new
// (prev empty) or still names the job prev, then the events, the upload
// references (from firstRef on), the account check and the counters.
func (c jobCreation) transaction(table, prev string) (tx []types.TransactWriteItem, firstRef int) {
	jobCond := condition(expression.AttributeNotExists(expression.Name(resources.AttrPK)))
	idemCond := expression.AttributeNotExists(expression.Name(resources.AttrPK))
	if prev != "" {
		idemCond = expression.Name("jobId").Equal(expression.Value(prev))
	}
	ic := condition(idemCond)
	tx = []types.TransactWriteItem{
		{Put: &types.Put{TableName: aws.String(table), Item: c.item, ConditionExpression: jobCond.Condition(), ExpressionAttributeNames: jobCond.Names()}},
		{Put: &types.Put{TableName: aws.String(table), Item: c.idem, ConditionExpression: ic.Condition(), ExpressionAttributeNames: ic.Names(), ExpressionAttributeValues: ic.Values()}},
	}
	for _, ev := range c.events {
		tx = append(tx, types.TransactWriteItem{Put: &types.Put{TableName: aws.String(table), Item: ev}})
	}
	firstRef = len(tx)
	tx = append(tx, c.refs...)
	if c.account != nil {
		tx = append(tx, *c.account)
	}
	if c.active != nil {
		tx = append(tx, *c.active)
	}
	tx = append(tx, c.counters...)
	if c.depth != nil {
		tx = append(tx, *c.depth)
	}
	return tx, firstRef
}

// idempotencyHolder reads who holds owner's hash after a creation lost it:
// the holder's job when it is active (the submission's answer), else the
// job id the next attempt's condition names ("" when the record is gone:
// try again as new; a finished, missing or expired holder's id: take the
// record over).
func (s *Store) idempotencyHolder(ctx context.Context, owner, hash string) (active *job.Job, prev string, err error) {
	var rec idemRecord
	switch found, expired, err := s.getRaw(ctx, idemPK(owner, hash), idemSK, &rec); {
	case err != nil:
		return nil, "", err
	case !found:
		return nil, "", nil // released meanwhile: try again as new
	case expired:
		return nil, rec.JobID, nil // past its TTL but not yet deleted: take it over
	}
	other, err := s.GetJob(ctx, rec.JobID)
	switch {
	case errors.Is(err, ErrNotFound):
	case err != nil:
		return nil, "", err
	case other.Status.Active():
		return &other, "", nil
	}
	return nil, rec.JobID, nil
}

// SaveJob writes j if nobody changed it since it was read (its Version), and
// advances j.Version. It returns ErrConflict when the race was lost; the
// caller re-reads and decides again.
func (s *Store) SaveJob(ctx context.Context, j *job.Job) error {
	return s.saveJob(ctx, j, nil, nil)
}

// ErrPaused is returned by ClaimJob when the job's tier is paused
// (job.ErrPaused).
var ErrPaused = job.ErrPaused

// ClaimJob saves a job a worker has just claimed (job.Claim), on condition
// that its tier is not paused at this moment: a pause that answered before
// the claim is honoured, whatever the consumers' caches say. ErrPaused
// then, ErrConflict when the job changed meanwhile.
func (s *Store) ClaimJob(ctx context.Context, j *job.Job) error {
	c := condition(expression.AttributeNotExists(expression.Name("paused")).Or(expression.Name("paused").Equal(expression.Value(false))))
	check := types.TransactWriteItem{ConditionCheck: &types.ConditionCheck{
		TableName: aws.String(s.table), Key: tierFlagKey(j.Tier, tierShard(j.ID)),
		ConditionExpression: c.Condition(), ExpressionAttributeNames: c.Names(), ExpressionAttributeValues: c.Values(),
	}}
	return s.saveJob(ctx, j, nil, []types.TransactWriteItem{check})
}

// saveJob writes j on condition of its version, with its pending events,
// puts (other items, written unconditionally) and checks in one
// transaction; a job change alone is one conditional PutItem.
//
// A job that enters the queue while its owner's share of it is full (or a
// backlog is ahead of it) is saved into the backlog instead (job.Backlog);
// one taken out of the backlog (job.Admit) then is not saved: ErrQueueFull.
func (s *Store) saveJob(ctx context.Context, j *job.Job, puts []map[string]types.AttributeValue, checks []types.TransactWriteItem) error {
	prevDepth := j.Depth
	err := s.saveJobOnce(ctx, j, puts, checks, false)
	if !errors.Is(err, ErrQueueFull) || prevDepth == job.DepthBacklog {
		return err
	}
	if j.Status != job.Queued || j.Waiting != "" {
		// Active since before it was counted (stored before the counters):
		// counted from now on, wherever it is.
		return s.saveJobOnce(ctx, j, puts, checks, true)
	}
	if err := j.Backlog(s.QueueBound(j.Owner, j.Plan), s.now()); err != nil {
		return err
	}
	return s.saveJobOnce(ctx, j, puts, checks, false)
}

// saveJobOnce is saveJob's one write; force counts a job entering the
// queue whatever the room there.
func (s *Store) saveJobOnce(ctx context.Context, j *job.Job, puts []map[string]types.AttributeValue, checks []types.TransactWriteItem, force bool) error {
	prev, prevSeq, prevDepth, prevActive := j.Version, j.EventSeq, j.Depth, j.Active
	var depth, active []types.TransactWriteItem
	if d, ok := s.depthOf(j); ok {
		d.entering = d.entering && !force
		op, err := s.depthOp(j, d, prevDepth == job.DepthBacklog)
		if err != nil {
			return err
		}
		depth, j.Depth = []types.TransactWriteItem{op}, d.want
	}
	if d, counted := s.activeDelta(j); d != 0 {
		// Into or out of the owner's active jobs: no condition (only a
		// creation is refused over the quota).
		op, err := s.activeOp(j, d, 0)
		if err != nil {
			j.Depth = prevDepth
			return err
		}
		active, j.Active = []types.TransactWriteItem{op}, counted
	}
	restore := func() { j.Version, j.EventSeq, j.Depth, j.Active = prev, prevSeq, prevDepth, prevActive }
	j.Version++
	events, err := s.eventItems(j)
	if err != nil {
		restore()
		return err
	}
	counters, err := counterOps(s.table, j.Pending)
	if err != nil {
		restore()
		return err
	}
	j.EventSeq += int64(len(j.Pending))
	item, err := s.jobItem(j)
	if err != nil {
		restore()
		return err
	}
	// The write's own id: a write whose answer was lost and whose retry
	// (the SDK's) then failed the version condition it had itself moved
	// on is recognised as landed (landed), not taken for another writer's.
	writeID := ids.Hex(8)
	item[attrWriteID] = str(writeID)
	c := condition(expression.Name("version").Equal(expression.Value(prev)))
	if len(events) == 0 && len(puts) == 0 && len(checks) == 0 && len(depth) == 0 && len(active) == 0 {
		_, err = s.db.PutItem(ctx, &dynamodb.PutItemInput{
			TableName: aws.String(s.table), Item: item,
			ConditionExpression: c.Condition(), ExpressionAttributeNames: c.Names(), ExpressionAttributeValues: c.Values(),
		})
		if isConditionFailed(err) && s.landed(ctx, j.ID, writeID) {
			err = nil
		}
	} else {
		// The events and the change they describe: one transaction.
		tx := []types.TransactWriteItem{{Put: &types.Put{TableName: aws.String(s.table), Item: item,
			ConditionExpression: c.Condition(), ExpressionAttributeNames: c.Names(), ExpressionAttributeValues: c.Values()}}}
		for _, it := range slices.Concat(events, puts) {
			tx = append(tx, types.TransactWriteItem{Put: &types.Put{TableName: aws.String(s.table), Item: it}})
		}
		// The owner's active-jobs counter (unconditional).
		tx = append(tx, active...)
		// The hourly counters of a finish: written with it (admin.go).
		tx = append(tx, counters...)
		// The owner's queue counter, just before the checks.
		tx = append(tx, depth...)
		tx = append(tx, checks...)
		err = s.transact(ctx, tx, len(checks), len(depth))
		if errors.Is(err, ErrConflict) && s.landed(ctx, j.ID, writeID) {
			err = nil
		}
		if errors.Is(err, ErrPaused) || errors.Is(err, ErrConflict) || errors.Is(err, ErrQueueFull) {
			restore()
			return err
		}
	}
	if err != nil {
		restore()
		if isConditionFailed(err) {
			return ErrConflict
		}
		return fmt.Errorf("saving job %s: %w", j.ID, err)
	}
	j.Pending = nil
	return nil
}

// attrWriteID is the job item's attribute naming the write that wrote it.
const attrWriteID = "writeId"

// landed reports whether the job item with id is the one the write
// writeID put (one strongly consistent read of that attribute): a write
// whose condition failed only because an earlier attempt of the same
// write had already landed.
func (s *Store) landed(ctx context.Context, id, writeID string) bool {
	res, err := s.db.GetItem(ctx, &dynamodb.GetItemInput{
		TableName: aws.String(s.table), Key: keyOf(jobPK(id), jobSK), ConsistentRead: aws.Bool(true),
		ProjectionExpression: aws.String(attrWriteID),
	})
	if err != nil {
		return false
	}
	got, ok := res.Item[attrWriteID].(*types.AttributeValueMemberS)
	return ok && got.Value == writeID
}

// txConflictAttempts bounds how often a transaction cancelled only by
// DynamoDB's transaction conflicts (another transaction on one of its
// items at the same moment) is sent again: with conflictWait's doubling
// waits, capped at 640 ms, ten attempts spend about two seconds waiting,
// which outlasts a running job's own writes (a heartbeat, a record) under
// load, so an owner's cancel or an operator's stop is not refused because
// the job's run was writing at the same moment.
const txConflictAttempts = 10

// transact runs a job's transaction: tx[0] is the job's conditional Put,
// its last checks items are ConditionChecks. A transaction cancelled by a
// conflict with a concurrent one (the hot items every claim and finish
// touch: the tier flag's copies, the hourly counters) wrote nothing and is
// sent again after a short jittered wait; it is not a lost race for the
// job. ErrConflict when the job's condition failed, ErrPaused when a check
// did, ErrQueueFull when the owner's queue counter's (the depth item just
// before the checks, if depth is 1) did.
func (s *Store) transact(ctx context.Context, tx []types.TransactWriteItem, checks, depth int) error {
	for attempt := 0; ; attempt++ {
		_, err := s.db.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: tx})
		var tc *types.TransactionCanceledException
		if !errors.As(err, &tc) {
			return err
		}
		if depth > 0 && !failedAt(tc, 0) && failedAt(tc, len(tx)-checks-1) {
			return ErrQueueFull
		}
		switch outcome := cancelled(tc.CancellationReasons, len(tx), checks); {
		case outcome != errTxConflict:
			return outcome
		case attempt+1 >= txConflictAttempts:
			return fmt.Errorf("transaction conflicts on every one of %d attempts: %w", txConflictAttempts, err)
		}
		if err := conflictWait(ctx, attempt); err != nil {
			return err
		}
	}
}

// conflictWait waits before the attempt+1-th sending of a transaction
// cancelled by a conflict: 10 ms doubling, half of it jittered.
func conflictWait(ctx context.Context, attempt int) error {
	wait := time.Duration(10<<min(attempt, 6)) * time.Millisecond
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(wait/2 + rand.N(wait/2+1)):
		return nil
	}
}

// errTxConflict: a transaction was cancelled by conflicts alone.
var errTxConflict = errors.New("transaction conflict")

// cancelled says why a transaction of n items, the last checks of them
// ConditionChecks, was cancelled: ErrConflict when the job's condition
// (item 0) failed, ErrPaused when a check's did, errTxConflict when no
// condition failed and a concurrent transaction conflicted, ErrConflict
// for anything else (the caller re-reads and decides again).
func cancelled(reasons []types.CancellationReason, n, checks int) error {
	if len(reasons) != n {
		return ErrConflict
	}
	conflict := false
	for i, r := range reasons {
		switch aws.ToString(r.Code) {
		case "ConditionalCheckFailed":
			if i == 0 || i < n-checks {
				return ErrConflict
			}
			return ErrPaused
		case "TransactionConflict":
			conflict = true
		}
	}
	if conflict {
		return errTxConflict
	}
	return ErrConflict
}

// UpdateJob reads the job, applies fn and saves it, retrying on conflicts.
// fn returns an error to abort without writing.
func (s *Store) UpdateJob(ctx context.Context, id string, fn func(*job.Job) error) (job.Job, error) {
	return s.updateJob(ctx, id, nil, fn, nil)
}

// updateAttempts bounds how often updateJob reads, changes and writes a
// job whose version changed under it.
const updateAttempts = 10

// updateJob is UpdateJob starting from read when the caller has just read
// the job (one request fewer when nobody changed it since; nil: read it
// first), and writing puts — other items of the table, unconditionally — in
// the same transaction as the job's change: once, whichever attempt
// succeeds.
func (s *Store) updateJob(ctx context.Context, id string, read *job.Job, fn func(*job.Job) error, puts []map[string]types.AttributeValue) (job.Job, error) {
	for attempt := range updateAttempts {
		if attempt >= 2 {
			// A job written as often as it is read here (a running job's
			// heartbeat and records under a slow table): a jittered wait
			// takes this writer out of step with the other.
			if err := conflictWait(ctx, attempt-2); err != nil {
				return job.Job{}, err
			}
		}
		var j job.Job
		if read != nil {
			j, read = *read, nil
		} else {
			var err error
			if j, err = s.GetJob(ctx, id); err != nil {
				return job.Job{}, err
			}
		}
		if err := fn(&j); err != nil {
			return j, err
		}
		switch err := s.saveJob(ctx, &j, puts, nil); {
		case errors.Is(err, ErrConflict):
			continue
		case err != nil:
			return job.Job{}, err
		}
		return j, nil
	}
	return job.Job{}, fmt.Errorf("updating job %s: %w (gave up after retries)", id, ErrConflict)
}

// ListQuery selects jobs of one owner (job.ListQuery).
type ListQuery = job.ListQuery

// ListJobs returns one page of jobs, newest first (or oldest first by
// updatedAt when UpdatedSince is set), and the cursor of the next page.
// The owner indexes carry keys and a few attributes, not jobs: the page's
// jobs are read with BatchGetItem (strongly consistent), and a job whose
// status no longer matches the filter (an index lags its table by a
// moment) is left out.
func (s *Store) ListJobs(ctx context.Context, q ListQuery) ([]job.Job, string, error) {
	in, pg, err := s.listInput(q)
	if err != nil {
		return nil, "", err
	}
	start, err := pg.decode(q.Cursor)
	if err != nil {
		return nil, "", err
	}
	in.ExclusiveStartKey = start
	ids, entries, next, err := s.entriesPage(ctx, in, pg, q.Limit, func(item map[string]types.AttributeValue) (string, bool) {
		id, ok := jobIDOf(item)
		return id, ok && !s.expired(item)
	})
	if err != nil {
		return nil, "", fmt.Errorf("listing jobs: %w", err)
	}
	jobs, last, err := s.getJobsWithin(ctx, ids, MaxPageBytes)
	if err != nil {
		return nil, "", err
	}
	if q.Status != "" {
		jobs = slices.DeleteFunc(jobs, func(j job.Job) bool { return j.Status != q.Status })
	}
	return pg.bound(jobs, entries, next, last)
}

// jobIDOf is the job id in an index entry's table key.
func jobIDOf(item map[string]types.AttributeValue) (string, bool) {
	pk, ok := item[resources.AttrPK].(*types.AttributeValueMemberS)
	if !ok {
		return "", false
	}
	id, ok := strings.CutPrefix(pk.Value, jobPK(""))
	return id, ok && id != ""
}

// JobChange is what the owner's change index says of a job (job.Change).
type JobChange = job.Change

// ChangedJobs returns up to limit of owner's jobs updated at or after since
// (an updatedKey, SinceKey), oldest first, from byOwnerUpdatedKeys alone:
// one Query, nothing read from the table. It is what the SSE stream polls
// for: which jobs have events it has not sent.
func (s *Store) ChangedJobs(ctx context.Context, owner, since string, limit int) ([]JobChange, error) {
	in, _, err := s.listInput(ListQuery{Owner: owner, UpdatedSince: since})
	if err != nil {
		return nil, err
	}
	in.Limit = aws.Int32(int32(limit))
	out, err := s.db.Query(ctx, in)
	if err != nil {
		return nil, fmt.Errorf("reading the jobs changed since %s: %w", since, err)
	}
	changes := make([]JobChange, 0, len(out.Items))
	for _, item := range out.Items {
		id, ok := jobIDOf(item)
		if !ok || s.expired(item) {
			continue
		}
		var c struct {
			UpdatedKey string `dynamodbav:"updatedKey"`
			EventSeq   int64  `dynamodbav:"eventSeq"`
		}
		if err := attributevalue.UnmarshalMap(item, &c); err != nil {
			return nil, fmt.Errorf("decoding a changed job: %w", err)
		}
		at, _ := time.Parse(sortTimeLayout, strings.TrimSuffix(c.UpdatedKey, "#"+id))
		changes = append(changes, JobChange{ID: id, UpdatedAt: at, EventSeq: c.EventSeq})
	}
	return changes, nil
}

// CountJobs counts an owner's jobs (of one status when q.Status is set) from
// the index, paging through it with Select COUNT; it never scans. A status
// is a filter on the owner's entries of byOwnerUpdatedKeys: the count reads
// every entry of the owner (about 150 bytes each).
func (s *Store) CountJobs(ctx context.Context, q ListQuery) (int, error) {
	q.UpdatedSince = ""
	in, _, err := s.listInput(q)
	if err != nil {
		return 0, err
	}
	in.ScanIndexForward = nil
	return s.countQuery(ctx, in)
}

// listInput builds q's Query and describes its page of the index:
//
//	status  updatedSince  index               order
//	-       -             byOwnerCreated      newest created first
//	set     -             byOwnerUpdatedKeys  newest updated first (a filter on jobStatus)
//	any     set           byOwnerUpdatedKeys  oldest updated first (status: a filter on jobStatus)
func (s *Store) listInput(q ListQuery) (*dynamodb.QueryInput, page, error) {
	b := expression.NewBuilder()
	pg := page{partitionAttr: resources.AttrOwner, partition: q.Owner, since: q.UpdatedSince}
	kc := expression.Key(resources.AttrOwner).Equal(expression.Value(q.Owner))
	forward := false
	switch {
	case q.Status == "" && q.UpdatedSince == "":
		pg.index, pg.sortAttr = s.ix(resources.IndexByOwner), resources.AttrCreatedKey
	default:
		pg.index, pg.sortAttr = s.ix(resources.IndexByOwnerUpdated), resources.AttrUpdatedKey
		if q.UpdatedSince != "" {
			kc = kc.And(expression.Key(pg.sortAttr).GreaterThanEqual(expression.Value(q.UpdatedSince)))
			forward = true
		}
		if q.Status != "" {
			b = b.WithFilter(expression.Name(resources.AttrJobStatus).Equal(expression.Value(string(q.Status))))
			pg.filter = resources.AttrJobStatus + "=" + string(q.Status)
		}
	}
	e, err := b.WithKeyCondition(kc).Build()
	if err != nil {
		return nil, page{}, fmt.Errorf("building the list query: %w", err)
	}
	return &dynamodb.QueryInput{
		TableName: aws.String(s.table), IndexName: aws.String(pg.index),
		KeyConditionExpression: e.KeyCondition(), FilterExpression: e.Filter(),
		ExpressionAttributeNames: e.Names(), ExpressionAttributeValues: e.Values(),
		ScanIndexForward: aws.Bool(forward),
	}, pg, nil
}

// SinceKey renders an updatedSince time for ListQuery.UpdatedSince
// (job.SortTime, the store's sort-key rendering).
var SinceKey = job.SortTime

// countQuery counts the items in matches, following every page (a count
// Query stops at 1 MB of items read).
func (s *Store) countQuery(ctx context.Context, in *dynamodb.QueryInput) (int, error) {
	in.Select = types.SelectCount
	total := 0
	for {
		out, err := s.db.Query(ctx, in)
		if err != nil {
			return 0, fmt.Errorf("counting jobs: %w", err)
		}
		total += int(out.Count)
		if len(out.LastEvaluatedKey) == 0 {
			return total, nil
		}
		in.ExclusiveStartKey = out.LastEvaluatedKey
	}
}

// JobLease reads a job's status, lease and version with one strongly
// consistent read of those attributes only: the check a run makes before a
// call with a side effect when its last sight of the job is older than its
// cancel notice (docs/leases.md).
func (s *Store) JobLease(ctx context.Context, id string) (job.Lease, error) {
	proj := expression.NamesList(expression.Name("status"), expression.Name("leaseOwner"), expression.Name("leaseUntil"),
		expression.Name("version"), expression.Name(resources.AttrExpiresAt))
	e, err := expression.NewBuilder().WithProjection(proj).Build()
	if err != nil {
		return job.Lease{}, err
	}
	res, err := s.db.GetItem(ctx, &dynamodb.GetItemInput{
		TableName: aws.String(s.table), Key: keyOf(jobPK(id), jobSK), ConsistentRead: aws.Bool(true),
		ProjectionExpression: e.Projection(), ExpressionAttributeNames: e.Names(),
	})
	if err != nil {
		return job.Lease{}, fmt.Errorf("reading the lease of job %s: %w", id, err)
	}
	if res.Item == nil || s.expired(res.Item) {
		return job.Lease{}, ErrNotFound
	}
	var l job.Lease
	if err := attributevalue.UnmarshalMap(res.Item, &l); err != nil {
		return job.Lease{}, fmt.Errorf("decoding the lease of job %s: %w", id, err)
	}
	return l, nil
}
