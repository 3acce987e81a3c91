package store

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/conveyor/conveyor/internal/accounts"
	"github.com/conveyor/conveyor/internal/job"
	"github.com/conveyor/conveyor/internal/resources"
	"github.com/conveyor/conveyor/internal/uploads"
)

// The store keeps the accounts of package accounts.
var _ accounts.Store = (*Store)(nil)

func accountPK(owner string) string { return "ACCT#" + owner }

// knownAccounts are the owners (with their provider) this instance has
// seen with a connected account. Account records are never deleted (a
// reconnect overwrites one, and nothing gives them a TTL), so once seen an
// account stays connected: a job needing it is created without checking it
// again, which keeps the account item out of its owner's concurrent
// submissions (in AWS two transactions touching one item cancel one of them,
// and a ConditionCheck touches it) and spares its write units. The set is
// bounded: when full it starts again empty.
type knownAccounts struct {
	mu   sync.Mutex
	seen map[string]struct{}
}

// knownAccountsMax bounds the set (~100 bytes an entry).
const knownAccountsMax = 10_000

func (k *knownAccounts) has(owner, provider string) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	_, ok := k.seen[provider+"#"+owner]
	return ok
}

func (k *knownAccounts) add(owner, provider string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.seen == nil || len(k.seen) >= knownAccountsMax {
		k.seen = map[string]struct{}{}
	}
	k.seen[provider+"#"+owner] = struct{}{}
}

// accountCheck is the transaction item that holds only if owner has a
// connected account of provider: the record exists and its TTL has not
// passed (TTL deletes late, so an expired record is no account, as for
// every reader).
func (s *Store) accountCheck(owner, provider string) (*types.TransactWriteItem, error) {
	cond := expression.AttributeExists(expression.Name(resources.AttrPK)).And(expression.Or(
		expression.AttributeNotExists(expression.Name(resources.AttrExpiresAt)),
		expression.Name(resources.AttrExpiresAt).GreaterThan(expression.Value(s.now().Unix())),
	))
	e, err := expression.NewBuilder().WithCondition(cond).Build()
	if err != nil {
		return nil, fmt.Errorf("building the account check of %s: %w", owner, err)
	}
	return &types.TransactWriteItem{ConditionCheck: &types.ConditionCheck{
		TableName: aws.String(s.table), Key: keyOf(accountPK(owner), provider),
		ConditionExpression: e.Condition(), ExpressionAttributeNames: e.Names(), ExpressionAttributeValues: e.Values(),
	}}, nil
}

// GetAccount returns owner's account for provider, or ErrNotFound.
func (s *Store) GetAccount(ctx context.Context, owner, provider string) (accounts.Account, error) {
	var a accounts.Account
	err := s.get(ctx, accountPK(owner), provider, &a)
	return a, err
}

// PutAccount stores a (re)connected account, replacing any earlier one.
func (s *Store) PutAccount(ctx context.Context, a accounts.Account) error {
	item, err := attributevalue.MarshalMap(a)
	if err != nil {
		return err
	}
	for k, v := range keyOf(accountPK(a.Owner), a.Provider) {
		item[k] = v
	}
	if _, err := s.db.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(s.table), Item: item}); err != nil {
		return fmt.Errorf("storing account of %s: %w", a.Owner, err)
	}
	s.accounts.add(a.Owner, a.Provider)
	return nil
}

// LeaseAccount takes the refresh lease of an account for worker until
// until, if nobody holds an unexpired one. It returns ErrConflict when
// another worker holds it.
func (s *Store) LeaseAccount(ctx context.Context, owner, provider, worker string, now, until time.Time) error {
	cond := expression.AttributeExists(expression.Name(resources.AttrPK)).And(
		expression.AttributeNotExists(expression.Name("leaseUntilMs")).
			Or(expression.Name("leaseUntilMs").LessThan(expression.Value(now.UnixMilli()))))
	update := expression.Set(expression.Name("leaseOwner"), expression.Value(worker)).
		Set(expression.Name("leaseUntilMs"), expression.Value(until.UnixMilli()))
	e, err := expression.NewBuilder().WithCondition(cond).WithUpdate(update).Build()
	if err != nil {
		return err
	}
	_, err = s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: aws.String(s.table), Key: keyOf(accountPK(owner), provider),
		ConditionExpression: e.Condition(), UpdateExpression: e.Update(),
		ExpressionAttributeNames: e.Names(), ExpressionAttributeValues: e.Values(),
	})
	if isConditionFailed(err) {
		return ErrConflict
	}
	if err != nil {
		return fmt.Errorf("leasing account of %s: %w", owner, err)
	}
	return nil
}

