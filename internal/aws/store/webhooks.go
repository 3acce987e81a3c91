package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/conveyor/conveyor/internal/job"
	"github.com/conveyor/conveyor/internal/resources"
	"github.com/conveyor/conveyor/internal/webhook"
)

// The webhooks' records (internal/webhook): each user's signing secret,
// endpoints and the summary that lists them live in the user's partition
// ("HOOKS#<user>": "SECRET", "EP#<id>", "EPS"); each delivery's state lives
// beside its job's events ("JOB#<id>" / "WH#<delivery>").

func hooksPK(owner string) string { return "HOOKS#" + owner }

const (
	webhookSecretSK  = "SECRET"
	webhookSummarySK = "EPS"
)

func webhookEndpointSK(id string) string { return "EP#" + id }

// The webhook records as the store keeps them are webhook's; the store
// names them as its callers know them.
type (
	// WebhookSecret is webhook.SecretRecord.
	WebhookSecret = webhook.SecretRecord
	// WebhookEndpoint is webhook.EndpointRecord.
	WebhookEndpoint = webhook.EndpointRecord
	// WebhookCircuit is webhook.CircuitRecord.
	WebhookCircuit = webhook.CircuitRecord
	// WebhookSummary is webhook.Summary.
	WebhookSummary = webhook.Summary
	// WebhookDelivery is webhook.DeliveryRecord.
	WebhookDelivery = webhook.DeliveryRecord
	// WebhookFailure is webhook.FailureRecord.
	WebhookFailure = webhook.FailureRecord
	// DeliveryRef is webhook.DeliveryRef.
	DeliveryRef = webhook.DeliveryRef
)

// A delivery's states (webhook.Delivery…).
const (
	DeliveryDelivered = webhook.DeliveryDelivered
	DeliveryRetrying  = webhook.DeliveryRetrying
	DeliveryFailed    = webhook.DeliveryFailed
)

// ErrExists is returned when an item that must be new already exists
// (webhook.ErrExists).
var ErrExists = webhook.ErrExists

// GetWebhookSecret returns owner's secret (strongly consistent), or
// ErrNotFound when owner has none yet.
func (s *Store) GetWebhookSecret(ctx context.Context, owner string) (WebhookSecret, error) {
	out, err := s.db.GetItem(ctx, &dynamodb.GetItemInput{
		TableName: aws.String(s.table), Key: keyOf(hooksPK(owner), webhookSecretSK), ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		return WebhookSecret{}, fmt.Errorf("reading the webhook secret of %s: %w", owner, err)
	}
	if len(out.Item) == 0 {
		return WebhookSecret{}, ErrNotFound
	}
	var rec WebhookSecret
	if err := attributevalue.UnmarshalMap(out.Item, &rec); err != nil {
		return WebhookSecret{}, fmt.Errorf("decoding the webhook secret of %s: %w", owner, err)
	}
	return rec, nil
}

// PutWebhookSecret stores rec as its owner's secret in place of version
// prev (0: the owner has none yet); ErrConflict when the stored one is not
// that.
func (s *Store) PutWebhookSecret(ctx context.Context, rec WebhookSecret, prev int64) error {
	item, err := attributevalue.MarshalMap(rec)
	if err != nil {
		return err
	}
	for n, v := range keyOf(hooksPK(rec.Owner), webhookSecretSK) {
		item[n] = v
	}
	cond := expression.AttributeNotExists(expression.Name(resources.AttrPK))
	if prev > 0 {
		cond = expression.Name("version").Equal(expression.Value(prev))
	}
	e, err := expression.NewBuilder().WithCondition(cond).Build()
	if err != nil {
		return err
	}
	_, err = s.db.PutItem(ctx, &dynamodb.PutItemInput{
		TableName: aws.String(s.table), Item: item, ConditionExpression: e.Condition(),
		ExpressionAttributeNames: e.Names(), ExpressionAttributeValues: e.Values(),
	})
	if isConditionFailed(err) {
		return ErrConflict
	}
	if err != nil {
		return fmt.Errorf("storing the webhook secret of %s: %w", rec.Owner, err)
	}
	return nil
}

type webhookEndpointItem struct {
	WebhookEndpoint
	WebhookCircuit
	Owner string `dynamodbav:"hooksOwner"`
}

// WebhookEndpoints returns owner's endpoint items (strongly consistent),
// in no particular order.
func (s *Store) WebhookEndpoints(ctx context.Context, owner string) ([]WebhookEndpoint, error) {
	kc := expression.Key(resources.AttrPK).Equal(expression.Value(hooksPK(owner))).
		And(expression.Key(resources.AttrSK).BeginsWith("EP#"))
	e, err := expression.NewBuilder().WithKeyCondition(kc).Build()
	if err != nil {
		return nil, err
	}
	in := &dynamodb.QueryInput{TableName: aws.String(s.table), KeyConditionExpression: e.KeyCondition(),
		ExpressionAttributeNames: e.Names(), ExpressionAttributeValues: e.Values(), ConsistentRead: aws.Bool(true)}
	var out []WebhookEndpoint
	for {
		res, err := s.db.Query(ctx, in)
		if err != nil {
			return nil, fmt.Errorf("listing the webhook endpoints of %s: %w", owner, err)
		}
		for _, item := range res.Items {
			var r webhookEndpointItem
			if err := attributevalue.UnmarshalMap(item, &r); err != nil {
				return nil, fmt.Errorf("decoding a webhook endpoint: %w", err)
			}
			r.WebhookEndpoint.Circuit = r.WebhookCircuit
			out = append(out, r.WebhookEndpoint)
		}
		if len(res.LastEvaluatedKey) == 0 {
			return out, nil
		}
		in.ExclusiveStartKey = res.LastEvaluatedKey
	}
}

// GetWebhookEndpoint returns one of owner's endpoints (an eventually
// consistent read), or ErrNotFound.
func (s *Store) GetWebhookEndpoint(ctx context.Context, owner, id string) (WebhookEndpoint, error) {
	res, err := s.db.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(s.table), Key: keyOf(hooksPK(owner), webhookEndpointSK(id))})
	if err != nil {
		return WebhookEndpoint{}, fmt.Errorf("reading webhook endpoint %s: %w", id, err)
	}
	if len(res.Item) == 0 {
		return WebhookEndpoint{}, ErrNotFound
	}
	return decodeWebhookEndpoint(id, res.Item)
}

