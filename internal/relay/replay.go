package relay

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/conveyor/conveyor/internal/job"
	"github.com/conveyor/conveyor/internal/resources"
)

// FailureRecord is what Lambda's DynamoDB Streams event source mapping
// sends its on-failure destination about a batch it gave up on: where the
// batch lies in the stream, not its records.
type FailureRecord struct {
	RequestContext struct {
		RequestID              string `json:"requestId"`
		FunctionARN            string `json:"functionArn"`
		Condition              string `json:"condition"`
		ApproximateInvokeCount int    `json:"approximateInvokeCount"`
	} `json:"requestContext"`
	ResponseContext struct {
		StatusCode      int    `json:"statusCode"`
		ExecutedVersion string `json:"executedVersion"`
		FunctionError   string `json:"functionError,omitempty"`
	} `json:"responseContext"`
	Version   string    `json:"version"`
	Timestamp string    `json:"timestamp"`
	BatchInfo BatchInfo `json:"DDBStreamBatchInfo"`
}

// BatchInfo locates a failed batch in the stream: its shard, the sequence
// numbers of its first and last records, and when they arrived.
type BatchInfo struct {
	ShardID                         string `json:"shardId"`
	StartSequenceNumber             string `json:"startSequenceNumber"`
	EndSequenceNumber               string `json:"endSequenceNumber"`
	ApproximateArrivalOfFirstRecord string `json:"approximateArrivalOfFirstRecord"`
	ApproximateArrivalOfLastRecord  string `json:"approximateArrivalOfLastRecord"`
	BatchSize                       int    `json:"batchSize"`
	StreamARN                       string `json:"streamArn"`
}

// Window is when the batch's first and last records arrived in the stream.
func (b BatchInfo) Window() (from, to time.Time, err error) {
	if from, err = time.Parse(time.RFC3339Nano, b.ApproximateArrivalOfFirstRecord); err != nil {
		return from, to, fmt.Errorf("approximateArrivalOfFirstRecord: %w", err)
	}
	if to, err = time.Parse(time.RFC3339Nano, b.ApproximateArrivalOfLastRecord); err != nil {
		return from, to, fmt.Errorf("approximateArrivalOfLastRecord: %w", err)
	}
	return from, to, nil
}

// FailureMessage is one message of the failure queue as received.
type FailureMessage struct {
	// ID is the queue's message id; Receipt deletes or releases it.
	ID, Receipt string
	// Body is the message: a FailureRecord, as JSON.
	Body string
}

// FailureQueue is the relay mapping's on-failure queue
// (internal/aws/relayfailures on SQS).
type FailureQueue interface {
	// Receive returns up to max messages, each hidden from other readers
	// for as long as a replay may take with it; none: the queue is empty.
	Receive(ctx context.Context, max int) ([]FailureMessage, error)
	// Delete removes a message for good.
	Delete(ctx context.Context, receipt string) error
	// Release makes a message visible again at once.
	Release(ctx context.Context, receipt string) error
}

// ErrTrimmed: the stream no longer holds (all of) a batch's records:
// they are older than the stream's 24 hours, or the stream or its shard
// is gone (a table replaced by a restore has a stream of its own).
var ErrTrimmed = errors.New("the stream no longer holds the batch's records")

// StreamReader reads a batch's records again from the table's stream
// (internal/aws/relayfailures on DynamoDB Streams).
type StreamReader interface {
	// Read returns the stream records from the batch's first sequence
	// number to its last, as Lambda hands them to a function, or an error
	// wrapping ErrTrimmed.
	Read(ctx context.Context, b BatchInfo) ([]events.DynamoDBEventRecord, error)
}

// Feed reads the events of every job by time (the store's Feed: the feed
// index, from after, a job.SortTime or the Key of the last event read), for a batch the stream no longer holds.
type Feed interface {
	Feed(ctx context.Context, shard int, after string, limit int) ([]job.FeedEvent, error)
}

// Replay defaults.
const (
	// ReplayWindowSlackDefault widens a trimmed batch's arrival window on
	// each side when its events are read from the table: an event's time
	// is taken before its write, and the stream's arrival times are
	// approximate.
	ReplayWindowSlackDefault = time.Minute
	// ReplayReceiveDefault is how many failure messages one receive asks
	// for (SQS's most).
	ReplayReceiveDefault = 10
	// replayFeedPage is how many feed entries one feed read takes.
	replayFeedPage = 100
)

