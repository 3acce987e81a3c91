package store

import (
	"context"
	"encoding/base64"
	"fmt"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/conveyor/conveyor/internal/resources"
)

// The failures' log: a delivery to one of an owner's endpoints that ends
// failed is also noted in the endpoint's own partition
// ("WHFAIL#<owner>#<endpoint>" / "<failed at, ms, 13 digits>#<delivery>"),
// in the write that records its failure and kept as long as the delivery's
// record is. POST /v1/webhooks/{id}/redeliver {"since"} finds an
// endpoint's failures since a time with one Query, in the order they
// failed; nothing else reads the log, and only failures write it.

func webhookFailurePK(owner, endpoint string) string { return "WHFAIL#" + owner + "#" + endpoint }

// failureTime is the leading part of a failure's sort key: when it
// failed, in ms, 13 digits, so that the keys sort by time.
func failureTime(at time.Time) string { return fmt.Sprintf("%013d", max(at.UnixMilli(), 0)) }

func webhookFailureSK(at time.Time, delivery string) string { return failureTime(at) + "#" + delivery }

// logsFailure reports whether dl's write also notes it in its endpoint's
// failures' log: a delivery to an endpoint, of a known owner and event,
// that ended failed.
func logsFailure(dl WebhookDelivery) bool {
	return dl.Status == DeliveryFailed && dl.Endpoint != "" && dl.Owner != "" && dl.Seq > 0
}

// webhookFailureItem is dl's entry in its endpoint's failures' log.
func webhookFailureItem(dl WebhookDelivery) (map[string]types.AttributeValue, error) {
	item, err := attributevalue.MarshalMap(WebhookFailure{DeliveryID: dl.ID, JobID: dl.JobID, Seq: dl.Seq, FailedAt: dl.UpdatedAt})
	if err != nil {
		return nil, err
	}
	item[resources.AttrPK] = str(webhookFailurePK(dl.Owner, dl.Endpoint))
	item[resources.AttrSK] = str(webhookFailureSK(dl.UpdatedAt, dl.ID))
	item[resources.AttrExpiresAt] = ttlAttr(dl.UpdatedAt.Add(EventTTLDefault))
	return item, nil
}

// deliveryItems are the items recording dl: its record and, for a
// failure to an endpoint, its entry in the endpoint's failures' log.
func deliveryItems(dl WebhookDelivery) ([]map[string]types.AttributeValue, error) {
	item, err := webhookDeliveryItem(dl)
	if err != nil {
		return nil, err
	}
	items := []map[string]types.AttributeValue{item}
	if logsFailure(dl) {
		entry, err := webhookFailureItem(dl)
		if err != nil {
			return nil, err
		}
		items = append(items, entry)
	}
	return items, nil
}

// WebhookFailures returns the entries of owner's endpoint's failures' log
// from since on, oldest first, at most limit (1–1000), after the cursor a
// previous call handed out (empty: from since). next is the cursor of what
// follows, empty when the log has nothing more; a cursor of another log
// or time is ErrBadCursor.
func (s *Store) WebhookFailures(ctx context.Context, owner, endpoint string, since time.Time, cursor string, limit int) (out []WebhookFailure, next string, err error) {
	limit = min(max(limit, 1), 1000)
	pk := webhookFailurePK(owner, endpoint)
	from := failureTime(since)
	var start map[string]types.AttributeValue
	if cursor != "" {
		sk, err := decodeFailureCursor(cursor, from)
		if err != nil {
			return nil, "", err
		}
		start = keyOf(pk, sk)
	}
	key := expression.Key(resources.AttrPK).Equal(expression.Value(pk)).
		And(expression.Key(resources.AttrSK).GreaterThanEqual(expression.Value(from)))
	expr, err := expression.NewBuilder().WithKeyCondition(key).Build()
	if err != nil {
		return nil, "", err
	}
	in := &dynamodb.QueryInput{
		TableName: aws.String(s.table), KeyConditionExpression: expr.KeyCondition(),
		ExpressionAttributeNames: expr.Names(), ExpressionAttributeValues: expr.Values(),
		ExclusiveStartKey: start, ConsistentRead: aws.Bool(true),
	}
	for len(out) < limit {
		in.Limit = aws.Int32(int32(limit - len(out)))
		res, err := s.db.Query(ctx, in)
		if err != nil {
			return nil, "", fmt.Errorf("reading the failed deliveries of %s: %w", endpoint, err)
		}
		for _, item := range res.Items {
			if s.expired(item) {
				continue
			}
			var f WebhookFailure
			if err := attributevalue.UnmarshalMap(item, &f); err != nil {
				return nil, "", err
			}
			out = append(out, f)
			next = item[resources.AttrSK].(*types.AttributeValueMemberS).Value
		}
		if len(res.LastEvaluatedKey) == 0 {
			return out, "", nil
		}
		in.ExclusiveStartKey = res.LastEvaluatedKey
		next = res.LastEvaluatedKey[resources.AttrSK].(*types.AttributeValueMemberS).Value
	}
	return out, encodeFailureCursor(next, from), nil
}

