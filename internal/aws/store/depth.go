package store

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/conveyor/conveyor/internal/job"
	"github.com/conveyor/conveyor/internal/resources"
)

// An owner's depth in a tier's queue is counted in DepthShards items per
// owner and tier (DEPTH#owner#tier#k, a job in shard k by its id): n, its jobs counted in the queue (queued or
// running, job.DepthQueue), and b, those waiting in its backlog in the
// table (job.DepthBacklog). Every write of a job whose counter changes
// (job.Job.Depth as stored against job.Job.WantDepth) changes the item in
// the same transaction, so the counts are exact whatever crashes or
// retries: a transaction lands whole or not at all, and a job's write is
// conditional on its version. A job that would enter the queue while its
// shard holds its share of the owner's QueueBound (rounded up), or has a
// backlog ahead of it, goes into the backlog instead; recovery's release
// admits each shard's backlog, oldest first, as room frees (Backlogs,
// BacklogJobs). The shards spread one owner's concurrent writes (DynamoDB
// cancels concurrent transactions on one item) over several items.

// DepthShards is how many counters an owner's depth in a tier is split
// over.
const DepthShards = 4

const depthSK = "DEPTH"

func depthPK(owner string, tier job.Tier, k int) string {
	return "DEPTH#" + owner + "#" + string(tier) + "#" + strconv.Itoa(k)
}

// depthShard is the counter shard of job id.
func depthShard(id string) int {
	h := sha256.Sum256([]byte(id))
	return int(binary.BigEndian.Uint32(h[8:12]) % DepthShards)
}

// ShardBound is a shard's share of bound, rounded up (0: no bound).
func ShardBound(bound int) int { return (bound + DepthShards - 1) / DepthShards }

// backlogMarkKey is the sweep index partition that lists the counters of
// owners with a backlog, spread over the index's shards by owner.
func backlogMarkKey(owner string) string { return backlogMarksKey(shard(owner)) }

// backlogMarksKey is the sweep index partition of shard n's backlog marks.
func backlogMarksKey(n int) string { return "backlogs#" + strconv.Itoa(n) }

// backlogKey is the sweep index partition of owner's backlog in tier,
// ordered by when each job was queued.
func backlogKey(owner string, tier job.Tier, k int) string {
	return "backlog#" + string(tier) + "#" + strconv.Itoa(k) + "#" + owner
}

// ErrQueueFull: a backlogged job could not be admitted, its owner's share
// of the tier's queue being full.
var ErrQueueFull = errors.New("the owner's share of the queue is full")

// SetQueueBound sets the most jobs of an owner (on a plan) a tier's queue
// may hold (0: no bound, and the owner's jobs are not counted).
func (s *Store) SetQueueBound(bound func(owner, plan string) int) { s.queueBound = bound }

// QueueBound is the most jobs of owner on plan a tier's queue may hold (0:
// no bound).
func (s *Store) QueueBound(owner, plan string) int {
	if s.queueBound == nil {
		return 0
	}
	return max(s.queueBound(owner, plan), 0)
}

// depthChange is a job write's change to its owner's counters.
type depthChange struct {
	want           string
	dn, db         int
	entering, mark bool
	bound          int
}

// depthOf is the change of j's write from its stored counter (j.Depth) to
// the one it wants; ok is false when there is none.
func (s *Store) depthOf(j *job.Job) (c depthChange, ok bool) {
	have, want := j.Depth, j.WantDepth()
	c.bound = s.QueueBound(j.Owner, j.Plan)
	if c.bound == 0 && have == "" {
		want = "" // not counted: no bound when it entered
	}
	if want == have {
		return c, false
	}
	c.want = want
	in := func(d string) int {
		if d == job.DepthQueue {
			return 1
		}
		return 0
	}
	bl := func(d string) int {
		if d == job.DepthBacklog {
			return 1
		}
		return 0
	}
	c.dn, c.db = in(want)-in(have), bl(want)-bl(have)
	c.bound = ShardBound(c.bound)
	c.entering = c.dn > 0 && c.bound > 0
	c.mark = c.db > 0
	return c, true
}