func decodeWebhookEndpoint(id string, item map[string]types.AttributeValue) (WebhookEndpoint, error) {
	var r webhookEndpointItem
	if err := attributevalue.UnmarshalMap(item, &r); err != nil {
		return WebhookEndpoint{}, fmt.Errorf("decoding webhook endpoint %s: %w", id, err)
	}
	r.WebhookEndpoint.Circuit = r.WebhookCircuit
	return r.WebhookEndpoint, nil
}

// FailWebhookEndpoint records one more consecutive failure of owner's
// endpoint id at now (failingSince kept when set), opens its circuit until
// openUntil when that is not zero, and disables the endpoint when disable
// is set. One UpdateItem, conditional on the endpoint still existing;
// ErrNotFound when it does not.
func (s *Store) FailWebhookEndpoint(ctx context.Context, owner, id string, now, openUntil time.Time, disable bool) error {
	u := expression.Add(expression.Name("circuitFailures"), expression.Value(1)).
		Set(expression.Name("failingSinceMs"), expression.IfNotExists(expression.Name("failingSinceMs"), expression.Value(now.UnixMilli())))
	if !openUntil.IsZero() {
		u = u.Set(expression.Name("circuitOpenUntilMs"), expression.Value(openUntil.UnixMilli()))
	}
	if disable {
		u = u.Set(expression.Name("disabledAtMs"), expression.Value(now.UnixMilli()))
	}
	_, err := s.updateWebhookEndpoint(ctx, owner, id, u)
	return err
}

// ClearWebhookEndpoint forgets the failures of owner's endpoint id and
// closes its circuit (a delivery succeeded); ErrNotFound when it is gone.
func (s *Store) ClearWebhookEndpoint(ctx context.Context, owner, id string) error {
	_, err := s.updateWebhookEndpoint(ctx, owner, id, clearCircuit())
	return err
}

func clearCircuit() expression.UpdateBuilder {
	return expression.Remove(expression.Name("circuitFailures")).Remove(expression.Name("failingSinceMs")).Remove(expression.Name("circuitOpenUntilMs"))
}

// EnableWebhookEndpoint enables owner's endpoint id (its failures
// forgotten, its circuit closed) or disables it at now, and returns it as
// changed; ErrNotFound when there is no such endpoint.
func (s *Store) EnableWebhookEndpoint(ctx context.Context, owner, id string, enabled bool, now time.Time) (WebhookEndpoint, error) {
	u := clearCircuit().Remove(expression.Name("disabledAtMs"))
	if !enabled {
		u = expression.Set(expression.Name("disabledAtMs"), expression.Value(now.UnixMilli()))
	}
	item, err := s.updateWebhookEndpoint(ctx, owner, id, u)
	if err != nil {
		return WebhookEndpoint{}, err
	}
	return decodeWebhookEndpoint(id, item)
}

