package lambdaruntime

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"sync"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/conveyor/conveyor/internal/aws/relayfailures"
	"github.com/conveyor/conveyor/internal/relay"
)

// StreamPoller feeds a DynamoDB stream's records to a function the way
// Lambda's DynamoDB Streams event source mapping does: every shard read in
// order by its own reader, a child shard only once its parent is read to
// its end; records the filter drops never reach the function (and are
// acknowledged); batches of up to BatchSize, sent when full, when the
// batching window since their first record has passed, or at a shard's
// end. With ParallelizationFactor above 1 a shard's records are split into
// that many lanes by a hash of their partition key, each lane batching and
// invoking on its own, one batch at a time: the records of one partition
// key stay in order while different keys go in parallel, as Lambda does.
// With ReportBatchItemFailures a lane resumes at the reported record with
// the lowest sequence number (the records before it are done); an answer
// naming no record of the batch fails the whole batch. A failed invocation
// is split in two and each half retried when BisectOnError is set (splits
// spend no retry); a batch whose retries (MaxRetries) run out is described
// — shard and sequence numbers, as Lambda's on-failure record — on the
// failure queue, and the lane moves on.
//
// What Lambda adds and this does not: MaximumRecordAgeInSeconds, tumbling
// windows.
type StreamPoller struct {
	// Streams reads the stream; StreamARN names it.
	Streams   *dynamodbstreams.Client
	StreamARN string
	Region    string
	// FunctionARN names the function in failure records.
	FunctionARN string
	// BatchSize is the most records per invocation (default 100).
	BatchSize int
	// BatchingWindow is how long a partial batch may gather (default 0:
	// whatever one read returned).
	BatchingWindow time.Duration
	// ParallelizationFactor is how many batches of one shard may run at
	// once, 1–10 (default 1). Records go to a lane by a hash of their
	// PartitionKey attribute, so one key's records are never in two
	// batches at once.
	ParallelizationFactor int
	// PartitionKey names the table's partition key attribute; required
	// when ParallelizationFactor is above 1.
	PartitionKey string
	// MaxRetries bounds the retries of a failing batch (default 0: none;
	// negative: forever).
	MaxRetries int
	// BisectOnError splits a failed invocation's batch and retries the halves.
	BisectOnError bool
	// StartingPosition is TRIM_HORIZON (default) or LATEST, for the shards
	// open when the poller starts; later shards are read from their start.
	StartingPosition string
	// Filter is the mapping's filter pattern (EventBridge pattern syntax;
	// the subset Conveyor uses: nested fields, exact values, "prefix",
	// "exists"); empty passes everything.
	Filter string
	// SQS and FailureQueueURL are the on-failure destination; without them
	// an exhausted batch is only logged.
	SQS             *sqs.Client
	FailureQueueURL string
	// Function is the consumer function.
	Function Invoker
	// Timeout is the function's timeout (default 1m).
	Timeout time.Duration
	// PollInterval is the wait after an empty read (default 250ms, as
	// Lambda polls each shard four times a second).
	PollInterval time.Duration
	// RetryWait is the first wait before a retry, doubled with each (default
	// 100ms, at most 5s).
	RetryWait time.Duration
	// Logger defaults to slog.Default().
	Logger *slog.Logger

	filter any
	mu     sync.Mutex
	ended  map[string]bool
}

// Run reads the stream until ctx ends.
func (p *StreamPoller) Run(ctx context.Context) error {
	if err := p.init(); err != nil {
		return err
	}
	started := map[string]bool{}
	first := true
	var wg sync.WaitGroup
	defer wg.Wait()
	for ctx.Err() == nil {
		shards, err := p.shards(ctx)
		if err != nil {
			if ctx.Err() == nil {
				p.Logger.WarnContext(ctx, "describing the stream failed", "stream", p.StreamARN, "error", err)
			}
			sleep(ctx, time.Second)
			continue
		}
		known := map[string]bool{}
		for _, s := range shards {
			known[aws.ToString(s.ShardId)] = true
		}
		for _, s := range shards {
			id, parent := aws.ToString(s.ShardId), aws.ToString(s.ParentShardId)
			if started[id] {
				continue
			}
			// A child waits for its parent, unless the parent aged out.
			if parent != "" && known[parent] && !p.isEnded(parent) {
				continue
			}
			started[id] = true
			from := types.ShardIteratorTypeTrimHorizon
			if first && p.StartingPosition == string(types.ShardIteratorTypeLatest) && s.SequenceNumberRange != nil && s.SequenceNumberRange.EndingSequenceNumber == nil {
				from = types.ShardIteratorTypeLatest
			}
			wg.Go(func() { p.readShard(ctx, id, from) })
		}
		first = false
		sleep(ctx, time.Second)
	}
	return nil
}