// SaveRotated stores a's rotated tokens and releases any refresh lease, if
// the stored account still holds the tokens that were spent: version
// spentVersion of the connection made at connectedAt (ErrConflict
// otherwise, e.g. after a reconnect). It does not require the lease: a
// refresher whose lease lapsed still holds the only valid refresh token,
// and nobody else can have stored a successor of the one it spent.
func (s *Store) SaveRotated(ctx context.Context, a accounts.Account, spentVersion int64, connectedAt time.Time) error {
	a.LeaseOwner, a.LeaseUntilMs = "", 0
	item, err := attributevalue.MarshalMap(a)
	if err != nil {
		return err
	}
	for k, v := range keyOf(accountPK(a.Owner), a.Provider) {
		item[k] = v
	}
	c := condition(expression.Name("version").Equal(expression.Value(spentVersion)).
		And(expression.Name("connectedAt").Equal(expression.Value(connectedAt))))
	_, err = s.db.PutItem(ctx, &dynamodb.PutItemInput{
		TableName: aws.String(s.table), Item: item,
		ConditionExpression: c.Condition(), ExpressionAttributeNames: c.Names(), ExpressionAttributeValues: c.Values(),
	})
	if isConditionFailed(err) {
		return ErrConflict
	}
	if err != nil {
		return fmt.Errorf("storing refreshed tokens of %s: %w", a.Owner, err)
	}
	return nil
}

// ReleaseAccount gives up worker's refresh lease (after a failed refresh).
func (s *Store) ReleaseAccount(ctx context.Context, owner, provider, worker string) error {
	e, err := expression.NewBuilder().
		WithCondition(expression.Name("leaseOwner").Equal(expression.Value(worker))).
		WithUpdate(expression.Remove(expression.Name("leaseOwner")).Remove(expression.Name("leaseUntilMs"))).Build()
	if err != nil {
		return err
	}
	_, err = s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: aws.String(s.table), Key: keyOf(accountPK(owner), provider),
		ConditionExpression: e.Condition(), UpdateExpression: e.Update(),
		ExpressionAttributeNames: e.Names(), ExpressionAttributeValues: e.Values(),
	})
	if err != nil && !isConditionFailed(err) {
		return err
	}
	return nil
}

// GetJobAndAccount reads job id, owner's account for provider and the
// uploads the job's items name, in one BatchGetItem with strongly consistent
// reads: what a worker needs to claim a job, describe its items and get its
// access token, for one read request. uploads are the ids the job's message
// names (queue.Message.Uploads); the job's items that do not describe their
// upload yet are described from those records, and any upload the message
// did not name is read apart (DescribeItems). The account is nil when owner
// has none (or it expired); the job is ErrNotFound when it does not exist.
// An account is returned only when the job belongs to owner.
func (s *Store) GetJobAndAccount(ctx context.Context, id, owner, provider string, uploads []string) (job.Job, *accounts.Account, error) {
	got, err := s.GetJobsAndAccounts(ctx, provider, []JobRead{{ID: id, Owner: owner, Uploads: uploads}})
	if err != nil {
		return job.Job{}, nil, err
	}
	return got[0].Job, got[0].Account, got[0].Err
}

// JobRead and JobAndAccount are the accounts' records of a batched read
// (accounts.JobRead, accounts.JobAndAccount).
type (
	JobRead       = accounts.JobRead
	JobAndAccount = accounts.JobAndAccount
)

