package store

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/conveyor/conveyor/internal/job"
	"github.com/conveyor/conveyor/internal/resources"
)

// EventTTLDefault keeps events as long as jobs (the delete stage).
const EventTTLDefault = 720 * time.Hour

// EventRecord is one persisted event: written in the same transaction as
// the job change it describes, with the job as it was right after.
type EventRecord struct {
	JobID  string            `dynamodbav:"jobId" json:"jobId"`
	Owner  string            `dynamodbav:"eventOwner" json:"-"`
	Seq    int64             `dynamodbav:"seq" json:"seq"`
	Type   string            `dynamodbav:"type" json:"type"`
	At     time.Time         `dynamodbav:"at" json:"at"`
	Detail map[string]string `dynamodbav:"detail,omitempty" json:"detail,omitempty"`
	// Job is the job's JSON right after the event. The item keeps it
	// compressed (jobGz); items written before that keep it as text.
	Job        string   `dynamodbav:"job,omitempty" json:"-"`
	Tier       job.Tier `dynamodbav:"tier" json:"-"`
	WebhookURL string   `dynamodbav:"webhookUrl,omitempty" json:"-"`
}

// attrJobGz is the event item's attribute holding the job's JSON, gzipped:
// about a third of its size, so that an event item stays under the 1 KB of
// one write unit.
const attrJobGz = "jobGz"

// eventItem renders rec as an item (without its keys), its job compressed.
func eventItem(rec EventRecord) (map[string]types.AttributeValue, error) {
	view := rec.Job
	rec.Job = ""
	item, err := attributevalue.MarshalMap(rec)
	if err != nil {
		return nil, err
	}
	var b bytes.Buffer
	w := gzipWriters.Get().(*gzip.Writer)
	defer gzipWriters.Put(w)
	w.Reset(&b)
	if _, err := io.WriteString(w, view); err != nil {
		return nil, err
	}
	if err := w.Close(); err != nil {
		return nil, err
	}
	item[attrJobGz] = &types.AttributeValueMemberB{Value: b.Bytes()}
	return item, nil
}

// gzipWriters reuse the compressors of event items: a gzip writer holds
// about 800 KB of state, and a fresh one for each event was most of the
// processor time and the allocations of a job's write (Reset gives the
// same bytes as a new writer).
var gzipWriters = sync.Pool{New: func() any {
	w, err := gzip.NewWriterLevel(io.Discard, gzip.BestCompression)
	if err != nil {
		panic(err) // only for an invalid level
	}
	return w
}}

// decodeEvent reads an event item, its job from jobGz or, in an item
// written before events were compressed, from job.
func decodeEvent(item map[string]types.AttributeValue) (EventRecord, error) {
	var r EventRecord
	if err := attributevalue.UnmarshalMap(item, &r); err != nil {
		return r, fmt.Errorf("decoding an event item: %w", err)
	}
	if gz, ok := item[attrJobGz].(*types.AttributeValueMemberB); ok {
		zr, err := gzip.NewReader(bytes.NewReader(gz.Value))
		if err != nil {
			return r, fmt.Errorf("decoding the job of event %d of %s: %w", r.Seq, r.JobID, err)
		}
		view, err := io.ReadAll(zr)
		if err != nil {
			return r, fmt.Errorf("decoding the job of event %d of %s: %w", r.Seq, r.JobID, err)
		}
		r.Job = string(view)
	}
	return r, nil
}

// ID is the event's id within its job's stream.
func (e EventRecord) ID() string { return strconv.FormatInt(e.Seq, 10) }

// Body is the event's public JSON (job.EventBody): what the bus, a webhook
// and the SSE stream carry, none of the record's private fields (owner,
// tier, webhook URL).
func (e EventRecord) Body() job.EventBody {
	return job.NewEventBody(e.JobID, e.Seq, e.Type, e.At, e.Detail, e.Job)
}

func eventSK(seq int64) string { return fmt.Sprintf("%s%012d", resources.EventSKPrefix, seq) }

