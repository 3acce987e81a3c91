package store

import (
	"context"
	"errors"
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

// Media is referenced, not owned. An upload record counts the jobs that may
// still run and name it (refs): CreateJob takes one reference per upload in
// the transaction that creates the job, on the condition that the upload is
// still confirmed and inside its use window; StaleJob releases them in the
// transaction that makes the job stale. An upload nobody refers to sits in
// the sparse sweep index ("upload" status) from the end of its use window,
// or from the moment its last reference went; ExpireUpload marks it
// expired on the condition that it is still unreferenced. Both conditions
// are on the one upload record, so a submission racing the last release
// either keeps the object (its reference came first) or gets 422 (the
// expiry came first) — never a job accepted on a deleted object.

// uploadSweepStatus is the bySweep "status" of uploads that no job refers
// to, keyed by when they may go.
const uploadSweepStatus = job.Status("upload")

// IdempotencyTTL is how long an idempotency record outlives the time its
// job is due (its creation, or its scheduleAt): by then the job finished
// long ago, and a finished job's record is taken over by a new submission
// anyway.
const IdempotencyTTL = resources.DeleteAfterDefault

// UploadUnavailableError means a job could not take a reference on an
// upload (job.UploadUnavailableError).
type UploadUnavailableError = job.UploadUnavailableError

// mediaOf lists the distinct uploads j's items name.
func mediaOf(j *job.Job) []string {
	var ids []string
	for _, it := range j.Items {
		if it.UploadID != "" && !slices.Contains(ids, it.UploadID) {
			ids = append(ids, it.UploadID)
		}
	}
	return ids
}

// referenceOps are the transaction items by which j takes a reference on
// each of its uploads: refs+1 and out of the sweep, if the upload is
// confirmed, the owner's and inside its use window at now.
func (s *Store) referenceOps(j *job.Job, now time.Time) ([]types.TransactWriteItem, error) {
	var ops []types.TransactWriteItem
	for _, id := range j.MediaRefs {
		cond := expression.Name("status").Equal(expression.Value(uploads.Confirmed)).
			And(expression.Name("uploadOwner").Equal(expression.Value(j.Owner))).
			And(expression.Or(
				expression.AttributeNotExists(expression.Name("usableUntil")),
				expression.Name("usableUntil").GreaterThan(expression.Value(sortTime(now))),
			))
		update := expression.Add(expression.Name("refs"), expression.Value(1)).
			Remove(expression.Name(resources.AttrSweepKey)).
			Remove(expression.Name(resources.AttrSweepAt))
		e, err := expression.NewBuilder().WithCondition(cond).WithUpdate(update).Build()
		if err != nil {
			return nil, fmt.Errorf("building the reference on upload %s: %w", id, err)
		}
		ops = append(ops, types.TransactWriteItem{Update: &types.Update{
			TableName: aws.String(s.table), Key: keyOf(uploadPK(id), uploadSK),
			UpdateExpression: e.Update(), ConditionExpression: e.Condition(),
			ExpressionAttributeNames: e.Names(), ExpressionAttributeValues: e.Values(),
		}})
	}
	return ops, nil
}

// releaseOps are the transaction items by which a job lets go of its
// references: refs-1, and back into the sweep due at now, where the sweep
// expires the upload if that was the last reference. An upload record that
// no longer exists is skipped by the caller (see StaleJob).
func (s *Store) releaseOps(ids []string, now time.Time) ([]types.TransactWriteItem, error) {
	var ops []types.TransactWriteItem
	for _, id := range ids {
		update := expression.Add(expression.Name("refs"), expression.Value(-1)).
			Set(expression.Name(resources.AttrSweepKey), expression.Value(sweepKey(uploadSweepStatus, id))).
			Set(expression.Name(resources.AttrSweepAt), expression.Value(sortTime(now)))
		e, err := expression.NewBuilder().WithCondition(expression.AttributeExists(expression.Name(resources.AttrPK))).WithUpdate(update).Build()
		if err != nil {
			return nil, fmt.Errorf("building the release of upload %s: %w", id, err)
		}
		ops = append(ops, types.TransactWriteItem{Update: &types.Update{
			TableName: aws.String(s.table), Key: keyOf(uploadPK(id), uploadSK),
			UpdateExpression: e.Update(), ConditionExpression: e.Condition(),
			ExpressionAttributeNames: e.Names(), ExpressionAttributeValues: e.Values(),
		}})
	}
	return ops, nil
}

// failedAt reports whether the transaction item at index i was cancelled
// by its condition.
func failedAt(tc *types.TransactionCanceledException, i int) bool {
	return i < len(tc.CancellationReasons) && aws.ToString(tc.CancellationReasons[i].Code) == "ConditionalCheckFailed"
}

// StaleJob applies fn to seen (which makes it stale, or returns an error
// to abort without writing) and saves it together with the release of
// every upload reference the job holds, in one transaction conditional on
// the job's version: seen is the job as the caller read it (a stale
// sweep's page, ScanDue's WholeJobs), so a job nobody changed meanwhile
// costs this one request. On a conflict it reads the job again and
// retries. The job's MediaRefs are cleared: a stale job no longer keeps
// media alive (retried, it fails with media_expired if its media went
// meanwhile).
func (s *Store) StaleJob(ctx context.Context, seen job.Job, now time.Time, fn func(*job.Job) error) (job.Job, error) {
	id := seen.ID
	var gone []string // upload records that no longer exist
	for attempt := range 8 {
		j := seen
		if attempt > 0 {
			var err error
			if j, err = s.GetJob(ctx, id); err != nil {
				return job.Job{}, err
			}
		}
		if err := fn(&j); err != nil {
			return j, err
		}
		var release []string
		for _, u := range j.MediaRefs {
			if !slices.Contains(gone, u) {
				release = append(release, u)
			}
		}
		j.MediaRefs = nil
		prev := j.Version
		j.Version++
		events, err := s.eventItems(&j)
		if err != nil {
			return job.Job{}, err
		}
		j.EventSeq += int64(len(j.Pending))
		item, err := s.jobItem(&j)
		if err != nil {
			return job.Job{}, err
		}
		c := condition(expression.Name("version").Equal(expression.Value(prev)))
		tx := []types.TransactWriteItem{{Put: &types.Put{TableName: aws.String(s.table), Item: item,
			ConditionExpression: c.Condition(), ExpressionAttributeNames: c.Names(), ExpressionAttributeValues: c.Values()}}}
		for _, ev := range events {
			tx = append(tx, types.TransactWriteItem{Put: &types.Put{TableName: aws.String(s.table), Item: ev}})
		}
		first := len(tx)
		ops, err := s.releaseOps(release, now)
		if err != nil {
			return job.Job{}, err
		}
		tx = append(tx, ops...)
		_, err = s.db.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: tx})
		var tc *types.TransactionCanceledException
		switch {
		case errors.As(err, &tc):
			for i, u := range release {
				if failedAt(tc, first+i) {
					gone = append(gone, u)
				}
			}
			continue // the job changed, or an upload record is gone: read again
		case err != nil:
			return job.Job{}, fmt.Errorf("staling job %s: %w", id, err)
		}
		j.Pending = nil
		return j, nil
	}
	return job.Job{}, fmt.Errorf("staling job %s: %w (gave up after retries)", id, ErrConflict)
}