// GetJobsAndAccounts is GetJobAndAccount for several jobs at once: every
// job, every owner's account for provider and every upload the reads name,
// each key once, in strongly consistent BatchGetItems of up to 100 keys —
// one request for a batch of ten one-item jobs. It returns one
// JobAndAccount per read, in order; the error is for the request (nothing
// read).
func (s *Store) GetJobsAndAccounts(ctx context.Context, provider string, reads []JobRead) ([]JobAndAccount, error) {
	var keys []ItemKey
	seen := map[ItemKey]bool{}
	want := func(k ItemKey) {
		if !seen[k] {
			seen[k] = true
			keys = append(keys, k)
		}
	}
	// Each upload asked for has an entry, empty until read: one that is
	// gone is not asked for again (DescribeItems).
	ups := map[string]uploads.Upload{}
	for _, r := range reads {
		want(ItemKey{jobPK(r.ID), jobSK})
		if r.Owner != "" {
			want(ItemKey{accountPK(r.Owner), provider})
		}
		for _, u := range r.Uploads {
			want(ItemKey{uploadPK(u), uploadSK})
			ups[u] = uploads.Upload{}
		}
	}
	jobs, accts, unreadable := map[string]job.Job{}, map[string]*accounts.Account{}, map[string]error{}
	err := s.GetItems(ctx, keys, func(k ItemKey, item map[string]types.AttributeValue) error {
		switch {
		case strings.HasPrefix(k.PK, accountPK("")):
			var acct accounts.Account
			if err := attributevalue.UnmarshalMap(item, &acct); err != nil {
				return fmt.Errorf("decoding the account %s: %w", k.PK, err)
			}
			accts[k.PK] = &acct
		case k.SK == jobSK:
			// A job that does not decode fails its own read, not its
			// batch-mates'.
			var j job.Job
			if err := unmarshalJob(item, &j); err != nil {
				unreadable[k.PK] = fmt.Errorf("decoding job %s: %w", k.PK, err)
				return nil
			}
			jobs[k.PK] = j
		case k.SK == uploadSK:
			var u uploads.Upload
			if err := attributevalue.UnmarshalMap(item, &u); err != nil {
				return fmt.Errorf("decoding upload %s: %w", k.PK, err)
			}
			ups[u.ID] = u
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("reading %d jobs and their accounts: %w", len(reads), err)
	}
	out := make([]JobAndAccount, len(reads))
	for i, r := range reads {
		j, found := jobs[jobPK(r.ID)]
		if err := unreadable[jobPK(r.ID)]; err != nil {
			out[i].Err = err
			continue
		}
		if !found {
			out[i].Err = ErrNotFound
			continue
		}
		if j.Owner == r.Owner {
			out[i].Account = accts[accountPK(r.Owner)]
		}
		if out[i].Err = s.describeItems(ctx, &j, ups); out[i].Err == nil {
			out[i].Job = j
		}
	}
	return out, nil
}

// ItemKey names one item of the table.
type ItemKey struct{ PK, SK string }

// GetItems reads keys with strongly consistent BatchGetItems of at most 100
// keys, asking again for what DynamoDB leaves unprocessed (throttling,
// size), and hands each item that exists and has not expired (TTL deletes
// late) to fn with its key. Every batch read of the store goes through it.
func (s *Store) GetItems(ctx context.Context, keys []ItemKey, fn func(k ItemKey, item map[string]types.AttributeValue) error) error {
	for len(keys) > 0 {
		n := min(len(keys), 100)
		chunk := make([]map[string]types.AttributeValue, n)
		for i, k := range keys[:n] {
			chunk[i] = keyOf(k.PK, k.SK)
		}
		req := map[string]types.KeysAndAttributes{s.table: {Keys: chunk, ConsistentRead: aws.Bool(true)}}
		keys = keys[n:]
		for len(req) > 0 {
			res, err := s.db.BatchGetItem(ctx, &dynamodb.BatchGetItemInput{RequestItems: req})
			if err != nil {
				return err
			}
			for _, item := range res.Responses[s.table] {
				pk, _ := item[resources.AttrPK].(*types.AttributeValueMemberS)
				sk, _ := item[resources.AttrSK].(*types.AttributeValueMemberS)
				if pk == nil || sk == nil || s.expired(item) {
					continue
				}
				if err := fn(ItemKey{pk.Value, sk.Value}, item); err != nil {
					return err
				}
			}
			req = res.UnprocessedKeys
		}
	}
	return nil
}

// DescribeItems fills each of j's items that does not describe its upload
// yet (job.Item's Key, ContentType, Size, Filename, Pin: submission leaves
// them to the worker) from its upload record, reading the records in one
// request. An item whose upload record is gone stays undescribed; the
// worker fails it as media_expired.
func (s *Store) DescribeItems(ctx context.Context, j *job.Job) error {
	return s.describeItems(ctx, j, nil)
}

// describeItems is DescribeItems from ups, reading in one request the
// uploads ups has no entry for (an empty entry is one already read and
// found gone).
func (s *Store) describeItems(ctx context.Context, j *job.Job, ups map[string]uploads.Upload) error {
	var missing []string
	for _, it := range j.Items {
		if _, ok := ups[it.UploadID]; !ok && it.UploadID != "" && it.Key == "" {
			missing = append(missing, it.UploadID)
		}
	}
	if len(missing) > 0 {
		more, err := s.GetUploads(ctx, missing)
		if err != nil {
			return fmt.Errorf("reading the uploads of job %s: %w", j.ID, err)
		}
		if ups == nil {
			ups = map[string]uploads.Upload{}
		}
		maps.Copy(ups, more)
	}
	for i := range j.Items {
		it := &j.Items[i]
		u, ok := ups[it.UploadID]
		if it.Key != "" || !ok || u.Owner != j.Owner {
			continue
		}
		it.Key, it.ContentType, it.Size, it.Filename, it.Pin = u.Key, u.ContentType, u.Size, u.Filename, u.Pin
	}
	return nil
}

// distinct returns ids without repeats, in order.
func distinct(ids []string) []string {
	var out []string
	for _, id := range ids {
		if !slices.Contains(out, id) {
			out = append(out, id)
		}
	}
	return out
}