// ReplayConfig configures a Replayer.
type ReplayConfig struct {
	// Queue holds the failure records; required.
	Queue FailureQueue
	// Stream re-reads a batch's records; required.
	Stream StreamReader
	// Feed re-derives a trimmed batch's events from the table; required.
	Feed Feed
	// Relay relays them again, as the relay function does (configured as
	// it is: its bus, source, bus events and webhooks); required.
	Relay *Relay
	// DryRun reads and counts, relays nothing and deletes nothing; every
	// message is released at the end.
	DryRun bool
	// WindowSlack widens a trimmed batch's window (default
	// ReplayWindowSlackDefault).
	WindowSlack time.Duration
	// Progress, when set, is told about each failure record once it is
	// settled (one line on the CLI's stderr).
	Progress func(ReplayedFailure)
	// Logger defaults to slog.Default().
	Logger *slog.Logger
}

// ReplayedFailure is what became of one failure record.
type ReplayedFailure struct {
	// MessageID is the failure queue's message id.
	MessageID string
	// Batch is where the failed batch was in the stream (zero when the
	// message is not a failure record).
	Batch BatchInfo
	// Source is where the events came from: "stream", "table" (the
	// stream no longer held them), or "" when none could be read.
	Source string
	// Records is how many stream records were read again (0 from the
	// table); Events how many events they held.
	Records, Events int
	// Relayed is how many events went to the bus with their webhooks
	// queued (Put of them on the bus itself); Webhooks the deliveries
	// queued.
	Relayed, Put, Webhooks int
	// Deleted: every event was relayed and the message is gone. Otherwise
	// it stays on the queue for the next replay, and Err says why.
	Deleted bool
	Err     error
}

// ReplayResult counts what a replay did.
type ReplayResult struct {
	// Messages is how many failure messages were read; Deleted how many
	// were relayed whole and deleted; Kept how many stay on the queue.
	Messages, Deleted, Kept int
	// FromStream and FromTable count the messages whose events were read
	// from the stream and from the table.
	FromStream, FromTable int
	// Events, Relayed, Put and Webhooks add up the messages' counts.
	Events, Relayed, Put, Webhooks int
}

// Replayer relays again the batches the relay's stream mapping gave up
// on, from the records on its failure queue.
type Replayer struct{ cfg ReplayConfig }

// replayRun is what one Run has relayed (or, in a dry run, counted)
// already: the batches of a mapping with several lanes per shard
// (ParallelizationFactor) span each other's sequence ranges, so one
// stream record may lie in several failed batches; it is relayed once.
type replayRun struct {
	records map[string]bool // stream sequence numbers
	events  map[string]bool // "jobId:seq"
}

func eventKey(jobID string, seq int64) string { return fmt.Sprintf("%s:%d", jobID, seq) }

