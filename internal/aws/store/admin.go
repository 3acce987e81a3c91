package store

// This file holds what operators read and steer: the per-tier pause flags,
// the hourly counters of finished jobs, the last recovery run, and counts
// of jobs past a sweep time (orphans). None of it is ever scanned: each is
// a GetItem, a Query of one small partition, or a Select COUNT query of the
// sparse sweep index.

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/conveyor/conveyor/internal/job"
	"github.com/conveyor/conveyor/internal/resources"
)

const (
	// tierPK is the one partition of the tier flags (sort key: the tier),
	// so one Query reads them all.
	tierPK = "TIER"
	// recoveryPK / recoverySK hold the last recovery run.
	recoveryPK = "RECOVERY"
	recoverySK = "LAST"
	// statsSK is the sort key prefix of the hourly counters; the partition
	// key is "STATS#<shard>".
	statsHourLayout = "2006-01-02T15"
)

// StatsShards is how many items share one hour's counters: each finish
// adds to a random one, so a busy hour does not make one item hot. Readers
// sum the shards.
const StatsShards = 4

// StatsRetention is how long hourly counters are kept (their TTL).
const StatsRetention = 8 * 24 * time.Hour

// TierFlag is the operator's switch of one tier.
type TierFlag struct {
	Tier job.Tier `dynamodbav:"tier" json:"tier"`
	// Paused: the tier's consumers take no messages; submissions are still
	// accepted and wait in the queue.
	Paused    bool      `dynamodbav:"paused" json:"paused"`
	UpdatedAt time.Time `dynamodbav:"updatedAt" json:"updatedAt"`
	// UpdatedBy is the operator (token subject) who set it.
	UpdatedBy string `dynamodbav:"updatedBy" json:"updatedBy"`
}

// TierFlagShards is how many copies of each tier's flag the table holds.
// Every claim checks one copy (ClaimJob, chosen by the job id) in its
// transaction, and a transaction's ConditionCheck costs write units on
// the item it checks: one copy would cap a tier at about 500 claims/s
// (1,000 WCU/s per item). A pause writes every copy in one transaction, so
// a claim that starts after the pause answered sees it whichever copy it
// checks. Copy 0 is the partition TierFlags reads.
const TierFlagShards = 8

// tierFlagKey is the key of copy n of tier's flag.
func tierFlagKey(tier job.Tier, n int) map[string]types.AttributeValue {
	if n == 0 {
		return keyOf(tierPK, string(tier))
	}
	return keyOf(tierPK+"#"+strconv.Itoa(n), string(tier))
}

// SetTierPaused stores tier's pause flag, every copy of it at once (last
// writer wins: pausing and resuming are idempotent).
func (s *Store) SetTierPaused(ctx context.Context, tier job.Tier, paused bool, by string) (TierFlag, error) {
	f := TierFlag{Tier: tier, Paused: paused, UpdatedAt: s.now().UTC(), UpdatedBy: by}
	tx := make([]types.TransactWriteItem, 0, TierFlagShards)
	for n := range TierFlagShards {
		item, err := attributevalue.MarshalMap(f)
		if err != nil {
			return TierFlag{}, err
		}
		for k, v := range tierFlagKey(tier, n) {
			item[k] = v
		}
		tx = append(tx, types.TransactWriteItem{Put: &types.Put{TableName: aws.String(s.table), Item: item}})
	}
	if _, err := s.db.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: tx}); err != nil {
		return TierFlag{}, fmt.Errorf("setting the %s tier's pause flag: %w", tier, err)
	}
	return f, nil
}

// TierFlags returns every tier's flag that was ever set (one strongly
// consistent Query); a tier without a flag is not paused.
func (s *Store) TierFlags(ctx context.Context) (map[job.Tier]TierFlag, error) {
	items, err := s.partition(ctx, tierPK, "", "")
	if err != nil {
		return nil, fmt.Errorf("reading the tier flags: %w", err)
	}
	out := make(map[job.Tier]TierFlag, len(items))
	for _, item := range items {
		var f TierFlag
		if err := attributevalue.UnmarshalMap(item, &f); err != nil {
			return nil, fmt.Errorf("decoding a tier flag: %w", err)
		}
		out[f.Tier] = f
	}
	return out, nil
}