func (p *StreamPoller) init() error {
	if p.BatchSize == 0 {
		p.BatchSize = 100
	}
	if p.ParallelizationFactor == 0 {
		p.ParallelizationFactor = 1
	}
	if p.ParallelizationFactor < 1 || p.ParallelizationFactor > MaxParallelizationFactor {
		return fmt.Errorf("stream poller: ParallelizationFactor %d is outside 1–%d", p.ParallelizationFactor, MaxParallelizationFactor)
	}
	if p.ParallelizationFactor > 1 && p.PartitionKey == "" {
		return errors.New("stream poller: PartitionKey is required with a ParallelizationFactor above 1")
	}
	if p.Timeout == 0 {
		p.Timeout = time.Minute
	}
	if p.PollInterval == 0 {
		p.PollInterval = 250 * time.Millisecond
	}
	if p.RetryWait == 0 {
		p.RetryWait = 100 * time.Millisecond
	}
	if p.Logger == nil {
		p.Logger = slog.Default()
	}
	p.ended = map[string]bool{}
	if p.Filter != "" {
		if err := json.Unmarshal([]byte(p.Filter), &p.filter); err != nil {
			return fmt.Errorf("stream poller: the filter is not JSON: %w", err)
		}
		if err := checkPattern(p.filter); err != nil {
			return fmt.Errorf("stream poller: filter: %w", err)
		}
	}
	return nil
}

func (p *StreamPoller) isEnded(shard string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.ended[shard]
}

// shards lists every shard of the stream.
func (p *StreamPoller) shards(ctx context.Context) ([]types.Shard, error) {
	var out []types.Shard
	in := &dynamodbstreams.DescribeStreamInput{StreamArn: aws.String(p.StreamARN)}
	for {
		d, err := p.Streams.DescribeStream(ctx, in)
		if err != nil {
			return nil, err
		}
		out = append(out, d.StreamDescription.Shards...)
		if d.StreamDescription.LastEvaluatedShardId == nil {
			return out, nil
		}
		in.ExclusiveStartShardId = d.StreamDescription.LastEvaluatedShardId
	}
}

// MaxParallelizationFactor is the most batches per shard Lambda runs at once.
const MaxParallelizationFactor = 10

// laneDepth is how many reads a lane may hold before the shard's reader
// waits for it: a lane that retries a failing batch holds the reader back
// (and so the other lanes) only once it is this far behind.
const laneDepth = 4

// readShard reads one shard to its end (or until ctx ends), handing each
// read's records to the lanes; the shard has ended once every lane has
// delivered what it was handed.
func (p *StreamPoller) readShard(ctx context.Context, shard string, from types.ShardIteratorType) {
	log := p.Logger.With("shard", shard)
	lanes := make([]chan []types.Record, p.ParallelizationFactor)
	var wg sync.WaitGroup
	for i := range lanes {
		lanes[i] = make(chan []types.Record, laneDepth)
		wg.Go(func() { p.runLane(ctx, shard, lanes[i]) })
	}
	ended := p.readRecords(ctx, shard, from, log, lanes)
	for _, l := range lanes {
		close(l)
	}
	wg.Wait()
	if ended && ctx.Err() == nil {
		p.markEnded(shard)
	}
}

// readRecords reads the shard and hands each read's records to their
// lanes, in order. It reports whether it reached the shard's end (or the
// shard is gone).
func (p *StreamPoller) readRecords(ctx context.Context, shard string, from types.ShardIteratorType, log *slog.Logger, lanes []chan []types.Record) bool {
	sr := &shardReader{p: p, shard: shard, from: from, log: log, lanes: lanes}
	if !sr.getIterator(ctx) {
		return ctx.Err() == nil
	}
	for ctx.Err() == nil {
		out, err := p.Streams.GetRecords(ctx, &dynamodbstreams.GetRecordsInput{ShardIterator: sr.iter, Limit: aws.Int32(1000)})
		var expired *types.ExpiredIteratorException
		var trimmed *types.TrimmedDataAccessException
		switch {
		case errors.As(err, &expired) || errors.As(err, &trimmed):
			// A fresh iterator after the last record read (or, when that
			// aged out of the stream, from the oldest one left).
			if trimmed != nil {
				log.WarnContext(ctx, "the iterator points at trimmed records; starting again after the last record read", "error", err)
			}
			if !sr.getIterator(ctx) {
				return ctx.Err() == nil
			}
			continue
		case err != nil:
			if ctx.Err() == nil {
				log.WarnContext(ctx, "reading the shard failed", "error", err)
				sleep(ctx, time.Second)
			}
			continue
		}
		if !sr.deliver(ctx, out.Records) {
			return false
		}
		if out.NextShardIterator == nil {
			return true
		}
		sr.iter = out.NextShardIterator
		if len(out.Records) == 0 {
			sleep(ctx, p.PollInterval)
		}
	}
	return false
}