// NewReplayer validates cfg and returns a Replayer.
func NewReplayer(cfg ReplayConfig) (*Replayer, error) {
	var errs []error
	if cfg.Queue == nil {
		errs = append(errs, errors.New("replay: Queue is required"))
	}
	if cfg.Stream == nil {
		errs = append(errs, errors.New("replay: Stream is required"))
	}
	if cfg.Feed == nil {
		errs = append(errs, errors.New("replay: Feed is required"))
	}
	if cfg.Relay == nil {
		errs = append(errs, errors.New("replay: Relay is required"))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	if cfg.WindowSlack == 0 {
		cfg.WindowSlack = ReplayWindowSlackDefault
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Replayer{cfg: cfg}, nil
}

// Run replays every failure record on the queue once: it re-reads the
// batch's records from the stream (or, once the stream has trimmed them,
// the events of the batch's arrival window from the table), relays them
// as the relay function does, and deletes the record only once every
// event was relayed. A record that fails stays on the queue (released at
// the end of the run) for the next replay.
//
// A stream record in several failed batches (the lanes of a shard span
// each other's sequence ranges) is relayed once per run. Relaying again
// is at least once, as the relay is: an event of the
// batch that had reached the bus before the batch failed goes again
// (consumers dedupe by its id), and a webhook delivery's deduplication id
// drops a copy queued within SQS's five minutes. Read from the table, the
// window also holds events that were relayed in other batches.
func (r *Replayer) Run(ctx context.Context) (ReplayResult, error) {
	var res ReplayResult
	var release []string
	run := &replayRun{records: map[string]bool{}, events: map[string]bool{}}
	defer func() {
		// Every message kept, or looked at in a dry run, is visible to
		// the next replay at once (context.WithoutCancel: even after an
		// interrupt).
		for _, receipt := range release {
			if err := r.cfg.Queue.Release(context.WithoutCancel(ctx), receipt); err != nil {
				r.cfg.Logger.WarnContext(ctx, "releasing a failure message failed; it shows again after its visibility timeout", "error", err)
			}
		}
	}()
	for ctx.Err() == nil {
		msgs, err := r.cfg.Queue.Receive(ctx, ReplayReceiveDefault)
		if err != nil {
			return res, fmt.Errorf("reading the relay's failure queue: %w", err)
		}
		if len(msgs) == 0 {
			return res, nil
		}
		for _, m := range msgs {
			f := r.replayOne(ctx, m, run)
			res.Messages++
			res.Events += f.Events
			res.Relayed += f.Relayed
			res.Put += f.Put
			res.Webhooks += f.Webhooks
			switch f.Source {
			case "stream":
				res.FromStream++
			case "table":
				res.FromTable++
			}
			if f.Deleted {
				res.Deleted++
			} else {
				res.Kept++
				release = append(release, m.Receipt)
			}
			if r.cfg.Progress != nil {
				r.cfg.Progress(f)
			}
		}
	}
	return res, ctx.Err()
}

// replayOne replays the batch one message describes.
func (r *Replayer) replayOne(ctx context.Context, m FailureMessage, run *replayRun) ReplayedFailure {
	f := ReplayedFailure{MessageID: m.ID}
	var rec FailureRecord
	if err := json.Unmarshal([]byte(m.Body), &rec); err != nil || rec.BatchInfo.ShardID == "" || rec.BatchInfo.StartSequenceNumber == "" {
		f.Err = fmt.Errorf("not a stream batch's failure record (no DDBStreamBatchInfo): %v", err)
		return f
	}
	f.Batch = rec.BatchInfo
	log := r.cfg.Logger.With("message_id", m.ID, "shard", rec.BatchInfo.ShardID,
		"start", rec.BatchInfo.StartSequenceNumber, "end", rec.BatchInfo.EndSequenceNumber)
	records, err := r.cfg.Stream.Read(ctx, rec.BatchInfo)
	switch {
	case err == nil:
		f.Source, f.Records = "stream", len(records)
		records = slices.DeleteFunc(records, func(sr events.DynamoDBEventRecord) bool { return run.records[sr.Change.SequenceNumber] })
		f.Events = countEvents(records, r.cfg.Relay.cfg.Decode)
		if r.cfg.DryRun {
			run.markRecords(records, nil, r.cfg.Relay.cfg.Decode)
			return f
		}
		resp, res := r.cfg.Relay.Handle(ctx, events.DynamoDBEvent{Records: records})
		f.Relayed, f.Put, f.Webhooks = res.Relayed, res.Put, res.Webhooks
		run.markRecords(records, resp.BatchItemFailures, r.cfg.Relay.cfg.Decode)
		if n := len(resp.BatchItemFailures); n > 0 {
			f.Err = fmt.Errorf("%d of the batch's stream records were not relayed (the relay's log says why)", n)
		}
	case errors.Is(err, ErrTrimmed):
		log.InfoContext(ctx, "the stream no longer holds the batch; reading its window's events from the table", "error", err)
		evs, ferr := r.windowEvents(ctx, rec.BatchInfo)
		if ferr != nil {
			f.Err = fmt.Errorf("%v; reading the window's events from the table: %w", err, ferr)
			return f
		}
		evs = slices.DeleteFunc(evs, func(ev job.EventRecord) bool { return run.events[eventKey(ev.JobID, ev.Seq)] })
		f.Source, f.Events = "table", len(evs)
		if r.cfg.DryRun {
			run.markEvents(evs)
			return f
		}
		res, failed := r.cfg.Relay.RelayEvents(ctx, evs)
		f.Relayed, f.Put, f.Webhooks = res.Relayed, res.Put, res.Webhooks
		if failed > 0 {
			f.Err = fmt.Errorf("%d of the window's events were not relayed (the relay's log says why)", failed)
		} else {
			run.markEvents(evs)
		}
	default:
		f.Err = fmt.Errorf("reading the batch from the stream: %w", err)
		return f
	}
	if f.Err != nil {
		log.WarnContext(ctx, "a failed batch was not relayed whole; its record stays on the queue", "error", f.Err)
		return f
	}
	if err := r.cfg.Queue.Delete(ctx, m.Receipt); err != nil {
		f.Err = fmt.Errorf("relayed, but deleting the failure message failed (a next replay relays it again): %w", err)
		return f
	}
	f.Deleted = true
	return f
}

// markRecords notes records as relayed, but for the failed ones (and,
// as the relay reports them, the later ones of their jobs).
func (run *replayRun) markRecords(records []events.DynamoDBEventRecord, failed []events.DynamoDBBatchItemFailure, decode Decoder) {
	bad := map[string]bool{}
	for _, f := range failed {
		bad[f.ItemIdentifier] = true
	}
	for _, sr := range records {
		seq := sr.Change.SequenceNumber
		if bad[seq] {
			continue
		}
		run.records[seq] = true
		if sr.EventName == string(events.DynamoDBOperationTypeInsert) && IsEventItem(sr.Change.Keys) {
			if evs, err := decode(sr.Change.NewImage); err == nil {
				run.markEvents(evs)
			}
		}
	}
}

// markEvents notes events as relayed.
func (run *replayRun) markEvents(evs []job.EventRecord) {
	for _, ev := range evs {
		run.events[eventKey(ev.JobID, ev.Seq)] = true
	}
}

// countEvents is how many events the event items among records hold.
func countEvents(records []events.DynamoDBEventRecord, decode Decoder) int {
	n := 0
	for _, sr := range records {
		if sr.EventName != string(events.DynamoDBOperationTypeInsert) || !IsEventItem(sr.Change.Keys) {
			continue
		}
		evs, err := decode(sr.Change.NewImage)
		if err != nil {
			n++ // the record counts; the relay will say why it fails
			continue
		}
		n += len(evs)
	}
	return n
}

// windowEvents reads from the table's feed index every event of the
// batch's arrival window (widened by the slack), each once, each job's
// in order.
func (r *Replayer) windowEvents(ctx context.Context, b BatchInfo) ([]job.EventRecord, error) {
	from, to, err := b.Window()
	if err != nil {
		return nil, err
	}
	from, to = from.Add(-r.cfg.WindowSlack), to.Add(r.cfg.WindowSlack)
	type key struct {
		job string
		seq int64
	}
	seen := map[key]bool{}
	var out []job.EventRecord
	for shard := range resources.FeedShards {
		after := job.SortTime(from)
	pages:
		for {
			page, err := r.cfg.Feed.Feed(ctx, shard, after, replayFeedPage)
			if err != nil {
				return nil, err
			}
			if len(page) == 0 {
				break
			}
			for _, ev := range page {
				if ev.At.After(to) {
					break pages
				}
				if k := (key{ev.JobID, ev.Seq}); !seen[k] && !ev.At.Before(from) {
					seen[k] = true
					out = append(out, ev.EventRecord)
				}
			}
			after = page[len(page)-1].Key
		}
	}
	slices.SortStableFunc(out, func(a, b job.EventRecord) int {
		return cmp.Or(cmp.Compare(a.JobID, b.JobID), cmp.Compare(a.Seq, b.Seq))
	})
	return out, nil
}

// RelayEvents relays events read from the table rather than from a stream
// batch, each job's in order, as Handle relays a batch's; it returns what
// it did and how many events were not relayed.
func (r *Relay) RelayEvents(ctx context.Context, evs []job.EventRecord) (Result, int) {
	var res Result
	recs := make([]*record, 0, len(evs))
	for _, ev := range evs {
		recs = append(recs, &record{seq: eventKey(ev.JobID, ev.Seq), key: ev.JobID, ev: ev})
	}
	r.prefetch(ctx, recs)
	relayed := r.relayInOrder(ctx, recs, &res)
	failed := len(recs) - len(relayed)
	res.Failed = failed
	return res, failed
}
