package store

import (
	"context"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/conveyor/conveyor/internal/job"
	"github.com/conveyor/conveyor/internal/resources"
	"github.com/conveyor/conveyor/internal/uploads"
)

// ImportJobs writes jobs as they are, with their table and index keys, 25
// to a BatchWriteItem: no condition, no event, no reference on their
// uploads. It is for loading many records at once (seeding a table for a
// load test, restoring an export), never for a job's life, whose every
// change is a conditional write with its event.
func (s *Store) ImportJobs(ctx context.Context, jobs []job.Job) error {
	items := make([]map[string]types.AttributeValue, 0, len(jobs))
	for i := range jobs {
		item, err := s.jobItem(&jobs[i])
		if err != nil {
			return err
		}
		items = append(items, item)
	}
	return s.batchPut(ctx, items)
}

// batchPut writes items 25 to a BatchWriteItem, sending again what
// DynamoDB left unprocessed.
func (s *Store) batchPut(ctx context.Context, items []map[string]types.AttributeValue) error {
	for start := 0; start < len(items); start += 25 {
		var reqs []types.WriteRequest
		for _, it := range items[start:min(start+25, len(items))] {
			reqs = append(reqs, types.WriteRequest{PutRequest: &types.PutRequest{Item: it}})
		}
		pending := map[string][]types.WriteRequest{s.table: reqs}
		for wait := 10 * time.Millisecond; len(pending[s.table]) > 0; wait *= 2 {
			res, err := s.db.BatchWriteItem(ctx, &dynamodb.BatchWriteItemInput{RequestItems: pending})
			if err != nil {
				return fmt.Errorf("writing a batch of %d items: %w", len(pending[s.table]), err)
			}
			pending = res.UnprocessedItems
			if len(pending[s.table]) > 0 {
				select {
				case <-ctx.Done():
					return ctx.Err()
				case <-time.After(wait):
				}
			}
		}
	}
	return nil
}

// ImportUploads writes uploads as they are (see ImportJobs); a confirmed
// one enters the upload sweep at the end of its use window, as
// SettleUpload puts it.
func (s *Store) ImportUploads(ctx context.Context, ups []uploads.Upload) error {
	items := make([]map[string]types.AttributeValue, 0, len(ups))
	for _, u := range ups {
		if u.UsableUntil == "" {
			u.UsableUntil = sortTime(u.CreatedAt.Add(resources.UploadUseWindow))
		}
		item, err := attributevalue.MarshalMap(u)
		if err != nil {
			return fmt.Errorf("encoding upload %s: %w", u.ID, err)
		}
		for k, v := range keyOf(uploadPK(u.ID), uploadSK) {
			item[k] = v
		}
		if u.Status == uploads.Confirmed && u.Refs <= 0 {
			item[resources.AttrSweepKey] = str(sweepKey(uploadSweepStatus, u.ID))
			item[resources.AttrSweepAt] = str(u.UsableUntil)
		}
		items = append(items, item)
	}
	return s.batchPut(ctx, items)
}
