package store

// This file holds the inspector's reads: operators search jobs across
// users, list orphans and count delayed jobs. Every read is a Query of an
// index (never a Scan):
//
//	filter given (first match wins)  index              partition key
//	owner                            byOwnerCreated     owner
//	errorCode                        byErrorCreated     jobError (sparse)
//	status                           byStatusCreated    jobStatus
//	type                             byTypeCreatedKeys  jobType
//	tier                             byTierCreatedKeys  jobTier
//	none                             byCreatedKeys      entity = "job"
//
// Every index is sorted by createdKey (createdAt#id), so createdFrom and
// createdTo are a range of the key condition. The filters not used as the
// partition key are a FilterExpression of the same Query, and the count
// (X-Total-Count) is a Select COUNT Query with the same key condition and
// filter: DynamoDB counts the items after the filter, so the count is
// exact whichever filters are applied after the query (it reads, and pays
// for, every index entry in the key range). The last three indexes do not
// carry the job's status (a status change does not write them): a status
// filter always picks an index that does, since it comes before them.

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/conveyor/conveyor/internal/job"
	"github.com/conveyor/conveyor/internal/resources"
)

// SearchQuery selects jobs across users. Every field is optional.
type SearchQuery struct {
	Status    job.Status
	Tier      job.Tier
	Owner     string
	Type      string
	ErrorCode string
	// CreatedFrom and CreatedTo bound createdAt (both inclusive) when set.
	CreatedFrom, CreatedTo time.Time
	// Limit is the page size (1–200; ignored by CountSearch).
	Limit int
	// Cursor continues a previous page of the same query (same filters and
	// window; any Limit); any other is ErrBadCursor.
	Cursor string
}

// searchIndex picks the index of q and the filter applied after the Query.
func (q SearchQuery) searchIndex() (index, attr, value string) {
	switch {
	case q.Owner != "":
		return resources.IndexByOwner, resources.AttrOwner, q.Owner
	case q.ErrorCode != "":
		return resources.IndexByErrorCreated, resources.AttrJobError, q.ErrorCode
	case q.Status != "":
		return resources.IndexByStatusCreated, resources.AttrJobStatus, string(q.Status)
	case q.Type != "":
		return resources.IndexByTypeCreated, resources.AttrJobType, q.Type
	case q.Tier != "":
		return resources.IndexByTierCreated, resources.AttrJobTier, string(q.Tier)
	}
	return resources.IndexByCreated, resources.AttrEntity, resources.EntityJob
}

// searchInput builds q's Query (newest first) and describes its page.
func (s *Store) searchInput(q SearchQuery) (*dynamodb.QueryInput, page, error) {
	index, attr, value := q.searchIndex()
	index = s.ix(index)
	pg := page{index: index, partitionAttr: attr, partition: value, sortAttr: resources.AttrCreatedKey}
	kc := expression.Key(attr).Equal(expression.Value(value))
	if !q.CreatedFrom.IsZero() {
		pg.since = sortTime(q.CreatedFrom)
	}
	if !q.CreatedTo.IsZero() {
		// createdKey is createdAt#id: "~" sorts after every id character.
		pg.until = sortTime(q.CreatedTo) + "#~"
	}
	sk := expression.Key(resources.AttrCreatedKey)
	switch {
	case pg.since != "" && pg.until != "":
		kc = kc.And(sk.Between(expression.Value(pg.since), expression.Value(pg.until)))
	case pg.since != "":
		kc = kc.And(sk.GreaterThanEqual(expression.Value(pg.since)))
	case pg.until != "":
		kc = kc.And(sk.LessThanEqual(expression.Value(pg.until)))
	}
	// Readers ignore expired jobs, since TTL deletes late.
	f := expression.Name(resources.AttrExpiresAt).AttributeNotExists().
		Or(expression.Name(resources.AttrExpiresAt).GreaterThan(expression.Value(s.now().Unix())))
	var bound []string
	for _, c := range []struct{ attr, value string }{
		{resources.AttrOwner, q.Owner},
		{resources.AttrJobError, q.ErrorCode},
		{resources.AttrJobStatus, string(q.Status)},
		{resources.AttrJobType, q.Type},
		{resources.AttrJobTier, string(q.Tier)},
	} {
		if c.value == "" {
			continue
		}
		bound = append(bound, c.attr+"="+c.value)
		if c.attr != attr {
			f = f.And(expression.Name(c.attr).Equal(expression.Value(c.value)))
		}
	}
	pg.filter = strings.Join(bound, "\x00")
	e, err := expression.NewBuilder().WithKeyCondition(kc).WithFilter(f).Build()
	if err != nil {
		return nil, page{}, fmt.Errorf("building the search: %w", err)
	}
	return &dynamodb.QueryInput{
		TableName: aws.String(s.table), IndexName: aws.String(index),
		KeyConditionExpression: e.KeyCondition(), FilterExpression: e.Filter(),
		ExpressionAttributeNames: e.Names(), ExpressionAttributeValues: e.Values(),
		ScanIndexForward: aws.Bool(false),
	}, pg, nil
}