// A failures' cursor is the last sort key read and the lower bound of the
// query it continues, base64url.
func encodeFailureCursor(sk, from string) string {
	return base64.RawURLEncoding.EncodeToString([]byte(from + "|" + sk))
}

func decodeFailureCursor(c, from string) (string, error) {
	b, err := base64.RawURLEncoding.DecodeString(c)
	if err != nil {
		return "", fmt.Errorf("%w: not base64url", ErrBadCursor)
	}
	bound, sk, ok := strings.Cut(string(b), "|")
	switch {
	case !ok:
		return "", fmt.Errorf("%w: not a cursor", ErrBadCursor)
	case bound != from:
		return "", fmt.Errorf("%w: it continues another since", ErrBadCursor)
	case len(sk) < 15 || sk < from || sk[13] != '#':
		return "", fmt.Errorf("%w: not a key of this list", ErrBadCursor)
	}
	return sk, nil
}

// GetWebhookDeliveries reads the records of refs (strongly consistent, 100
// a request), by delivery id; a delivery with no record is left out.
func (s *Store) GetWebhookDeliveries(ctx context.Context, refs []DeliveryRef) (map[string]WebhookDelivery, error) {
	keys := make([]ItemKey, 0, len(refs))
	seen := map[ItemKey]bool{}
	for _, r := range refs {
		k := ItemKey{PK: jobPK(r.JobID), SK: "WH#" + r.ID}
		if !seen[k] {
			seen[k] = true
			keys = append(keys, k)
		}
	}
	out := make(map[string]WebhookDelivery, len(keys))
	err := s.GetItems(ctx, keys, func(_ ItemKey, item map[string]types.AttributeValue) error {
		var dl WebhookDelivery
		if err := attributevalue.UnmarshalMap(item, &dl); err != nil {
			return err
		}
		out[dl.ID] = dl
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("reading webhook deliveries: %w", err)
	}
	return out, nil
}

// RedeliverWebhook records that dl, as read, is being delivered again
// from its first attempt at now: status retrying, no attempts. It is
// conditional on the record being as read (same status and time), so of
// two requests to redeliver one failure one records it and the other gets
// ErrConflict, as it does when an attempt changed the record since or
// retention removed it.
func (s *Store) RedeliverWebhook(ctx context.Context, dl WebhookDelivery, now time.Time) error {
	prev, err := attributevalue.Marshal(dl.UpdatedAt)
	if err != nil {
		return err
	}
	update := expression.Set(expression.Name("status"), expression.Value(DeliveryRetrying)).
		Set(expression.Name("attempts"), expression.Value(0)).
		Set(expression.Name("updatedAt"), expression.Value(now.UTC())).
		Set(expression.Name(resources.AttrExpiresAt), expression.Value(now.Add(EventTTLDefault).Unix()))
	cond := expression.Name("status").Equal(expression.Value(dl.Status)).
		And(expression.Name("updatedAt").Equal(expression.Value(prev)))
	expr, err := expression.NewBuilder().WithUpdate(update).WithCondition(cond).Build()
	if err != nil {
		return err
	}
	_, err = s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: aws.String(s.table), Key: keyOf(jobPK(dl.JobID), "WH#"+dl.ID),
		UpdateExpression: expr.Update(), ConditionExpression: expr.Condition(),
		ExpressionAttributeNames: expr.Names(), ExpressionAttributeValues: expr.Values(),
	})
	if isConditionFailed(err) {
		return ErrConflict
	}
	if err != nil {
		return fmt.Errorf("recording the redelivery of %s: %w", dl.ID, err)
	}
	return nil
}