// partition reads one partition (sort keys between from and to when set),
// strongly consistent, skipping expired items.
func (s *Store) partition(ctx context.Context, pk, from, to string) ([]map[string]types.AttributeValue, error) {
	kc := expression.Key(resources.AttrPK).Equal(expression.Value(pk))
	if from != "" {
		kc = kc.And(expression.Key(resources.AttrSK).Between(expression.Value(from), expression.Value(to)))
	}
	e, err := expression.NewBuilder().WithKeyCondition(kc).Build()
	if err != nil {
		return nil, err
	}
	in := &dynamodb.QueryInput{
		TableName: aws.String(s.table), KeyConditionExpression: e.KeyCondition(),
		ExpressionAttributeNames: e.Names(), ExpressionAttributeValues: e.Values(), ConsistentRead: aws.Bool(true),
	}
	var out []map[string]types.AttributeValue
	for {
		res, err := s.db.Query(ctx, in)
		if err != nil {
			return nil, err
		}
		for _, item := range res.Items {
			if !s.expired(item) {
				out = append(out, item)
			}
		}
		if len(res.LastEvaluatedKey) == 0 {
			return out, nil
		}
		in.ExclusiveStartKey = res.LastEvaluatedKey
	}
}

// HourKey renders the hour of t (UTC) as the counters name it.
func HourKey(t time.Time) string { return t.UTC().Format(statsHourLayout) }

// finishedBy maps the events that end a job to the counter they add to.
var finishedBy = map[string]job.Status{
	job.EventSucceeded: job.Succeeded,
	job.EventFailed:    job.Failed,
	job.EventCancelled: job.Cancelled,
}

// counterOps renders the hourly counters of the jobs that pending finishes
// (job.succeeded, job.failed, job.cancelled events) as updates for the
// transaction that persists the transition: the count is written with the
// change it counts, exactly once, and a lost race writes neither. Each hour
// adds to one random of StatsShards items, so a busy hour does not make
// one item hot; the counters expire after StatsRetention.
func counterOps(table string, pending []job.Event) ([]types.TransactWriteItem, error) {
	byHour := map[string]map[job.Status]int{}
	var hours []time.Time
	for _, ev := range pending {
		st, ok := finishedBy[ev.Type]
		if !ok {
			continue
		}
		h := ev.At.UTC().Truncate(time.Hour)
		k := HourKey(h)
		if byHour[k] == nil {
			byHour[k] = map[job.Status]int{}
			hours = append(hours, h)
		}
		byHour[k][st]++
	}
	var ops []types.TransactWriteItem
	for _, h := range hours {
		var upd expression.UpdateBuilder
		for _, st := range []job.Status{job.Succeeded, job.Failed, job.Cancelled} {
			if n := byHour[HourKey(h)][st]; n > 0 {
				upd = upd.Add(expression.Name(string(st)), expression.Value(n))
			}
		}
		upd = upd.Set(expression.Name("hour"), expression.Value(HourKey(h))).
			Set(expression.Name(resources.AttrExpiresAt), expression.Value(h.Add(StatsRetention).Unix()))
		e, err := expression.NewBuilder().WithUpdate(upd).Build()
		if err != nil {
			return nil, fmt.Errorf("building an hourly counter: %w", err)
		}
		pk := "STATS#" + strconv.Itoa(rand.IntN(StatsShards))
		ops = append(ops, types.TransactWriteItem{Update: &types.Update{
			TableName: aws.String(table), Key: keyOf(pk, HourKey(h)), UpdateExpression: e.Update(),
			ExpressionAttributeNames: e.Names(), ExpressionAttributeValues: e.Values(),
		}})
	}
	return ops, nil
}

// HourCount is how many jobs finished in one hour, by outcome.
type HourCount struct {
	// Hour is the start of the hour (UTC).
	Hour      time.Time
	Succeeded int
	Failed    int
	Cancelled int
}

type hourItem struct {
	Hour      string `dynamodbav:"hour"`
	Succeeded int    `dynamodbav:"succeeded"`
	Failed    int    `dynamodbav:"failed"`
	Cancelled int    `dynamodbav:"cancelled"`
}

// FinishedCounts returns the counters of every hour from the hour of from
// to the hour of to, oldest first, one entry per hour (zero when nothing
// finished). It reads StatsShards small Query ranges.
func (s *Store) FinishedCounts(ctx context.Context, from, to time.Time) ([]HourCount, error) {
	first, last := from.UTC().Truncate(time.Hour), to.UTC().Truncate(time.Hour)
	if last.Before(first) {
		return nil, nil
	}
	byHour := map[string]*HourCount{}
	var out []HourCount
	for h := first; !h.After(last); h = h.Add(time.Hour) {
		out = append(out, HourCount{Hour: h})
	}
	for i := range out {
		byHour[HourKey(out[i].Hour)] = &out[i]
	}
	for n := range StatsShards {
		items, err := s.partition(ctx, "STATS#"+strconv.Itoa(n), HourKey(first), HourKey(last))
		if err != nil {
			return nil, fmt.Errorf("reading the hourly counters: %w", err)
		}
		for _, item := range items {
			var it hourItem
			if err := attributevalue.UnmarshalMap(item, &it); err != nil {
				return nil, fmt.Errorf("decoding an hourly counter: %w", err)
			}
			if c := byHour[it.Hour]; c != nil {
				c.Succeeded += it.Succeeded
				c.Failed += it.Failed
				c.Cancelled += it.Cancelled
			}
		}
	}
	return out, nil
}