// updateWebhookEndpoint applies u to owner's endpoint id, if it exists,
// and returns the item as changed.
func (s *Store) updateWebhookEndpoint(ctx context.Context, owner, id string, u expression.UpdateBuilder) (map[string]types.AttributeValue, error) {
	e, err := expression.NewBuilder().WithUpdate(u).WithCondition(expression.AttributeExists(expression.Name(resources.AttrPK))).Build()
	if err != nil {
		return nil, err
	}
	out, err := s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: aws.String(s.table), Key: keyOf(hooksPK(owner), webhookEndpointSK(id)),
		UpdateExpression: e.Update(), ConditionExpression: e.Condition(), ExpressionAttributeNames: e.Names(), ExpressionAttributeValues: e.Values(),
		ReturnValues: types.ReturnValueAllNew})
	var cond *types.ConditionalCheckFailedException
	if errors.As(err, &cond) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("updating webhook endpoint %s: %w", id, err)
	}
	return out.Attributes, nil
}

// GetWebhookSummaries returns the summaries of owners, by owner, for those
// that have one (strongly consistent BatchGetItems, 100 users a request).
func (s *Store) GetWebhookSummaries(ctx context.Context, owners []string) (map[string]WebhookSummary, error) {
	keys := make([]ItemKey, len(owners))
	for i, o := range owners {
		keys[i] = ItemKey{PK: hooksPK(o), SK: webhookSummarySK}
	}
	out := map[string]WebhookSummary{}
	err := s.GetItems(ctx, keys, func(_ ItemKey, item map[string]types.AttributeValue) error {
		var r WebhookSummary
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

// PutWebhookSummary stores next as its owner's summary in place of
// version prev (0: none is stored), as version prev+1; ErrConflict when the
// stored one is not that.
func (s *Store) PutWebhookSummary(ctx context.Context, next WebhookSummary, prev int64) error {
	put, err := s.webhookSummaryPut(next, prev)
	if err != nil {
		return err
	}
	_, err = s.db.PutItem(ctx, &dynamodb.PutItemInput{TableName: put.TableName, Item: put.Item,
		ConditionExpression: put.ConditionExpression, ExpressionAttributeNames: put.ExpressionAttributeNames,
		ExpressionAttributeValues: put.ExpressionAttributeValues})
	if isConditionFailed(err) {
		return ErrConflict
	}
	if err != nil {
		return fmt.Errorf("storing the webhook endpoint summary of %s: %w", next.Owner, err)
	}
	return nil
}

// webhookSummaryPut is the write of PutWebhookSummary.
func (s *Store) webhookSummaryPut(next WebhookSummary, prev int64) (*types.Put, error) {
	next.Version = prev + 1
	item, err := attributevalue.MarshalMap(next)
	if err != nil {
		return nil, err
	}
	for n, v := range keyOf(hooksPK(next.Owner), webhookSummarySK) {
		item[n] = v
	}
	cond := expression.AttributeNotExists(expression.Name(resources.AttrPK))
	if prev > 0 {
		cond = expression.Name("version").Equal(expression.Value(prev))
	}
	e, err := expression.NewBuilder().WithCondition(cond).Build()
	if err != nil {
		return nil, err
	}
	return &types.Put{TableName: aws.String(s.table), Item: item,
		ConditionExpression: e.Condition(), ExpressionAttributeNames: e.Names(), ExpressionAttributeValues: e.Values()}, nil
}

// AddWebhookEndpoint stores ep, a new endpoint of owner, and owner's
// summary next in place of version prev (as PutWebhookSummary), in one
// transaction. It is ErrExists when ep's id is taken, ErrConflict when the
// summary changed (read it again and redo).
func (s *Store) AddWebhookEndpoint(ctx context.Context, owner string, ep WebhookEndpoint, next WebhookSummary, prev int64) error {
	item, err := attributevalue.MarshalMap(webhookEndpointItem{WebhookEndpoint: ep, Owner: owner})
	if err != nil {
		return err
	}
	for n, v := range keyOf(hooksPK(owner), webhookEndpointSK(ep.ID)) {
		item[n] = v
	}
	e, _ := expression.NewBuilder().WithCondition(expression.AttributeNotExists(expression.Name(resources.AttrPK))).Build()
	put := types.TransactWriteItem{Put: &types.Put{TableName: aws.String(s.table), Item: item,
		ConditionExpression: e.Condition(), ExpressionAttributeNames: e.Names()}}
	return s.changeWebhookEndpoints(ctx, owner, put, next, prev, ErrExists)
}

// RemoveWebhookEndpoint deletes owner's endpoint id and stores owner's
// summary next in place of version prev, in one transaction. It is
// ErrNotFound when owner has no such endpoint, ErrConflict when the
// summary changed.
func (s *Store) RemoveWebhookEndpoint(ctx context.Context, owner, id string, next WebhookSummary, prev int64) error {
	e, _ := expression.NewBuilder().WithCondition(expression.AttributeExists(expression.Name(resources.AttrPK))).Build()
	del := types.TransactWriteItem{Delete: &types.Delete{TableName: aws.String(s.table), Key: keyOf(hooksPK(owner), webhookEndpointSK(id)),
		ConditionExpression: e.Condition(), ExpressionAttributeNames: e.Names()}}
	return s.changeWebhookEndpoints(ctx, owner, del, next, prev, ErrNotFound)
}

// changeWebhookEndpoints writes first and the summary in one transaction:
// firstFailed when first's condition failed, ErrConflict when the
// transaction was cancelled otherwise.
func (s *Store) changeWebhookEndpoints(ctx context.Context, owner string, first types.TransactWriteItem, next WebhookSummary, prev int64, firstFailed error) error {
	put, err := s.webhookSummaryPut(next, prev)
	if err != nil {
		return err
	}
	_, err = s.db.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{first, {Put: put}}})
	var tc *types.TransactionCanceledException
	switch {
	case err == nil:
		return nil
	case errors.As(err, &tc) && len(tc.CancellationReasons) == 2:
		if aws.ToString(tc.CancellationReasons[0].Code) == "ConditionalCheckFailed" {
			return firstFailed
		}
		return ErrConflict
	default:
		return fmt.Errorf("changing the webhook endpoints of %s: %w", owner, err)
	}
}

func webhookDeliveryItem(dl WebhookDelivery) (map[string]types.AttributeValue, error) {
	item, err := attributevalue.MarshalMap(dl)
	if err != nil {
		return nil, err
	}
	item[resources.AttrPK] = str(jobPK(dl.JobID))
	item[resources.AttrSK] = str("WH#" + dl.ID)
	item[resources.AttrExpiresAt] = ttlAttr(dl.UpdatedAt.Add(EventTTLDefault))
	return item, nil
}

// PutWebhookDelivery records a delivery's state (a failure to an endpoint
// with its entry in the endpoint's failures' log, in one transaction).
func (s *Store) PutWebhookDelivery(ctx context.Context, dl WebhookDelivery) error {
	items, err := deliveryItems(dl)
	if err != nil {
		return err
	}
	if len(items) == 1 {
		_, err = s.db.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(s.table), Item: items[0]})
	} else {
		tx := make([]types.TransactWriteItem, len(items))
		for i, item := range items {
			tx[i] = types.TransactWriteItem{Put: &types.Put{TableName: aws.String(s.table), Item: item}}
		}
		err = s.transact(ctx, tx, 0, 0)
	}
	if err != nil {
		return fmt.Errorf("recording delivery %s: %w", dl.ID, err)
	}
	return nil
}

