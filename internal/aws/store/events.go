package store

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
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

// EventRecord is one persisted event (job.EventRecord).
type EventRecord = job.EventRecord

// eventCodec is how an event item keeps its compressed parts: the job's
// JSON in job, the write's earlier events in earlier.
type eventCodec struct {
	job, earlier string
	zip, unzip   func([]byte) ([]byte, error)
}

// eventCodecs are the two ways, in the order a reader tries them: jobZ
// and earlierZ, compressed with the job dictionary (about a sixth of the
// job's JSON, so that an event item stays well under the 1 KB of one write
// unit), and jobGz and earlierGz, gzipped (about a third): what a store
// told WriteJobAttributes writes, as code before jobZ reads only them.
var eventCodecs = []eventCodec{
	{job: attrJobZ, earlier: attrEarlierZ, zip: compressed, unzip: decompressed},
	{job: attrJobGz, earlier: attrEarlierGz, zip: gzipped, unzip: gunzipped},
}

// attrJobGz is the event item's gzipped job (eventCodecs).
const attrJobGz = "jobGz"

// writeCodec is the way s writes event items.
func (s *Store) writeCodec() eventCodec {
	if s.jobAttributes {
		return eventCodecs[1]
	}
	return eventCodecs[0]
}

// eventItem renders rec as an item (without its keys), its job compressed
// by c.
func eventItem(rec EventRecord, c eventCodec) (map[string]types.AttributeValue, error) {
	view := rec.Job
	rec.Job = ""
	item, err := attributevalue.MarshalMap(rec)
	if err != nil {
		return nil, err
	}
	b, err := c.zip([]byte(view))
	if err != nil {
		return nil, err
	}
	item[c.job] = &types.AttributeValueMemberB{Value: b}
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

// decodeEvent reads an event item, its job from jobZ, jobGz or, in an item
// written before events were compressed, from job.
func decodeEvent(item map[string]types.AttributeValue) (EventRecord, error) {
	var r EventRecord
	if err := attributevalue.UnmarshalMap(item, &r); err != nil {
		return r, fmt.Errorf("decoding an event item: %w", err)
	}
	for _, c := range eventCodecs {
		if b, ok := item[c.job].(*types.AttributeValueMemberB); ok {
			view, err := c.unzip(b.Value)
			if err != nil {
				return r, fmt.Errorf("decoding the job of event %d of %s: %w", r.Seq, r.JobID, err)
			}
			r.Job = string(view)
			break
		}
	}
	return r, nil
}

func eventSK(seq int64) string { return fmt.Sprintf("%s%012d", resources.EventSKPrefix, seq) }

// attrEarlierZ is an event item's list of the write's events before its
// last one (each seq, type, at, detail), as JSON compressed with the job
// dictionary: one item per write of a job, however many events the write
// made, keyed by its last event's sequence, and under the 1 KB of one
// write unit. attrEarlierGz holds it gzipped (WriteJobAttributes, and
// items written before jobZ).
const (
	attrEarlierZ  = "earlierZ"
	attrEarlierGz = "earlierGz"
)

// earlierEvent is one event of attrEarlierGz.
type earlierEvent struct {
	Seq    int64             `json:"seq"`
	Type   string            `json:"type"`
	At     time.Time         `json:"at"`
	Detail map[string]string `json:"detail,omitempty"`
}

// gzipped compresses b with a pooled writer.
func gzipped(b []byte) ([]byte, error) { return compressWith(&gzipWriters, b) }

// gunzipped reverses gzipped.
func gunzipped(b []byte) ([]byte, error) {
	zr, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		return nil, err
	}
	return io.ReadAll(zr)
}

// eventItems assigns sequence numbers to j's pending events and renders
// them as the write's one event item: the last event's header at the top
// (its key, EVT#<seq>, and what the feed index projects), the earlier
// ones in attrEarlierZ, the job as it is after the write once, compressed
// (gzipped, in jobGz and earlierGz, when s writes job attributes).
// Written once and never changed, it reaches the event bus through the
// table's stream (internal/relay) and expires with the job. One item per
// write, not per event: a write of six events (a finish's phases and
// outcome) costs one item's write units, not six, inside its transaction.
func (s *Store) eventItems(j *job.Job) ([]map[string]types.AttributeValue, error) {
	if len(j.Pending) == 0 {
		return nil, nil
	}
	view, err := job.Marshal(j)
	if err != nil {
		return nil, err
	}
	ttl := s.EventTTL
	if ttl == 0 {
		ttl = EventTTLDefault
	}
	seq := j.EventSeq
	var earlier []earlierEvent
	for _, ev := range j.Pending[:len(j.Pending)-1] {
		seq++
		earlier = append(earlier, earlierEvent{Seq: seq, Type: ev.Type, At: ev.At, Detail: ev.Detail})
	}
	seq++
	last := j.Pending[len(j.Pending)-1]
	rec := EventRecord{JobID: j.ID, Owner: j.Owner, Seq: seq, Type: last.Type, At: last.At, Detail: last.Detail, Job: string(view), Tier: j.Tier, WebhookURL: j.WebhookURL}
	c := s.writeCodec()
	item, err := eventItem(rec, c)
	if err != nil {
		return nil, err
	}
	if len(earlier) > 0 {
		b, err := json.Marshal(earlier)
		if err != nil {
			return nil, err
		}
		if b, err = c.zip(b); err != nil {
			return nil, err
		}
		item[c.earlier] = &types.AttributeValueMemberB{Value: b}
	}
	item[resources.AttrPK] = str(jobPK(j.ID))
	item[resources.AttrSK] = str(eventSK(seq))
	// The write's item stands for all its events in the feed.
	setFeedKeys(item, rec, j.EventSeq+1)
	item[resources.AttrExpiresAt] = &types.AttributeValueMemberN{Value: strconv.FormatInt(last.At.Add(ttl).Unix(), 10)}
	return []map[string]types.AttributeValue{item}, nil
}

