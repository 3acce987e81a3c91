package store

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/conveyor/conveyor/internal/job"
	"github.com/conveyor/conveyor/internal/resources"
	"github.com/conveyor/conveyor/internal/uploads"
)

// sweepPartitions lists the bySweep partitions of status st: one per shard,
// and for the tier-keyed statuses (queued, waiting) one per shard of each
// tier in tiers (nil: every tier), then the untiered ones (jobs without a
// tier, and items written before the tier was part of the key).
func sweepPartitions(st job.Status, tiers []job.Tier) []string {
	var out []string
	if tierKeyed(st) {
		if tiers == nil {
			tiers = job.Tiers
		}
		for _, t := range tiers {
			for n := range resources.SweepShards {
				out = append(out, TierSweepKey(st, t, n))
			}
		}
	}
	for n := range resources.SweepShards {
		out = append(out, SweepKey(st, n))
	}
	return out
}

// Overdue returns up to limit jobs in status whose sweep time is at or
// before before, oldest first, across the partitions of the sparse
// bySweep index (a Query each, never a Scan), every partition read at once
// (at most partitionReaders at a time, at most limit entries each): what an
// operator's request reads (the orphans), where a round of a few dozen
// queries one after another is a request's whole time on a loaded table.
// The sweeps walk the same partitions with ScanDue, which resumes where it
// stopped. Status Waiting gives the queued jobs parked in the table, by
// when they are to be sent again. For queued jobs, tiers names the
// tiers whose partitions are read (nil: every tier). Each job holds what
// the sweep index carries, as DueScan.Jobs says.
func (s *Store) Overdue(ctx context.Context, status job.Status, before time.Time, tiers []job.Tier, limit int) ([]job.Job, error) {
	d := &DueScan{s: s, before: sortTime(before)}
	read := map[string]int{}
	var items []map[string]types.AttributeValue
	err := s.queryPartitions(ctx, sweepPartitions(status, tiers), func(pk string) (*dynamodb.QueryInput, error) {
		in, err := d.query(&duePart{key: pk, status: status}, false)
		if err != nil {
			return nil, err
		}
		in.Limit = aws.Int32(int32(max(limit, 1)))
		return in, nil
	}, func(res *dynamodb.QueryOutput) error {
		pk := ""
		for _, item := range res.Items {
			if v, ok := item[resources.AttrSweepKey].(*types.AttributeValueMemberS); ok {
				pk = v.Value
			}
			if !s.expired(item) {
				items = append(items, item)
				read[pk]++
			}
		}
		if read[pk] >= limit {
			return errPartitionRead
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("querying overdue %s jobs: %w", status, err)
	}
	out, err := sweptJobs(items)
	if err != nil {
		return nil, err
	}
	slices.SortStableFunc(out, func(a, b job.Job) int { return a.UpdatedAt.Compare(b.UpdatedAt) })
	return out[:min(len(out), limit)], nil
}

// DueScan walks the due items of a set of bySweep partitions round-robin:
// each call reads one page of the next partition that has more, from where
// that partition's last page ended, so no partition waits for another to be
// drained and no item is read twice in one scan. Items a caller leaves due
// (it skipped them) are behind the cursor: the next scan reads them again.
// A DueScan is not safe for concurrent use.
type DueScan struct {
	s      *Store
	before string
	parts  []*duePart
	next   int
	// Queries and Read count the requests made and the items they read.
	Queries, Read int
}

type duePart struct {
	key    string
	status job.Status
	shard  int
	cursor map[string]types.AttributeValue
	done   bool
}

// ScanDue returns a scan of the items in statuses (jobs, or uploads for
// the upload sweep) due at or before before, the statuses' partitions in
// one round-robin. For queued and waiting jobs, tiers names the tiers whose
// partitions are read (nil: every tier): a paused tier's partitions are
// simply not queried.
func (s *Store) ScanDue(before time.Time, tiers []job.Tier, statuses ...job.Status) *DueScan {
	d := &DueScan{s: s, before: sortTime(before)}
	for _, st := range statuses {
		for _, k := range sweepPartitions(st, tiers) {
			n, _ := strconv.Atoi(k[strings.LastIndex(k, "#")+1:]) // every partition key ends in #shard
			d.parts = append(d.parts, &duePart{key: k, status: st, shard: n})
		}
	}
	return d
}

// OnShards narrows the scan to the partitions of the sweep index's shards
// in shards (nil: every shard), so that sweeps split over several
// invocations each read their own shards only. It returns d.
func (d *DueScan) OnShards(shards []int) *DueScan {
	if shards == nil {
		return d
	}
	d.parts = slices.DeleteFunc(d.parts, func(p *duePart) bool { return !slices.Contains(shards, p.shard) })
	return d
}

// Done reports whether every partition has been read to its end.
func (d *DueScan) Done() bool {
	return !slices.ContainsFunc(d.parts, func(p *duePart) bool { return !p.done })
}

// page reads up to limit items of the next unfinished partition.
func (d *DueScan) page(ctx context.Context, limit int) ([]map[string]types.AttributeValue, error) {
	for range len(d.parts) {
		p := d.parts[d.next]
		d.next = (d.next + 1) % len(d.parts)
		if p.done {
			continue
		}
		in, err := d.query(p, false)
		if err != nil {
			return nil, err
		}
		in.Limit = aws.Int32(int32(max(limit, 1)))
		res, err := d.s.db.Query(ctx, in)
		if err != nil {
			return nil, fmt.Errorf("querying due %s items: %w", p.status, err)
		}
		d.Queries++
		d.Read += len(res.Items)
		p.cursor = res.LastEvaluatedKey
		p.done = len(res.LastEvaluatedKey) == 0
		out := make([]map[string]types.AttributeValue, 0, len(res.Items))
		for _, item := range res.Items {
			if !d.s.expired(item) {
				out = append(out, item)
			}
		}
		return out, nil
	}
	return nil, nil
}

func (d *DueScan) query(p *duePart, count bool) (*dynamodb.QueryInput, error) {
	kc := expression.Key(resources.AttrSweepKey).Equal(expression.Value(p.key)).
		And(expression.Key(resources.AttrSweepAt).LessThanEqual(expression.Value(d.before)))
	e, err := expression.NewBuilder().WithKeyCondition(kc).Build()
	if err != nil {
		return nil, err
	}
	in := &dynamodb.QueryInput{
		TableName: aws.String(d.s.table), IndexName: aws.String(d.s.ix(resources.IndexBySweep)),
		KeyConditionExpression: e.KeyCondition(), ExpressionAttributeNames: e.Names(), ExpressionAttributeValues: e.Values(),
		ScanIndexForward: aws.Bool(true), ExclusiveStartKey: p.cursor,
	}
	if count {
		in.Select = types.SelectCount
	}
	return in, nil
}

// Jobs reads the next page (up to limit) of due jobs; an empty page does
// not mean the scan is done (see Done). Each job holds what the sweep
// index carries (resources.SweepAttrs: id, owner, status, tier, the times
// a sweep looks at, the wait), enough for SweepTime; a sweep that acts on
// a job reads it whole (UpdateJob).
func (d *DueScan) Jobs(ctx context.Context, limit int) ([]job.Job, error) {
	items, err := d.page(ctx, limit)
	if err != nil {
		return nil, err
	}
	return sweptJobs(items)
}

// sweptJobs decodes entries of the sweep index (sweptJob).
func sweptJobs(items []map[string]types.AttributeValue) ([]job.Job, error) {
	out := make([]job.Job, 0, len(items))
	for _, item := range items {
		j, err := sweptJob(item)
		if err != nil {
			return nil, err
		}
		out = append(out, j)
	}
	return out, nil
}

// sweptJob decodes a job's entry of the sweep index. Its sweep time is
// its updatedAt when none of the times SweepAttrs carries applies (see
// sweepAt), and that time is the entry's sort key: it is set as the job's
// UpdatedAt, so that SweepTime gives the same answer as on the whole job.
func sweptJob(item map[string]types.AttributeValue) (job.Job, error) {
	var j job.Job
	if err := unmarshalJob(item, &j); err != nil {
		return job.Job{}, fmt.Errorf("decoding a due job: %w", err)
	}
	if at, ok := item[resources.AttrSweepAt].(*types.AttributeValueMemberS); ok {
		if t, err := time.Parse(sortTimeLayout, at.Value); err == nil {
			j.UpdatedAt = t
		}
	}
	return j, nil
}

// Uploads reads the next page (up to limit) of due uploads (a scan of the
// upload sweep, ScanDueUploads).
func (d *DueScan) Uploads(ctx context.Context, limit int) ([]uploads.Upload, error) {
	items, err := d.page(ctx, limit)
	if err != nil {
		return nil, err
	}
	out := make([]uploads.Upload, 0, len(items))
	for _, item := range items {
		var u uploads.Upload
		if err := attributevalue.UnmarshalMap(item, &u); err != nil {
			return nil, fmt.Errorf("decoding an upload: %w", err)
		}
		out = append(out, u)
	}
	return out, nil
}

// Left counts the due items the scan has not reached (Select COUNT from
// each unfinished partition's cursor; it reads them, so it costs what
// reading them costs, and the sweeps call it only when their time ran out).
func (d *DueScan) Left(ctx context.Context) (int, error) {
	total := 0
	for _, p := range d.parts {
		if p.done {
			continue
		}
		in, err := d.query(p, true)
		if err != nil {
			return 0, err
		}
		for {
			res, err := d.s.db.Query(ctx, in)
			if err != nil {
				return total, fmt.Errorf("counting due %s items: %w", p.status, err)
			}
			d.Queries++
			total += int(res.Count)
			if len(res.LastEvaluatedKey) == 0 {
				break
			}
			in.ExclusiveStartKey = res.LastEvaluatedKey
		}
	}
	return total, nil
}

// CountStatus counts all jobs in status from the sweep index (Select COUNT,
// every shard). Stale jobs are not in the index and count as 0.
// Queued counts the jobs parked in the table too.
func (s *Store) CountStatus(ctx context.Context, status job.Status) (int, error) {
	total := 0
	if status == job.Queued {
		n, err := s.CountStatus(ctx, Waiting)
		if err != nil {
			return 0, err
		}
		total = n
	}
	err := s.queryPartitions(ctx, sweepPartitions(status, nil), func(pk string) (*dynamodb.QueryInput, error) {
		kc := expression.Key(resources.AttrSweepKey).Equal(expression.Value(pk))
		e, err := expression.NewBuilder().WithKeyCondition(kc).Build()
		if err != nil {
			return nil, err
		}
		return &dynamodb.QueryInput{
			TableName: aws.String(s.table), IndexName: aws.String(s.ix(resources.IndexBySweep)), Select: "COUNT",
			KeyConditionExpression: e.KeyCondition(), ExpressionAttributeNames: e.Names(), ExpressionAttributeValues: e.Values(),
		}, nil
	}, func(res *dynamodb.QueryOutput) error {
		total += int(res.Count)
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("counting %s jobs: %w", status, err)
	}
	return total, nil
}