// shardReader is one reading of a shard by readRecords: where it starts,
// its current iterator and the last record it read.
type shardReader struct {
	p     *StreamPoller
	shard string
	from  types.ShardIteratorType
	log   *slog.Logger
	lanes []chan []types.Record
	// iter is the iterator of the next read; lastRead the sequence number
	// of the last record read ("": none yet).
	iter     *string
	lastRead string
}

// getIterator gets a fresh iterator: after the last record read, or at
// the start position if none was read (from the oldest record left when
// the last one read aged out of the stream), retrying a second apart. It
// reports false if the shard is gone or ctx ends.
func (sr *shardReader) getIterator(ctx context.Context) bool {
	in := &dynamodbstreams.GetShardIteratorInput{StreamArn: aws.String(sr.p.StreamARN), ShardId: aws.String(sr.shard), ShardIteratorType: sr.from}
	if sr.lastRead != "" {
		in.ShardIteratorType, in.SequenceNumber = types.ShardIteratorTypeAfterSequenceNumber, aws.String(sr.lastRead)
	}
	for ctx.Err() == nil {
		out, err := sr.p.Streams.GetShardIterator(ctx, in)
		if err == nil {
			sr.iter = out.ShardIterator
			return true
		}
		var gone *types.ResourceNotFoundException
		var trimmed *types.TrimmedDataAccessException
		if errors.As(err, &trimmed) && in.SequenceNumber != nil {
			in.ShardIteratorType, in.SequenceNumber = types.ShardIteratorTypeTrimHorizon, nil
			continue
		}
		if errors.As(err, &gone) {
			sr.log.WarnContext(ctx, "the shard is gone", "error", err)
			return false
		}
		sr.log.WarnContext(ctx, "getting a shard iterator failed", "error", err)
		sleep(ctx, time.Second)
	}
	return false
}

// deliver records every record of a read as read and hands those the
// poller's filter matches to their lanes, one batch per lane, in order. It
// reports false if ctx ends first.
func (sr *shardReader) deliver(ctx context.Context, records []types.Record) bool {
	read := make([][]types.Record, len(sr.lanes))
	for _, r := range records {
		sr.lastRead = aws.ToString(r.Dynamodb.SequenceNumber)
		if !sr.p.matches(r) {
			continue // filtered out: acknowledged, never delivered
		}
		i := sr.p.lane(r)
		read[i] = append(read[i], r)
	}
	for i, recs := range read {
		if len(recs) == 0 {
			continue
		}
		select {
		case sr.lanes[i] <- recs:
		case <-ctx.Done():
			return false
		}
	}
	return true
}

// lane is the lane of a record: a hash of its partition key.
func (p *StreamPoller) lane(r types.Record) int {
	if p.ParallelizationFactor == 1 || r.Dynamodb == nil {
		return 0
	}
	h := fnv.New32a()
	switch k := r.Dynamodb.Keys[p.PartitionKey].(type) {
	case *types.AttributeValueMemberS:
		_, _ = h.Write([]byte(k.Value))
	case *types.AttributeValueMemberN:
		_, _ = h.Write([]byte(k.Value))
	case *types.AttributeValueMemberB:
		_, _ = h.Write(k.Value)
	}
	return int(h.Sum32() % uint32(p.ParallelizationFactor))
}