// decodeEvents reads an event item's events, oldest first: the write's
// earlier events, then the one the item is keyed by (an item written
// before writes shared one holds that one alone).
func decodeEvents(item map[string]types.AttributeValue) ([]EventRecord, error) {
	last, err := decodeEvent(item)
	if err != nil {
		return nil, err
	}
	var earlier []earlierEvent
	for _, c := range eventCodecs {
		if z, ok := item[c.earlier].(*types.AttributeValueMemberB); ok {
			b, err := c.unzip(z.Value)
			if err == nil {
				err = json.Unmarshal(b, &earlier)
			}
			if err != nil {
				return nil, fmt.Errorf("decoding the earlier events of event %d of %s: %w", last.Seq, last.JobID, err)
			}
			break
		}
	}
	out := make([]EventRecord, 0, len(earlier)+1)
	for _, e := range earlier {
		r := last
		r.Seq, r.Type, r.At, r.Detail = e.Seq, e.Type, e.At, e.Detail
		out = append(out, r)
	}
	return append(out, last), nil
}

// firstSeq is the sequence of an event item's first event.
func firstSeq(evs []EventRecord) int64 {
	if len(evs) == 0 {
		return 0
	}
	return evs[0].Seq
}

// LoggedEvents is Events as the job's log, each event with the job as it
// was right after it (job.Attempts reads them), and the number of the last
// one (after when there is none): the next page starts after it.
func (s *Store) LoggedEvents(ctx context.Context, jobID string, after int64, limit int) ([]job.LoggedEvent, int64, error) {
	recs, err := s.Events(ctx, jobID, after, limit)
	if err != nil {
		return nil, after, err
	}
	out := make([]job.LoggedEvent, len(recs))
	for i, r := range recs {
		out[i] = job.LoggedEvent{Type: r.Type, At: r.At, Job: r.Job}
		after = r.Seq
	}
	return out, after, nil
}

// Events returns a job's events after seq, oldest first (at most limit).
// An item holds a write's events and is keyed by its last one, so the
// items keyed after seq hold every event after it, and the first of them
// may hold some before it too.
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
		evs, err := decodeEvents(item)
		if err != nil {
			return nil, err
		}
		for _, r := range evs {
			if r.Seq > after && len(out) < limit {
				out = append(out, r)
			}
		}
	}
	return out, nil
}

// eventAt picks event seq out of the events of the item that holds it.
func eventAt(evs []EventRecord, seq int64) (EventRecord, bool) {
	for _, r := range evs {
		if r.Seq == seq {
			return r, true
		}
	}
	return EventRecord{}, false
}

// GetEvent returns one event of a job: one GetItem when it ends its write
// (the item is keyed by it; so are items from before writes shared one),
// else a Query for the item after it.
func (s *Store) GetEvent(ctx context.Context, jobID string, seq int64) (EventRecord, error) {
	var evs []EventRecord
	err := s.getWith(ctx, jobPK(jobID), eventSK(seq), func(item map[string]types.AttributeValue) (err error) {
		evs, err = decodeEvents(item)
		return err
	})
	if err != nil && !errors.Is(err, ErrNotFound) {
		return EventRecord{}, err
	}
	if r, ok := eventAt(evs, seq); ok {
		return r, nil
	}
	return s.eventInWrite(ctx, jobID, seq)
}

// eventInWrite finds event seq in the item of its write, keyed by a later
// event.
func (s *Store) eventInWrite(ctx context.Context, jobID string, seq int64) (EventRecord, error) {
	evs, err := s.Events(ctx, jobID, seq-1, 1)
	if err != nil {
		return EventRecord{}, err
	}
	if r, ok := eventAt(evs, seq); ok {
		return r, nil
	}
	return EventRecord{}, ErrNotFound
}

// GetEventAndJob reads event seq of job jobID, the job and the items also
// names, in one strongly consistent BatchGetItem: what a webhook delivery
// needs (the event to send, the job to append its outcome to, the
// endpoint it goes to) for one read request. The read names the item of
// seq's write when seq is the write's last event (the events that trigger
// webhooks — a job's outcome — end their writes); otherwise the event is
// found by a Query after. The event is ErrNotFound when it is gone; the
// job is nil when it is (retention may remove a job between its event and
// the delivery). also's items that exist are returned by key.
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
			evs, err := decodeEvents(item)
			ev, found = eventAt(evs, seq)
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
		// Not its write's last event: the item keyed after it holds it.
		if ev, err = s.eventInWrite(ctx, jobID, seq); err != nil {
			return EventRecord{}, nil, nil, err
		}
	}
	return ev, j, others, nil
}