// FinishWebhookDelivery records a delivery's outcome in the same
// transaction as fn's change of its job (UpdateJob, from read when the
// caller has just read the job; nil: read it first). It is ErrNotFound
// when the job is gone, and then writes nothing.
func (s *Store) FinishWebhookDelivery(ctx context.Context, dl WebhookDelivery, read *job.Job, fn func(*job.Job) error) error {
	items, err := deliveryItems(dl)
	if err != nil {
		return err
	}
	_, err = s.updateJob(ctx, dl.JobID, read, fn, items)
	return err
}

// GetWebhookDelivery reads what delivering event seq of job jobID needs,
// in one strongly consistent BatchGetItem: the event, the job (nil when
// retention removed it) and, when endpoint is not empty, owner's endpoint
// of that id (nil when it is gone). The event is ErrNotFound when it is
// gone.
func (s *Store) GetWebhookDelivery(ctx context.Context, jobID string, seq int64, owner, endpoint string) (EventRecord, *job.Job, *WebhookEndpoint, error) {
	var also []ItemKey
	epKey := ItemKey{PK: hooksPK(owner), SK: webhookEndpointSK(endpoint)}
	if endpoint != "" {
		also = append(also, epKey)
	}
	ev, j, items, err := s.GetEventAndJob(ctx, jobID, seq, also...)
	if err != nil {
		return EventRecord{}, nil, nil, err
	}
	item, ok := items[epKey]
	if !ok || endpoint == "" {
		return ev, j, nil, nil
	}
	ep, err := decodeWebhookEndpoint(endpoint, item)
	if err != nil {
		return EventRecord{}, nil, nil, err
	}
	return ev, j, &ep, nil
}
