package webhook

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/conveyor/conveyor/internal/resources"
	"github.com/conveyor/conveyor/internal/store"
)

// Each user's endpoints are also listed in one summary item beside them,
// written in the same transaction as every endpoint's creation and
// deletion, so that the relay reads the endpoints of all the users of a
// stream batch with one BatchGetItem (Endpoints.Prefetch) where it made a
// Query per user. The endpoint items stay the source of truth: a summary
// that is missing (users from before it existed, or with no endpoint yet)
// or older than SummaryRebuildAfter is rebuilt from them, one Query, when
// read — which also heals a summary an older deployment's writes left
// behind during a rolling update.
const summarySK = "EPS"

// SummaryRebuildAfter is how long a summary is trusted before its reader
// rebuilds it from the endpoint items.
const SummaryRebuildAfter = time.Hour

type summaryRecord struct {
	Owner     string     `dynamodbav:"hooksOwner"`
	Endpoints []Endpoint `dynamodbav:"endpoints"`
	Version   int64      `dynamodbav:"version"`
	// BuiltAt is when the list was last read from the endpoint items.
	BuiltAt time.Time `dynamodbav:"builtAt"`
}

func summaryKey(owner string) store.ItemKey { return store.ItemKey{PK: hooksPK(owner), SK: summarySK} }

// fresh reports whether r may be used as it is at now.
func (r summaryRecord) fresh(now time.Time) bool { return now.Sub(r.BuiltAt) < SummaryRebuildAfter }

// summaries reads the summaries of owners (those that have one) in
// BatchGetItems.
func (s *Endpoints) summaries(ctx context.Context, owners []string) (map[string]summaryRecord, error) {
	keys := make([]store.ItemKey, len(owners))
	for i, o := range owners {
		keys[i] = summaryKey(o)
	}
	out := map[string]summaryRecord{}
	err := s.store.GetItems(ctx, keys, func(_ store.ItemKey, item map[string]types.AttributeValue) error {
		var r summaryRecord
		if err := attributevalue.UnmarshalMap(item, &r); err != nil {
			return fmt.Errorf("decoding a webhook endpoint summary: %w", err)
		}
		out[r.Owner] = r
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("reading webhook endpoint summaries: %w", err)
	}
	return out, nil
}

// current returns owner's summary as it stands, and whether one is stored
// (its Version is the stored one).
func (s *Endpoints) current(ctx context.Context, owner string) (summaryRecord, bool, error) {
	got, err := s.summaries(ctx, []string{owner})
	if err != nil {
		return summaryRecord{}, false, err
	}
	r, stored := got[owner]
	r, _, err = s.usable(ctx, owner, r, stored, s.cfg.Now())
	return r, stored, err
}

// usable returns r when it is stored and fresh at now; else owner's list
// read again from the endpoint items (BuiltAt now, r's Version kept, so that
// storing it is conditional on r) and true.
func (s *Endpoints) usable(ctx context.Context, owner string, r summaryRecord, stored bool, now time.Time) (summaryRecord, bool, error) {
	if stored && r.fresh(now) {
		return r, false, nil
	}
	list, err := s.List(ctx, owner)
	if err != nil {
		return summaryRecord{}, false, err
	}
	return summaryRecord{Owner: owner, Endpoints: list, Version: r.Version, BuiltAt: now.UTC()}, true, nil
}

// summaryPut is the transaction item that stores next in place of the
// summary read as prev (stored: whether one was): conditional on nobody
// having changed it since.
func (s *Endpoints) summaryPut(next summaryRecord, stored bool, prev int64) (types.TransactWriteItem, error) {
	next.Version = prev + 1
	item, err := attributevalue.MarshalMap(next)
	if err != nil {
		return types.TransactWriteItem{}, err
	}
	for n, v := range key(hooksPK(next.Owner), summarySK) {
		item[n] = v
	}
	cond := expression.AttributeNotExists(expression.Name(resources.AttrPK))
	if stored {
		cond = expression.Name("version").Equal(expression.Value(prev))
	}
	e, err := expression.NewBuilder().WithCondition(cond).Build()
	if err != nil {
		return types.TransactWriteItem{}, err
	}
	return types.TransactWriteItem{Put: &types.Put{TableName: aws.String(s.cfg.Table), Item: item,
		ConditionExpression: e.Condition(), ExpressionAttributeNames: e.Names(), ExpressionAttributeValues: e.Values()}}, nil
}

// errSummaryChanged: a concurrent change of the user's endpoints; read
// again and redo.
var errSummaryChanged = errors.New("webhook endpoints: changed concurrently")

// change applies one endpoint write (first) and the summary's new state,
// computed by edit from the current one, in one transaction, retrying
// when the summary changed meanwhile. edit's error aborts; a failure of
// first's own condition is firstFailed's answer.
func (s *Endpoints) change(ctx context.Context, owner string, edit func(list []Endpoint) ([]Endpoint, types.TransactWriteItem, error), firstFailed error) error {
	for range 5 {
		cur, stored, err := s.current(ctx, owner)
		if err != nil {
			return err
		}
		list, first, err := edit(slices.Clone(cur.Endpoints))
		if err != nil {
			return err
		}
		next := cur
		next.Endpoints = list
		put, err := s.summaryPut(next, stored, cur.Version)
		if err != nil {
			return err
		}
		_, err = s.cfg.DB.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{first, put}})
		var tc *types.TransactionCanceledException
		switch {
		case err == nil:
			s.forget(owner)
			return nil
		case errors.As(err, &tc) && len(tc.CancellationReasons) == 2:
			if aws.ToString(tc.CancellationReasons[0].Code) == "ConditionalCheckFailed" {
				return firstFailed
			}
			continue // the summary changed (or a conflict): read again
		default:
			return fmt.Errorf("changing the webhook endpoints of %s: %w", owner, err)
		}
	}
	return errSummaryChanged
}