// DueUploads returns up to limit uploads that no job refers to and whose
// time to go came at or before before, across the sweep index's shards.
func (s *Store) DueUploads(ctx context.Context, before time.Time, limit int) ([]uploads.Upload, error) {
	scan := s.ScanDueUploads(before)
	var out []uploads.Upload
	for len(out) < limit && !scan.Done() {
		page, err := scan.Uploads(ctx, limit-len(out))
		if err != nil {
			return nil, err
		}
		out = append(out, page...)
	}
	return out, nil
}

// ScanDueUploads returns a scan of the uploads that no job refers to and
// whose time to go came at or before before (read it with Uploads).
func (s *Store) ScanDueUploads(before time.Time) *DueScan {
	return s.ScanDue(before, nil, uploadSweepStatus)
}

// ExpireUpload marks a due upload expired, if no job refers to it and it
// is still confirmed, or still pending or rejected past its presigned URL
// (PutUpload), and takes it out of the sweep; its record then expires keep
// later. It reports whether it did: only then may the caller delete the
// object. An upload that turned out to be referenced leaves the sweep (its
// last release puts it back).
func (s *Store) ExpireUpload(ctx context.Context, id string, now time.Time, keep time.Duration) (uploads.Upload, bool, error) {
	due := expression.Name(resources.AttrSweepAt).LessThanEqual(expression.Value(sortTime(now)))
	unreferenced := expression.Or(expression.AttributeNotExists(expression.Name("refs")), expression.Name("refs").LessThanEqual(expression.Value(0)))
	goes := expression.Name("status").In(expression.Value(uploads.Confirmed), expression.Value(uploads.Pending), expression.Value(uploads.Rejected))
	cond := goes.And(unreferenced).And(due)
	update := expression.Set(expression.Name("status"), expression.Value(uploads.Expired)).
		Set(expression.Name("expiredAt"), expression.Value(now.UTC().Format(time.RFC3339Nano))).
		Set(expression.Name(resources.AttrExpiresAt), expression.Value(now.Add(keep).Unix())).
		Remove(expression.Name(resources.AttrSweepKey)).
		Remove(expression.Name(resources.AttrSweepAt))
	e, err := expression.NewBuilder().WithCondition(cond).WithUpdate(update).Build()
	if err != nil {
		return uploads.Upload{}, false, err
	}
	res, err := s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: aws.String(s.table), Key: keyOf(uploadPK(id), uploadSK),
		UpdateExpression: e.Update(), ConditionExpression: e.Condition(),
		ExpressionAttributeNames: e.Names(), ExpressionAttributeValues: e.Values(),
		ReturnValues: types.ReturnValueAllNew,
	})
	if isConditionFailed(err) {
		return uploads.Upload{}, false, s.unsweepUpload(ctx, id)
	}
	if err != nil {
		return uploads.Upload{}, false, fmt.Errorf("expiring upload %s: %w", id, err)
	}
	var u uploads.Upload
	if err := attributevalue.UnmarshalMap(res.Attributes, &u); err != nil {
		return uploads.Upload{}, false, fmt.Errorf("decoding upload %s: %w", id, err)
	}
	return u, true, nil
}