// RecoveryRun is what the last stuck-job recovery run found and did, and
// how many jobs the last retention run that staled any made stale.
type RecoveryRun struct {
	At time.Time `dynamodbav:"at" json:"at"`
	// Orphans: queued jobs nobody received and running jobs whose worker
	// went silent.
	Orphans     int `dynamodbav:"orphans" json:"orphans"`
	Requeued    int `dynamodbav:"requeued" json:"requeued"`
	FailedStuck int `dynamodbav:"failedStuck" json:"failedStuck"`
	Released    int `dynamodbav:"released" json:"released"`
	Staled      int `dynamodbav:"staled" json:"staled"`
	Lost        int `dynamodbav:"lost" json:"lost"`
}

// RecordRecovery stores r as the last recovery run (one UpdateItem),
// keeping the Staled that RecordStaled set.
func (s *Store) RecordRecovery(ctx context.Context, r RecoveryRun) error {
	if r.At.IsZero() {
		r.At = s.now()
	}
	r.At = r.At.UTC()
	item, err := attributevalue.MarshalMap(r)
	if err != nil {
		return err
	}
	delete(item, "staled")
	// Every run overwrites it; should runs stop, it expires with the stats.
	item[resources.AttrExpiresAt] = ttlAttr(r.At.Add(StatsRetention))
	var update expression.UpdateBuilder
	for k, v := range item {
		update = update.Set(expression.Name(k), expression.Value(v))
	}
	return s.recordRecovery(ctx, update)
}

// RecordStaled stores how many jobs the last retention run that staled any
// made stale, beside the last recovery run (one UpdateItem).
func (s *Store) RecordStaled(ctx context.Context, staled int) error {
	now := s.now().UTC()
	at, err := attributevalue.Marshal(now)
	if err != nil {
		return err
	}
	update := expression.Set(expression.Name("staled"), expression.Value(staled)).
		Set(expression.Name("at"), expression.IfNotExists(expression.Name("at"), expression.Value(at))).
		Set(expression.Name(resources.AttrExpiresAt), expression.Value(ttlAttr(now.Add(StatsRetention))))
	return s.recordRecovery(ctx, update)
}

func (s *Store) recordRecovery(ctx context.Context, update expression.UpdateBuilder) error {
	e, err := expression.NewBuilder().WithUpdate(update).Build()
	if err != nil {
		return err
	}
	if _, err := s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: aws.String(s.table), Key: keyOf(recoveryPK, recoverySK),
		UpdateExpression: e.Update(), ExpressionAttributeNames: e.Names(), ExpressionAttributeValues: e.Values()}); err != nil {
		return fmt.Errorf("recording the recovery run: %w", err)
	}
	return nil
}

// LastRecovery returns the last recorded recovery run, or ErrNotFound when
// none was recorded.
func (s *Store) LastRecovery(ctx context.Context) (RecoveryRun, error) {
	var r RecoveryRun
	err := s.get(ctx, recoveryPK, recoverySK, &r)
	return r, err
}

// CountDue counts the jobs in status whose sweep time is at or before
// before (Select COUNT over every shard of the sweep index): how many jobs
// a sweep with that line would find due. The tests read the sweeps'
// backlog with it; the admin overview counts from its census (Census).
func (s *Store) CountDue(ctx context.Context, status job.Status, before time.Time) (int, error) {
	total := 0
	err := s.queryPartitions(ctx, sweepPartitions(status, nil), func(pk string) (*dynamodb.QueryInput, error) {
		kc := expression.Key(resources.AttrSweepKey).Equal(expression.Value(pk)).
			And(expression.Key(resources.AttrSweepAt).LessThanEqual(expression.Value(sortTime(before))))
		e, err := expression.NewBuilder().WithKeyCondition(kc).Build()
		if err != nil {
			return nil, err
		}
		return &dynamodb.QueryInput{
			TableName: aws.String(s.table), IndexName: aws.String(s.ix(resources.IndexBySweep)), Select: types.SelectCount,
			KeyConditionExpression:   e.KeyCondition(),
			ExpressionAttributeNames: e.Names(), ExpressionAttributeValues: e.Values(),
		}, nil
	}, func(res *dynamodb.QueryOutput) error {
		total += int(res.Count)
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("counting due %s jobs: %w", status, err)
	}
	return total, nil
}