// eventItems assigns sequence numbers to j's pending events and renders
// them as items. Written once and never changed, they reach the event bus
// through the table's stream (internal/relay); they expire with the job.
func (s *Store) eventItems(j *job.Job) ([]map[string]types.AttributeValue, error) {
	if len(j.Pending) == 0 {
		return nil, nil
	}
	view, err := json.Marshal(j)
	if err != nil {
		return nil, err
	}
	ttl := s.EventTTL
	if ttl == 0 {
		ttl = EventTTLDefault
	}
	var items []map[string]types.AttributeValue
	seq := j.EventSeq
	for i, ev := range j.Pending {
		seq++
		rec := EventRecord{JobID: j.ID, Owner: j.Owner, Seq: seq, Type: ev.Type, At: ev.At, Detail: ev.Detail, Job: string(view), Tier: j.Tier, WebhookURL: j.WebhookURL}
		item, err := eventItem(rec)
		if err != nil {
			return nil, err
		}
		item[resources.AttrPK] = str(jobPK(j.ID))
		item[resources.AttrSK] = str(eventSK(seq))
		if i == len(j.Pending)-1 {
			// The write's last event stands for all of them in the feed.
			setFeedKeys(item, rec, j.EventSeq+1)
		}
		item[resources.AttrExpiresAt] = &types.AttributeValueMemberN{Value: strconv.FormatInt(ev.At.Add(ttl).Unix(), 10)}
		items = append(items, item)
	}
	return items, nil
}

// Events returns a job's events after seq, oldest first (at most limit).
func (s *Store) Events(ctx context.Context, jobID string, after int64, limit int) ([]EventRecord, error) {
	kc := expression.Key(resources.AttrPK).Equal(expression.Value(jobPK(jobID))).
		And(expression.Key(resources.AttrSK).Between(expression.Value(eventSK(after+1)), expression.Value(eventSK(1<<39))))
	e, err := expression.NewBuilder().WithKeyCondition(kc).Build()
	if err != nil {
		return nil, err
	}
	res, err := s.db.Query(ctx, &dynamodb.QueryInput{
		TableName: aws.String(s.table), KeyConditionExpression: e.KeyCondition(),
		ExpressionAttributeNames: e.Names(), ExpressionAttributeValues: e.Values(),
		ConsistentRead: aws.Bool(true), Limit: aws.Int32(int32(limit)),
	})
	if err != nil {
		return nil, fmt.Errorf("reading events of %s: %w", jobID, err)
	}
	out := make([]EventRecord, 0, len(res.Items))
	for _, item := range res.Items {
		if s.expired(item) {
			continue
		}
		r, err := decodeEvent(item)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, nil
}

// GetEvent returns one event of a job.
func (s *Store) GetEvent(ctx context.Context, jobID string, seq int64) (EventRecord, error) {
	var r EventRecord
	err := s.getWith(ctx, jobPK(jobID), eventSK(seq), func(item map[string]types.AttributeValue) (err error) {
		r, err = decodeEvent(item)
		return err
	})
	return r, err
}

// GetEventAndJob reads event seq of job jobID, the job and the items also
// names, in one strongly consistent BatchGetItem: what a webhook delivery
// needs (the event to send, the job to append its outcome to, the
// endpoint it goes to) for one read request. The event is ErrNotFound when
// it is gone; the job is nil when it is (retention may remove a job between
// its event and the delivery). also's items that exist are returned by key.
func (s *Store) GetEventAndJob(ctx context.Context, jobID string, seq int64, also ...ItemKey) (EventRecord, *job.Job, map[ItemKey]map[string]types.AttributeValue, error) {
	evKey, jKey := ItemKey{jobPK(jobID), eventSK(seq)}, ItemKey{jobPK(jobID), jobSK}
	keys := []ItemKey{evKey, jKey}
	for _, k := range also {
		if k != evKey && k != jKey {
			keys = append(keys, k)
		}
	}
	var (
		ev     EventRecord
		found  bool
		j      *job.Job
		others = map[ItemKey]map[string]types.AttributeValue{}
	)
	err := s.GetItems(ctx, keys, func(k ItemKey, item map[string]types.AttributeValue) error {
		switch k {
		case evKey:
			found = true
			var err error
			ev, err = decodeEvent(item)
			return err
		case jKey:
			j = new(job.Job)
			return unmarshalJob(item, j)
		default:
			others[k] = item
			return nil
		}
	})
	if err != nil {
		return EventRecord{}, nil, nil, fmt.Errorf("reading event %d of job %s: %w", seq, jobID, err)
	}
	if !found {
		return EventRecord{}, nil, nil, ErrNotFound
	}
	return ev, j, others, nil
}