// runLane batches the records handed to one lane and delivers each batch,
// one at a time, until the lane is closed and empty (or ctx ends). A batch
// is ready when full, when the batching window since its first record has
// passed, or when the shard has ended.
func (p *StreamPoller) runLane(ctx context.Context, shard string, in <-chan []types.Record) {
	var buf []types.Record
	var firstAt time.Time
	open := true
	take := func(recs []types.Record, ok bool) {
		if !ok {
			open = false
			return
		}
		if len(buf) == 0 {
			firstAt = time.Now()
		}
		buf = append(buf, recs...)
	}
	for ctx.Err() == nil {
		if len(buf) == 0 {
			if !open {
				return
			}
			select {
			case recs, ok := <-in:
				take(recs, ok)
			case <-ctx.Done():
				return
			}
			continue
		}
		// Whatever the reader has already handed over joins the batch.
	drain:
		for open && len(buf) < p.BatchSize {
			select {
			case recs, ok := <-in:
				take(recs, ok)
			default:
				break drain
			}
		}
		if wait := p.BatchingWindow - time.Since(firstAt); open && len(buf) < p.BatchSize && wait > 0 {
			t := time.NewTimer(wait)
			select {
			case recs, ok := <-in:
				take(recs, ok)
			case <-t.C:
			case <-ctx.Done():
			}
			t.Stop()
			if time.Since(firstAt) < p.BatchingWindow && open && len(buf) < p.BatchSize {
				continue
			}
		}
		n := min(p.BatchSize, len(buf))
		buf = buf[p.deliver(ctx, shard, buf[:n], 0):]
		// What is left has waited its window already.
		firstAt = time.Time{}
	}
}

func (p *StreamPoller) markEnded(shard string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.ended[shard] = true
}

// deliver invokes the function with batch until its records are settled —
// done, or described on the failure queue — and returns how many records
// from its head are settled: fewer than len(batch) when the function
// reported a failure after some records were done (the mapping resumes at
// the failed record), or when ctx ended.
func (p *StreamPoller) deliver(ctx context.Context, shard string, batch []types.Record, attempts int) int {
	for ctx.Err() == nil {
		failedAt, err := p.invoke(ctx, batch)
		switch {
		case err == nil && failedAt == len(batch):
			return len(batch)
		case err == nil && failedAt > 0:
			// Done up to the failed record: the next batch starts at it.
			return failedAt
		case err != nil && p.BisectOnError && len(batch) > 1:
			p.Logger.WarnContext(ctx, "the function failed; bisecting the batch", "shard", shard, "records", len(batch), "error", err)
			half := len(batch) / 2
			done := p.deliver(ctx, shard, batch[:half], attempts)
			if done < half {
				return done
			}
			return half + p.deliver(ctx, shard, batch[half:], attempts)
		}
		attempts++
		if p.MaxRetries >= 0 && attempts > p.MaxRetries {
			p.discard(ctx, shard, batch, attempts, err)
			return len(batch)
		}
		if err != nil {
			p.Logger.WarnContext(ctx, "the function failed; retrying the batch", "shard", shard, "attempt", attempts, "error", err)
		}
		sleep(ctx, min(p.RetryWait<<min(attempts-1, 10), 5*time.Second))
	}
	return 0
}

// invoke calls the function with batch and returns the index of the first
// record to retry (len(batch): none), or an error when the invocation
// failed or its answer fails the whole batch.
func (p *StreamPoller) invoke(ctx context.Context, batch []types.Record) (int, error) {
	ev := events.DynamoDBEvent{Records: make([]events.DynamoDBEventRecord, 0, len(batch))}
	index := map[string]int{}
	for i, r := range batch {
		ev.Records = append(ev.Records, LambdaRecord(r, p.StreamARN, p.Region))
		index[aws.ToString(r.Dynamodb.SequenceNumber)] = i
	}
	ictx, cancel := context.WithTimeout(context.WithoutCancel(ctx), p.Timeout)
	defer cancel()
	var resp events.DynamoDBEventResponse
	if err := invokeJSON(ictx, p.Function, ev, &resp); err != nil {
		return 0, err
	}
	first := len(batch)
	for _, f := range resp.BatchItemFailures {
		i, ok := index[f.ItemIdentifier]
		if !ok {
			// Lambda fails the whole batch on an empty or unknown identifier.
			return 0, fmt.Errorf("the answer names a record not in the batch: %q", f.ItemIdentifier)
		}
		first = min(first, i)
	}
	return first, nil
}

// FailureRecord is what Lambda's stream event source mapping sends its
// on-failure destination about a batch it gave up on (relay.FailureRecord:
// what a replay reads).
type FailureRecord = relay.FailureRecord

// StreamBatchInfo locates a batch in the stream.
type StreamBatchInfo = relay.BatchInfo