// depthOp is c as a transaction item on j's owner's counter: conditional,
// when the job enters the queue, on room there (fewer than the bound) and,
// unless it comes from the backlog, on no backlog ahead of it.
func (s *Store) depthOp(j *job.Job, c depthChange, fromBacklog bool) (types.TransactWriteItem, error) {
	var upd expression.UpdateBuilder
	if c.dn != 0 {
		upd = upd.Add(expression.Name("n"), expression.Value(c.dn))
	}
	if c.db != 0 {
		upd = upd.Add(expression.Name("b"), expression.Value(c.db))
	}
	upd = upd.Set(expression.Name("owner"), expression.Value(j.Owner)).
		Set(expression.Name("tier"), expression.Value(string(j.Tier))).
		Set(expression.Name("plan"), expression.Value(j.Plan)).
		Set(expression.Name("shard"), expression.Value(depthShard(j.ID)))
	if at, queued, ok := leftAfterARun(j, c); ok {
		// Progress: a job received from the queue left it (Depth.Left).
		upd = upd.Set(expression.Name("left"), expression.Value(at)).
			Set(expression.Name("leftQueued"), expression.Value(queued))
	}
	if c.mark {
		upd = upd.Set(expression.Name(resources.AttrSweepKey), expression.Value(backlogMarkKey(j.Owner))).
			Set(expression.Name(resources.AttrSweepAt), expression.Value("0"))
	}
	b := expression.NewBuilder().WithUpdate(upd)
	if c.entering {
		room := expression.AttributeNotExists(expression.Name("n")).Or(expression.Name("n").LessThan(expression.Value(c.bound)))
		if !fromBacklog {
			none := expression.AttributeNotExists(expression.Name("b")).Or(expression.Name("b").LessThanEqual(expression.Value(0)))
			room = room.And(none)
		}
		b = b.WithCondition(room)
	}
	e, err := b.Build()
	if err != nil {
		return types.TransactWriteItem{}, err
	}
	return types.TransactWriteItem{Update: &types.Update{
		TableName: aws.String(s.table), Key: keyOf(depthPK(j.Owner, j.Tier, depthShard(j.ID)), depthSK),
		UpdateExpression: e.Update(), ConditionExpression: e.Condition(),
		ExpressionAttributeNames: e.Names(), ExpressionAttributeValues: e.Values(),
	}}, nil
}

// leftAfterARun reports whether c takes j out of the queue after it was
// received from it (it ran since it was last queued: a heartbeat at or
// after that), and when it left and had been queued; a job cancelled or
// stopped before any delivery is no sign that the queue moves.
func leftAfterARun(j *job.Job, c depthChange) (at, queued time.Time, ok bool) {
	if c.dn >= 0 || j.QueuedAt == nil || j.HeartbeatAt == nil || j.HeartbeatAt.Before(*j.QueuedAt) {
		return time.Time{}, time.Time{}, false
	}
	at = j.UpdatedAt
	if j.FinishedAt != nil {
		at = *j.FinishedAt
	}
	return at.UTC(), j.QueuedAt.UTC(), true
}

// Depth is an owner's count in one tier, or in one shard of it.
type Depth struct {
	Owner string   `dynamodbav:"owner"`
	Tier  job.Tier `dynamodbav:"tier"`
	Plan  string   `dynamodbav:"plan"`
	Shard int      `dynamodbav:"shard"`
	// InQueue counts the owner's jobs in the queue (queued or running).
	InQueue int `dynamodbav:"n"`
	// Backlog counts the owner's jobs waiting in its backlog.
	Backlog int `dynamodbav:"b"`
	// Left is when the last of the shard's jobs that had been received
	// from the queue left it (finished), and LeftQueued when that job had
	// been queued: the sign that the owner's messages move, which
	// recovery reads before it re-sends a job of the shard (a message
	// SendMessage took stays in the queue: only one never sent is lost).
	// Written in the finishing job's own transaction, so they cost no
	// write of their own.
	Left       *time.Time `dynamodbav:"left,omitempty"`
	LeftQueued *time.Time `dynamodbav:"leftQueued,omitempty"`
}

// JobDepthKey names the counter shard that job id of owner is counted in
// (the key of JobDepth's item).
func JobDepthKey(owner string, tier job.Tier, id string) string {
	return depthPK(owner, tier, depthShard(id))
}

// JobDepth reads the counter shard that job id of owner is counted in.
func (s *Store) JobDepth(ctx context.Context, owner string, tier job.Tier, id string) (Depth, error) {
	return s.readDepth(ctx, owner, tier, depthShard(id))
}

// QueueDepth reads owner's counts in tier, summed over the shards
// (strongly consistent reads).
func (s *Store) QueueDepth(ctx context.Context, owner string, tier job.Tier) (Depth, error) {
	sum := Depth{Owner: owner, Tier: tier}
	for k := range DepthShards {
		d, err := s.readDepth(ctx, owner, tier, k)
		if err != nil {
			return Depth{}, err
		}
		sum.InQueue += d.InQueue
		sum.Backlog += d.Backlog
	}
	return sum, nil
}

// readDepth reads owner's counts in shard k of tier.
func (s *Store) readDepth(ctx context.Context, owner string, tier job.Tier, k int) (Depth, error) {
	var d Depth
	if _, _, err := s.getRaw(ctx, depthPK(owner, tier, k), depthSK, &d); err != nil {
		return Depth{}, err
	}
	d.Owner, d.Tier, d.Shard = owner, tier, k
	return d, nil
}