// SearchJobs returns one page of the jobs q selects across users, newest
// created first, and the cursor of the next page ("" on the last). A page
// holds at most q.Limit jobs and at most MaxPageBytes of their JSON (at
// least one job). The
// index entries carry only the filtered attributes; the jobs themselves
// are read with BatchGetItem (strongly consistent).
func (s *Store) SearchJobs(ctx context.Context, q SearchQuery) ([]job.Job, string, error) {
	in, pg, err := s.searchInput(q)
	if err != nil {
		return nil, "", err
	}
	start, err := pg.decode(q.Cursor)
	if err != nil {
		return nil, "", err
	}
	in.ExclusiveStartKey = start
	ids, entries, next, err := s.entriesPage(ctx, in, pg, q.Limit, jobIDOf)
	if err != nil {
		return nil, "", fmt.Errorf("searching jobs: %w", err)
	}
	jobs, last, err := s.getJobsWithin(ctx, ids, MaxPageBytes)
	if err != nil {
		return nil, "", err
	}
	return pg.bound(jobs, entries, next, last)
}

// CountSearch counts every job q selects (Select COUNT, same key condition
// and filter as SearchJobs, paged): exact, also with filters applied after
// the Query.
func (s *Store) CountSearch(ctx context.Context, q SearchQuery) (int, error) {
	in, _, err := s.searchInput(q)
	if err != nil {
		return 0, err
	}
	in.ScanIndexForward = nil
	return s.countQuery(ctx, in)
}

// getJobs reads jobs by id (BatchGetItem, 100 per request, strongly
// consistent), in the order of ids; jobs gone or expired meanwhile are
// left out.
func (s *Store) getJobs(ctx context.Context, ids []string) ([]job.Job, error) {
	byID := make(map[string]job.Job, len(ids))
	keys := make([]ItemKey, 0, len(ids))
	for _, id := range ids {
		keys = append(keys, ItemKey{jobPK(id), jobSK})
	}
	err := s.GetItems(ctx, keys, func(_ ItemKey, item map[string]types.AttributeValue) error {
		var j job.Job
		if err := unmarshalJob(item, &j); err != nil {
			return fmt.Errorf("decoding a job: %w", err)
		}
		byID[j.ID] = j
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("reading jobs: %w", err)
	}
	jobs := make([]job.Job, 0, len(byID))
	for _, id := range ids {
		if j, ok := byID[id]; ok {
			jobs = append(jobs, j)
		}
	}
	return jobs, nil
}

// SweepTime is the time the sweeps look at for j in its status (see
// sweepAt): for a queued job in the queue, since when it has gone
// unreceived; for a running job, its last heartbeat.
func SweepTime(j *job.Job) time.Time {
	t, err := time.Parse(sortTimeLayout, sweepAt(j))
	if err != nil {
		return j.UpdatedAt
	}
	return t
}

// MaxPageBytes bounds one page of jobs (the user's list, the inspector's)
// by their JSON: a page of 200 jobs at job.MaxDocBytes each would be
// about 100 MB, and the function's response may be 6 MB. 2 MiB, doubled by
// the escaping of the response's body inside Lambda's answer, stays under
// it; the largest job the contract allows is about 560 KiB, so a page
// holds at least three of them, and always one.
const MaxPageBytes = 2 << 20

// getJobsWithin reads jobs by id as getJobs does, in chunks, and stops
// reading once the jobs read encode to more than budget bytes; last is
// the last id read when it stopped before the end of ids ("" otherwise).
func (s *Store) getJobsWithin(ctx context.Context, ids []string, budget int) (jobs []job.Job, last string, err error) {
	const chunk = 25
	size := 0
	for i := 0; i < len(ids); i += chunk {
		if size > budget {
			return jobs, ids[i-1], nil
		}
		read, err := s.getJobs(ctx, ids[i:min(i+chunk, len(ids))])
		if err != nil {
			return nil, "", err
		}
		for k := range read {
			size += encodedSize(&read[k])
		}
		jobs = append(jobs, read...)
	}
	return jobs, "", nil
}

// encodedSize is the size of j's JSON.
func encodedSize(j *job.Job) int {
	b, err := job.Marshal(j)
	if err != nil {
		return 0
	}
	return len(b)
}

// bound cuts jobs, a page in its index's order, after the last job that
// keeps their JSON within MaxPageBytes (the first is always kept), and
// returns the cursor after it (entries are the jobs' index entries, by
// id). A page that fits keeps next, unless the reading stopped after the
// id last (getJobsWithin): then the page goes on after last.
func (p page) bound(jobs []job.Job, entries map[string]map[string]types.AttributeValue, next, last string) ([]job.Job, string, error) {
	after := func(id string) (string, error) { return p.after(entries[id]) }
	size := 0
	for i := range jobs {
		size += encodedSize(&jobs[i]) + 1
		if i == 0 || size <= MaxPageBytes {
			continue
		}
		cursor, err := after(jobs[i-1].ID)
		if err != nil {
			return nil, "", err
		}
		return jobs[:i], cursor, nil
	}
	if last != "" {
		cursor, err := after(last)
		return jobs, cursor, err
	}
	return jobs, next, nil
}