// unsweepUpload takes a due upload that may not go (referenced, or expired
// already) out of the sweep. An unreferenced one keeps its key: a release
// made it due again, or it was confirmed meanwhile and re-keyed for the end
// of its use window. A referenced one is put back by its last release.
func (s *Store) unsweepUpload(ctx context.Context, id string) error {
	cond := expression.AttributeExists(expression.Name(resources.AttrPK)).And(expression.Or(
		expression.Name("refs").GreaterThan(expression.Value(0)),
		expression.Name("status").Equal(expression.Value(uploads.Expired)),
	))
	update := expression.Remove(expression.Name(resources.AttrSweepKey)).Remove(expression.Name(resources.AttrSweepAt))
	e, err := expression.NewBuilder().WithCondition(cond).WithUpdate(update).Build()
	if err != nil {
		return err
	}
	_, err = s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: aws.String(s.table), Key: keyOf(uploadPK(id), uploadSK),
		UpdateExpression: e.Update(), ConditionExpression: e.Condition(),
		ExpressionAttributeNames: e.Names(), ExpressionAttributeValues: e.Values(),
	})
	if err != nil && !isConditionFailed(err) {
		return fmt.Errorf("taking upload %s out of the sweep: %w", id, err)
	}
	return nil
}

// ttlAttr renders an epoch-second TTL value.
func ttlAttr(t time.Time) types.AttributeValue {
	return &types.AttributeValueMemberN{Value: strconv.FormatInt(t.Unix(), 10)}
}

// WholeJobs reads the next page (up to limit) of due jobs from the index,
// then the jobs themselves in one strongly consistent BatchGetItem: whole
// and current whatever the index projects, so that a sweep may write them
// back conditional on their version without reading each first. Jobs gone
// meanwhile are left out; an empty page does not mean the scan is done.
func (d *DueScan) WholeJobs(ctx context.Context, limit int) ([]job.Job, error) {
	items, err := d.page(ctx, limit)
	if err != nil || len(items) == 0 {
		return nil, err
	}
	ids := make([]string, 0, len(items))
	for _, item := range items {
		if pk, ok := item[resources.AttrPK].(*types.AttributeValueMemberS); ok && strings.HasPrefix(pk.Value, jobPK("")) {
			ids = append(ids, strings.TrimPrefix(pk.Value, jobPK("")))
		}
	}
	return d.s.getJobs(ctx, ids)
}
