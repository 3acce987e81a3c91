package store

import (
	"context"
	"fmt"
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

// The store keeps the uploads of package uploads.
var _ uploads.Store = (*Store)(nil)

const uploadSK = "UPLOAD"

func uploadPK(id string) string { return "UPL#" + id }

// PutUpload stores a new upload; it fails if the id exists. Its use window
// is set from CreatedAt; u.ExpiresAt is the caller's, who knows how long
// the presigned URL lives: the time after which an upload still pending
// (never confirmed) or rejected may go. The upload enters the retention
// sweep then, whose expiry deletes whatever object was put; its record's
// TTL is PendingUploadMargin later, so that the sweep reaches it first.
// Confirming it moves its sweep to the end of its use window; rejecting
// it keeps this one.
func (s *Store) PutUpload(ctx context.Context, u uploads.Upload) error {
	u.UsableUntil = sortTime(u.CreatedAt.Add(resources.UploadUseWindow))
	if u.ExpiresAt == 0 {
		u.ExpiresAt = u.CreatedAt.Add(resources.PendingUploadMargin).Unix()
	}
	goes := time.Unix(u.ExpiresAt, 0)
	u.ExpiresAt = goes.Add(resources.PendingUploadMargin).Unix()
	item, err := attributevalue.MarshalMap(u)
	if err != nil {
		return err
	}
	for k, v := range keyOf(uploadPK(u.ID), uploadSK) {
		item[k] = v
	}
	item[resources.AttrSweepKey] = &types.AttributeValueMemberS{Value: sweepKey(uploadSweepStatus, u.ID)}
	item[resources.AttrSweepAt] = &types.AttributeValueMemberS{Value: sortTime(goes)}
	c := condition(expression.AttributeNotExists(expression.Name(resources.AttrPK)))
	if _, err := s.db.PutItem(ctx, &dynamodb.PutItemInput{
		TableName: aws.String(s.table), Item: item,
		ConditionExpression: c.Condition(), ExpressionAttributeNames: c.Names(),
	}); err != nil {
		if isConditionFailed(err) {
			return ErrConflict
		}
		return fmt.Errorf("storing upload %s: %w", u.ID, err)
	}
	return nil
}

// GetUpload returns the upload with id or ErrNotFound.
func (s *Store) GetUpload(ctx context.Context, id string) (uploads.Upload, error) {
	var u uploads.Upload
	err := s.get(ctx, uploadPK(id), uploadSK, &u)
	u.Status = u.StatusAt(s.now())
	return u, err
}

// GetUploads returns the uploads with the given ids (missing ones are
// absent from the map), in one BatchGetItem per 100 ids.
func (s *Store) GetUploads(ctx context.Context, ids []string) (map[string]uploads.Upload, error) {
	out, _, err := s.GetUploadsAndAccount(ctx, ids, "", "")
	return out, err
}

// GetUploadsAndAccount reads the uploads and, when owner is set, whether
// owner has connected an account for provider — in the same BatchGetItem,
// so a submission costs one read request.
func (s *Store) GetUploadsAndAccount(ctx context.Context, ids []string, owner, provider string) (map[string]uploads.Upload, bool, error) {
	out := map[string]uploads.Upload{}
	connected := false
	var keys []ItemKey
	if owner != "" {
		keys = append(keys, ItemKey{accountPK(owner), provider})
	}
	for _, id := range distinct(ids) {
		keys = append(keys, ItemKey{uploadPK(id), uploadSK})
	}
	err := s.GetItems(ctx, keys, func(k ItemKey, item map[string]types.AttributeValue) error {
		if owner != "" && k.PK == accountPK(owner) {
			connected = true
			return nil
		}
		var u uploads.Upload
		if err := attributevalue.UnmarshalMap(item, &u); err != nil {
			return err
		}
		u.Status = u.StatusAt(s.now())
		out[u.ID] = u
		return nil
	})
	if err != nil {
		return nil, false, fmt.Errorf("reading uploads: %w", err)
	}
	return out, connected, nil
}

// SettleUpload moves a pending upload to confirmed or rejected. Settling it
// again to the same outcome is a no-op that returns the stored upload, so
// the S3 event and the confirm endpoint may race or repeat safely.
//
// A confirmed upload's retention sweep moves to the end of its use window
// (it leaves the sweep while a job refers to it) and its record gets a
// backstop TTL past the bucket lifecycle; a rejected one keeps the sweep
// PutUpload gave it (its object goes once its presigned URL can no longer
// put one) and its record expires after resources.DeleteAfterDefault.
func (s *Store) SettleUpload(ctx context.Context, id string, status uploads.Status, reason string, pin job.Pin, at time.Time) (uploads.Upload, error) {
	update := expression.Set(expression.Name("status"), expression.Value(status)).
		Set(expression.Name("confirmedAt"), expression.Value(at.UTC().Format(time.RFC3339Nano)))
	if !pin.IsZero() {
		update = update.Set(expression.Name("pin"), expression.Value(pin))
	}
	if reason != "" {
		update = update.Set(expression.Name("reason"), expression.Value(reason))
	}
	if status == uploads.Confirmed {
		update = update.
			Set(expression.Name(resources.AttrExpiresAt), expression.Value(at.Add(resources.UploadObjectHorizon+resources.DeleteAfterDefault).Unix())).
			Set(expression.Name(resources.AttrSweepKey), expression.Value(sweepKey(uploadSweepStatus, id))).
			Set(expression.Name(resources.AttrSweepAt), expression.IfNotExists(expression.Name("usableUntil"), expression.Value(sortTime(at.Add(resources.UploadUseWindow)))))
	} else {
		update = update.Set(expression.Name(resources.AttrExpiresAt), expression.Value(at.Add(resources.DeleteAfterDefault).Unix()))
	}
	cond := expression.AttributeExists(expression.Name(resources.AttrPK)).
		And(expression.Name("status").Equal(expression.Value(uploads.Pending)))
	e, err := expression.NewBuilder().WithUpdate(update).WithCondition(cond).Build()
	if err != nil {
		return uploads.Upload{}, err
	}
	res, err := s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: aws.String(s.table), Key: keyOf(uploadPK(id), uploadSK),
		UpdateExpression: e.Update(), ConditionExpression: e.Condition(),
		ExpressionAttributeNames: e.Names(), ExpressionAttributeValues: e.Values(),
		ReturnValues: types.ReturnValueAllNew,
	})
	if isConditionFailed(err) {
		// Already settled (or missing): report what is stored.
		return s.GetUpload(ctx, id)
	}
	if err != nil {
		return uploads.Upload{}, fmt.Errorf("settling upload %s: %w", id, err)
	}
	var u uploads.Upload
	err = attributevalue.UnmarshalMap(res.Attributes, &u)
	u.Status = u.StatusAt(s.now())
	return u, err
}