// discard describes an exhausted batch on the failure queue.
func (p *StreamPoller) discard(ctx context.Context, shard string, batch []types.Record, attempts int, err error) {
	var f FailureRecord
	f.Version = "1.0"
	f.Timestamp = time.Now().UTC().Format("2006-01-02T15:04:05.000Z")
	f.RequestContext.RequestID = newRequestID()
	f.RequestContext.FunctionARN = p.FunctionARN
	f.RequestContext.Condition = "RetryAttemptsExhausted"
	f.RequestContext.ApproximateInvokeCount = attempts
	f.ResponseContext.StatusCode = 200
	f.ResponseContext.ExecutedVersion = "$LATEST"
	if err != nil {
		f.ResponseContext.FunctionError = "Unhandled"
	}
	arrival := func(r types.Record) string {
		return aws.ToTime(r.Dynamodb.ApproximateCreationDateTime).UTC().Format(time.RFC3339)
	}
	f.BatchInfo = StreamBatchInfo{ShardID: shard, StartSequenceNumber: aws.ToString(batch[0].Dynamodb.SequenceNumber),
		EndSequenceNumber: aws.ToString(batch[len(batch)-1].Dynamodb.SequenceNumber), BatchSize: len(batch), StreamARN: p.StreamARN,
		ApproximateArrivalOfFirstRecord: arrival(batch[0]), ApproximateArrivalOfLastRecord: arrival(batch[len(batch)-1])}
	body, _ := json.Marshal(f)
	p.Logger.ErrorContext(ctx, "a stream batch ran out of retries; it goes to the failure queue", "shard", shard,
		"start", f.BatchInfo.StartSequenceNumber, "end", f.BatchInfo.EndSequenceNumber, "records", len(batch), "error", err)
	if p.SQS == nil || p.FailureQueueURL == "" {
		return
	}
	for ctx.Err() == nil {
		_, serr := p.SQS.SendMessage(context.WithoutCancel(ctx), &sqs.SendMessageInput{QueueUrl: aws.String(p.FailureQueueURL), MessageBody: aws.String(string(body))})
		if serr == nil {
			return
		}
		p.Logger.WarnContext(ctx, "sending to the failure queue failed", "error", serr)
		sleep(ctx, time.Second)
	}
}

// matches applies the filter to a record as Lambda does: to the record
// as the function would receive it.
func (p *StreamPoller) matches(r types.Record) bool {
	if p.filter == nil {
		return true
	}
	b, err := json.Marshal(LambdaRecord(r, p.StreamARN, p.Region))
	if err != nil {
		return false
	}
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		return false
	}
	return matchPattern(p.filter, v)
}

// LambdaRecord renders a stream record as Lambda hands it to a function
// (relayfailures.LambdaRecord: a replay re-reads records the same way).
func LambdaRecord(r types.Record, streamARN, region string) events.DynamoDBEventRecord {
	return relayfailures.LambdaRecord(r, streamARN, region)
}

// checkPattern refuses the parts of EventBridge's pattern syntax that
// matchPattern does not implement, so a filter never silently matches
// differently from Lambda's.
func checkPattern(p any) error {
	switch p := p.(type) {
	case map[string]any:
		for k, v := range p {
			if err := checkPattern(v); err != nil {
				return fmt.Errorf("%s: %w", k, err)
			}
		}
		return nil
	case []any:
		for _, v := range p {
			if op, ok := v.(map[string]any); ok {
				if len(op) != 1 {
					return fmt.Errorf("an operator object must have one key: %v", op)
				}
				for k, arg := range op {
					switch k {
					case "prefix":
						if _, ok := arg.(string); !ok {
							return fmt.Errorf("prefix takes a string")
						}
					case "exists":
						if _, ok := arg.(bool); !ok {
							return fmt.Errorf("exists takes a boolean")
						}
					default:
						return fmt.Errorf("operator %q is not supported by the local stream poller", k)
					}
				}
			}
		}
		return nil
	}
	return fmt.Errorf("a pattern's leaves must be arrays, got %T", p)
}

// matchPattern matches value against an EventBridge-style pattern: every
// field of the pattern must match; a leaf array matches when one of its
// values (or operators) does.
func matchPattern(pattern, value any) bool {
	switch p := pattern.(type) {
	case map[string]any:
		obj, _ := value.(map[string]any)
		for k, sub := range p {
			v, present := obj[k]
			if leaf, ok := sub.([]any); ok {
				if !matchLeaf(leaf, v, present) {
					return false
				}
				continue
			}
			if !present || !matchPattern(sub, v) {
				return false
			}
		}
		return true
	}
	return false
}

func matchLeaf(alts []any, v any, present bool) bool {
	for _, alt := range alts {
		if op, ok := alt.(map[string]any); ok {
			if pre, ok := op["prefix"].(string); ok {
				if s, ok := v.(string); ok && len(s) >= len(pre) && s[:len(pre)] == pre {
					return true
				}
			}
			if ex, ok := op["exists"].(bool); ok && ex == present {
				return true
			}
			continue
		}
		if present && alt == v {
			return true
		}
	}
	return false
}