// rebuild stores r (read from the endpoint items) as owner's summary if
// nobody changed it since; a lost race is no error: r still says what the
// items held when read.
func (s *Endpoints) rebuild(ctx context.Context, r summaryRecord, stored bool) error {
	put, err := s.summaryPut(r, stored, r.Version)
	if err != nil {
		return err
	}
	_, err = s.cfg.DB.PutItem(ctx, &dynamodb.PutItemInput{TableName: put.Put.TableName, Item: put.Put.Item,
		ConditionExpression: put.Put.ConditionExpression, ExpressionAttributeNames: put.Put.ExpressionAttributeNames,
		ExpressionAttributeValues: put.Put.ExpressionAttributeValues})
	var ccf *types.ConditionalCheckFailedException
	if err != nil && !errors.As(err, &ccf) {
		return fmt.Errorf("storing the webhook endpoint summary of %s: %w", r.Owner, err)
	}
	return nil
}

// Prefetch reads the endpoints of the owners not in the cache, all in one
// BatchGetItem (100 users a request), and caches them as Subscribed would:
// the relay calls it once per stream batch with the owners of the events
// that may trigger a webhook. A user without a stored, fresh summary costs
// one Query more (and the summary is stored for next time).
func (s *Endpoints) Prefetch(ctx context.Context, owners []string) error {
	now := s.cfg.Now()
	var missing []string
	for _, o := range owners {
		if _, ok := s.cache.get(o, now); !ok && o != "" && !slices.Contains(missing, o) {
			missing = append(missing, o)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	got, err := s.summaries(ctx, missing)
	if err != nil {
		return err
	}
	var errs []error
	for _, o := range missing {
		stored, ok := got[o]
		r, reread, err := s.usable(ctx, o, stored, ok, now)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if reread {
			if err := s.rebuild(ctx, r, ok); err != nil {
				errs = append(errs, err)
			}
		}
		s.cache.put(o, r.Endpoints, now.Add(s.cfg.Cache))
	}
	return errors.Join(errs...)
}