// Backlogs returns the counter shards of the owners that have, or lately
// had, a backlog, in the sweep index's shards in shards (nil: every
// shard): one Query per shard, then a read of each counter.
func (s *Store) Backlogs(ctx context.Context, shards []int) ([]Depth, error) {
	var out []Depth
	for n := range resources.SweepShards {
		if shards != nil && !slices.Contains(shards, n) {
			continue
		}
		kc := expression.Key(resources.AttrSweepKey).Equal(expression.Value(backlogMarksKey(n)))
		e, err := expression.NewBuilder().WithKeyCondition(kc).Build()
		if err != nil {
			return nil, err
		}
		p := dynamodb.NewQueryPaginator(s.db, &dynamodb.QueryInput{
			TableName: aws.String(s.table), IndexName: aws.String(s.ix(resources.IndexBySweep)),
			KeyConditionExpression: e.KeyCondition(), ExpressionAttributeNames: e.Names(), ExpressionAttributeValues: e.Values(),
		})
		for p.HasMorePages() {
			page, err := p.NextPage(ctx)
			if err != nil {
				return nil, fmt.Errorf("querying the owners with a backlog: %w", err)
			}
			for _, item := range page.Items {
				pk, _ := item[resources.AttrPK].(*types.AttributeValueMemberS)
				if pk == nil {
					continue
				}
				owner, tier, k, ok := splitDepthPK(pk.Value)
				if !ok {
					continue
				}
				d, err := s.readDepth(ctx, owner, tier, k)
				if err != nil {
					return nil, err
				}
				out = append(out, d)
			}
		}
	}
	return out, nil
}

// splitDepthPK parses DEPTH#owner#tier#k (neither a tier nor k has a '#').
func splitDepthPK(pk string) (string, job.Tier, int, bool) {
	rest, ok := strings.CutPrefix(pk, "DEPTH#")
	i := strings.LastIndex(rest, "#")
	if !ok || i <= 0 {
		return "", "", 0, false
	}
	k, err := strconv.Atoi(rest[i+1:])
	rest = rest[:i]
	j := strings.LastIndex(rest, "#")
	if err != nil || j <= 0 {
		return "", "", 0, false
	}
	return rest[:j], job.Tier(rest[j+1:]), k, true
}

// ClearBacklogMark takes d's counter shard off the list of owners with a
// backlog, if its backlog is empty (a conditional write; a job backlogged
// meanwhile keeps it listed).
func (s *Store) ClearBacklogMark(ctx context.Context, d Depth) error {
	cond := expression.AttributeNotExists(expression.Name("b")).Or(expression.Name("b").LessThanEqual(expression.Value(0)))
	e, err := expression.NewBuilder().WithCondition(cond).
		WithUpdate(expression.Remove(expression.Name(resources.AttrSweepKey)).Remove(expression.Name(resources.AttrSweepAt))).Build()
	if err != nil {
		return err
	}
	_, err = s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: aws.String(s.table), Key: keyOf(depthPK(d.Owner, d.Tier, d.Shard), depthSK),
		UpdateExpression: e.Update(), ConditionExpression: e.Condition(),
		ExpressionAttributeNames: e.Names(), ExpressionAttributeValues: e.Values(),
	})
	if isConditionFailed(err) {
		return nil
	}
	return err
}

// BacklogJobs returns the ids of up to limit jobs of the backlog of d's
// counter shard, oldest first: one Query of its partition of the sweep
// index.
func (s *Store) BacklogJobs(ctx context.Context, d Depth, limit int) ([]string, error) {
	if limit <= 0 {
		return nil, nil
	}
	owner, tier := d.Owner, d.Tier
	kc := expression.Key(resources.AttrSweepKey).Equal(expression.Value(backlogKey(owner, tier, d.Shard)))
	proj := expression.NamesList(expression.Name("id"), expression.Name(resources.AttrPK))
	e, err := expression.NewBuilder().WithKeyCondition(kc).WithProjection(proj).Build()
	if err != nil {
		return nil, err
	}
	res, err := s.db.Query(ctx, &dynamodb.QueryInput{
		TableName: aws.String(s.table), IndexName: aws.String(s.ix(resources.IndexBySweep)),
		KeyConditionExpression: e.KeyCondition(), ProjectionExpression: e.Projection(),
		ExpressionAttributeNames: e.Names(), ExpressionAttributeValues: e.Values(), Limit: aws.Int32(int32(min(limit, 1000))),
	})
	if err != nil {
		return nil, fmt.Errorf("querying the backlog of %s in %s: %w", owner, tier, err)
	}
	ids := make([]string, 0, len(res.Items))
	for _, item := range res.Items {
		if id, ok := jobIDOf(item); ok {
			ids = append(ids, id)
		}
	}
	return ids, nil
}
