// Package relay carries persisted job events from the table's stream to the
// environment's EventBridge bus and queues the webhook deliveries they
// trigger. Every event is written in the same transaction as the change it
// describes; the table's stream hands the new event items to the relay
// function (a DynamoDB Streams event source mapping, filtered to event
// items), so nothing sweeps, marks or deletes anything, and the relay keeps
// up with whatever the table absorbs: the stream has a shard per table
// partition and Lambda runs several batches per shard at once
// (ParallelizationFactor), each holding whole partition keys (jobs).
//
// Delivery is at least once and in order per job. An event is put only
// once every earlier event of its job is done (on the bus, its webhooks
// queued) or goes in the same PutEvents request before it: one request
// carries up to ten events, several of one job in order. A record that
// fails — refused by the bus, its webhooks not decided or not queued — is
// reported with every later record of its job (ReportBatchItemFailures),
// even those the bus accepted in the same request, so the mapping puts them
// again after it, in order. Consumers dedupe by the event's id
// ("{jobId}:{seq}"); one that needs a job's events strictly in order applies
// an event when its seq follows the last one applied and skips the others:
// after any failure the relay puts the job's events again from the failed
// one, so such a consumer never waits for an event that will not come.
package relay

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/conveyor/conveyor/internal/job"
	"github.com/conveyor/conveyor/internal/resources"
)

// Limits of one PutEvents call (EventBridge quotas).
const (
	// MaxEntriesPerPut is the most entries one PutEvents call takes.
	MaxEntriesPerPut = 10
	// MaxPutBytes is the largest total entry size of one PutEvents call
	// (256 KiB, counted as EventBridge counts it: see EntrySize).
	MaxPutBytes = 256 * 1024
)

// AnswerMargin is how long before the invocation's deadline the relay
// stops putting, so it can still answer which records to retry.
const AnswerMargin = 3 * time.Second

// Webhooks decides which webhook deliveries an event triggers, before the
// event is put. The relay queues every message it returns, in order, to the
// system tier, after the event reached the bus; an error fails the event's
// record before anything of it is put (it and the later events of its job
// are retried). A message's DeliveryID is its
// deduplication id, so a retried record queues no second copy within
// SQS's five-minute window. It is called for one job's events in order.
type Webhooks interface {
	Deliveries(ctx context.Context, ev job.EventRecord) ([]job.Message, error)
}

// Prefetcher is a Webhooks that can read what it needs for many owners at
// once: the relay hands it the owners of a batch's events that may
// trigger a webhook before it plans any (a failure only means each event
// reads for itself).
type Prefetcher interface {
	Prefetch(ctx context.Context, owners []string) error
}

// JobWebhooks is the default Webhooks: one delivery to the job's own
// webhookUrl for the event types that trigger one (job.WebhookEvents).
type JobWebhooks struct{}

// Deliveries returns at most one job.MessageWebhook message.
func (JobWebhooks) Deliveries(_ context.Context, ev job.EventRecord) ([]job.Message, error) {
	if !job.WebhookEvents[ev.Type] || ev.WebhookURL == "" {
		return nil, nil
	}
	return []job.Message{{Kind: job.MessageWebhook, JobID: ev.JobID, Owner: ev.Owner, Seq: ev.Seq, DeliveryID: DeliveryID(ev)}}, nil
}

// Sender queues work (the webhook deliveries go to the system tier).
type Sender interface {
	// SendBatch returns each message's error, nil for those sent.
	SendBatch(ctx context.Context, tier job.Tier, msgs []job.Message) []error
}

// Entry is one event as the bus takes it.
type Entry struct {
	// Source is the events' source (Config.Source).
	Source string
	// DetailType is the event's type (job.started, …).
	DetailType string
	// Detail is the event's body, JSON (Body).
	Detail string
	// Time is when the event happened.
	Time time.Time
}

// Bus puts events on the environment's event bus (internal/aws/bus, on
// EventBridge).
type Bus interface {
	// Put puts entries in one request, at most MaxEntriesPerPut of at
	// most MaxPutBytes in all. It returns, in order, nil for each entry
	// the bus took and why it refused each other; or, when the request
	// itself failed, an error alone.
	Put(ctx context.Context, entries []Entry) ([]error, error)
}

// Decoder reads the events of a stream record's new image: an event item
// as the table holds it (internal/aws/store's DecodeEvents), each event in
// order. It fails on an image that is not a whole event item.
type Decoder func(image map[string]events.DynamoDBAttributeValue) ([]job.EventRecord, error)

// Config configures a Relay.
type Config struct {
	// Decode reads the events of a stream record (the table's layout is
	// the store's: store.DecodeEvents); required.
	Decode Decoder
	// Bus receives the events (the environment's event bus); required.
	Bus Bus
	// Source is the events' EventBridge source, e.g. "conveyor.staging"
	// (the archive's event pattern matches it); required.
	Source string
	// Sender queues the webhook deliveries; required.
	Sender Sender
	// Webhooks decides the deliveries (default JobWebhooks).
	Webhooks Webhooks
	// BusEvents is which events go on the bus (default job.BusAll). An
	// event the bus does not carry is relayed without a PutEvents entry:
	// its webhooks are queued and it counts as relayed, in its job's
	// order, so the stream moves past it.
	BusEvents job.BusEvents
	// Now is the clock, for the lag measured at each put (default time.Now).
	Now func() time.Time
	// Logger defaults to slog.Default().
	Logger *slog.Logger
}

// Relay puts the events of a stream batch on the bus.
type Relay struct{ cfg Config }

// New validates cfg and returns a Relay.
func New(cfg Config) (*Relay, error) {
	var errs []error
	if cfg.Bus == nil {
		errs = append(errs, errors.New("relay: Bus is required"))
	}
	if cfg.Source == "" {
		errs = append(errs, errors.New("relay: Source is required"))
	}
	if cfg.Sender == nil {
		errs = append(errs, errors.New("relay: Sender is required"))
	}
	if cfg.Decode == nil {
		errs = append(errs, errors.New("relay: Decode is required"))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	if cfg.Webhooks == nil {
		cfg.Webhooks = JobWebhooks{}
	}
	if cfg.BusEvents == "" {
		cfg.BusEvents = job.BusAll
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Relay{cfg: cfg}, nil
}

// Body is the JSON of an event on the bus (job.EventBody: webhooks and
// the stream send the same).
type Body = job.EventBody

// DeliveryID is the id of the job-webhook delivery of an event.
func DeliveryID(ev job.EventRecord) string { return fmt.Sprintf("dlv_%s_%d", ev.JobID, ev.Seq) }

// Result counts what one batch did.
type Result struct {
	// Relayed events reached the bus with their webhooks queued.
	Relayed int
	// Ignored records were not new event items (the mapping's filter lets
	// none through; they are acknowledged).
	Ignored int
	// Failed records are reported back, to be retried.
	Failed int
	// Webhooks is how many deliveries were queued.
	Webhooks int
	// Put is how many of the relayed events went on the bus (the others'
	// types stay off it, Config.BusEvents, or were TooLarge).
	Put int
	// TooLarge is how many of the relayed events went without their bus
	// entry because it was larger than EventBridge takes (MaxPutBytes):
	// their webhooks were queued, and they stay in the table, the job's
	// event log and SSE. Events carry the job's summary, so an entry is a
	// few hundred bytes; this counts what should never happen.
	TooLarge int
	// MaxLag is the longest time from an event to its put on the bus.
	MaxLag time.Duration
}

// record is one event of a stream record of a batch, decoded: a stream
// record (an event item) holds the events of one write of its job, each a
// record here, in order.
type record struct {
	seq string // the stream record's sequence number: the batch item identifier
	key string // the job's partition: order is kept within it
	ev  job.EventRecord
	err error
	// decided is set once hooks holds the webhook deliveries the event
	// triggers; entry and size are its PutEvents entry, once rendered.
	decided bool
	hooks   []job.Message
	entry   *Entry
	size    int
	// offBus: the event's type stays off the bus (Config.BusEvents), or
	// its entry is larger than the bus takes (tooLarge); it takes no
	// entry in a PutEvents request.
	offBus, tooLarge bool
}

// Handle relays the event items of a stream batch. The response lists the
// records to retry, in stream order: every record that failed, and every
// later record of the same job, so the mapping resumes at the first of
// them and a job's events stay in order.
func (r *Relay) Handle(ctx context.Context, batch events.DynamoDBEvent) (events.DynamoDBEventResponse, Result) {
	var res Result
	var recs []*record
	for _, sr := range batch.Records {
		if sr.EventName != string(events.DynamoDBOperationTypeInsert) || !IsEventItem(sr.Change.Keys) {
			res.Ignored++
			continue
		}
		seq, key := sr.Change.SequenceNumber, sr.Change.Keys[resources.AttrPK].String()
		evs, err := r.cfg.Decode(sr.Change.NewImage)
		if err != nil {
			recs = append(recs, &record{seq: seq, key: key, err: err})
			continue
		}
		for _, ev := range evs {
			recs = append(recs, &record{seq: seq, key: key, ev: ev})
		}
	}
	r.prefetch(ctx, recs)
	// Stop putting while there is time to answer: an invocation killed at
	// its timeout would fail (and retry) the whole batch.
	work := ctx
	if dl, ok := ctx.Deadline(); ok {
		var cancel context.CancelFunc
		work, cancel = context.WithDeadline(ctx, dl.Add(-AnswerMargin))
		defer cancel()
	}
	relayed := r.relayInOrder(work, recs, &res)
	// Every record not relayed is reported: the failed ones, the later
	// events of their jobs, and whatever a cancelled context left.
	// A stream record is reported once, whichever of its events failed;
	// its retry puts the ones that went again (consumers dedupe by id).
	var resp events.DynamoDBEventResponse
	reported := map[string]bool{}
	for _, rec := range recs {
		if !relayed[rec] && !reported[rec.seq] {
			reported[rec.seq] = true
			res.Failed++
			resp.BatchItemFailures = append(resp.BatchItemFailures, events.DynamoDBBatchItemFailure{ItemIdentifier: rec.seq})
		}
	}
	return resp, res
}

// prefetch lets a Prefetcher read, for the whole batch at once, what the
// events that may trigger a webhook will need.
func (r *Relay) prefetch(ctx context.Context, recs []*record) {
	pf, ok := r.cfg.Webhooks.(Prefetcher)
	if !ok {
		return
	}
	var owners []string
	for _, rec := range recs {
		if rec.err == nil && job.WebhookEvents[rec.ev.Type] && rec.ev.Owner != "" {
			owners = append(owners, rec.ev.Owner)
		}
	}
	if len(owners) == 0 {
		return
	}
	if err := pf.Prefetch(ctx, owners); err != nil {
		r.cfg.Logger.WarnContext(ctx, "reading the batch's webhook endpoints at once failed; each event reads its own", "error", err)
	}
}

// batchState is what relayInOrder knows of a batch's records so far.
type batchState struct {
	done    map[*record]bool // relayed or failed
	relayed map[*record]bool
	broken  map[string]bool // jobs with a failed record: the rest waits for the retry
}

// relayInOrder relays recs and returns the ones relayed. Each PutEvents
// takes the earliest records, in stream order, whose job has no earlier
// record left out of the request: a job's events go in order, several in
// one request, and a refused entry fails every later entry of its job.
// When time runs out what was relayed is a prefix of each job's records,
// so the mapping's checkpoint moves on as far as it can.
func (r *Relay) relayInOrder(ctx context.Context, recs []*record, res *Result) map[*record]bool {
	st := batchState{done: map[*record]bool{}, relayed: map[*record]bool{}, broken: map[string]bool{}}
	for ctx.Err() == nil {
		round := r.nextRequest(ctx, recs, &st)
		if len(round) == 0 {
			break
		}
		// The round's events the bus carries, each with its entry's
		// answer; the others need none (and, alone, no request at all).
		var entries []Entry
		for _, rec := range round {
			if !rec.offBus {
				entries = append(entries, *rec.entry)
			}
		}
		var entryErrs []error
		if len(entries) > 0 {
			var err error
			entryErrs, err = r.cfg.Bus.Put(ctx, entries)
			if err != nil {
				for _, rec := range round {
					r.fail(ctx, &st, rec, "putting events on the bus failed", err)
				}
				break // the bus is unreachable: the rest waits for the retry
			}
		}
		putAt := r.cfg.Now()
		// The entries the bus refused, and the records whose webhooks are
		// queued: those on the bus (or off it by choice) with no refused
		// entry of their job before them in the request.
		refused := map[*record]error{}
		var queued []*record
		blocked := map[string]bool{}
		i := 0
		for _, rec := range round {
			if !rec.offBus {
				if i >= len(entryErrs) || entryErrs[i] != nil {
					why := errors.New("no answer for the entry")
					if i < len(entryErrs) {
						why = entryErrs[i]
					}
					refused[rec], blocked[rec.key] = why, true
					i++
					continue
				}
				i++
				res.MaxLag = max(res.MaxLag, putAt.Sub(rec.ev.At))
			}
			if !blocked[rec.key] {
				queued = append(queued, rec)
			}
		}
		hookErrs := r.queueWebhooks(ctx, queued, res)
		failed := map[string]bool{} // jobs with an entry of this request failed
		for _, rec := range round {
			switch {
			case failed[rec.key]:
				// An earlier entry of its job failed: on the bus or not,
				// this one goes again after it (its webhooks, if queued,
				// go again too: their deduplication ids drop the copies).
				r.fail(ctx, &st, rec, "an earlier event of the job failed in the same request", nil)
			case refused[rec] != nil:
				failed[rec.key] = true
				r.fail(ctx, &st, rec, "the bus refused an event", refused[rec])
			case hookErrs[rec] != nil:
				failed[rec.key] = true
				r.fail(ctx, &st, rec, "queuing the event's webhooks failed", hookErrs[rec])
			default:
				st.done[rec] = true
				st.relayed[rec] = true
				res.Relayed++
				if !rec.offBus {
					res.Put++
				}
				if rec.tooLarge {
					res.TooLarge++
				}
			}
		}
	}
	return st.relayed
}

// nextRequest picks the records of the next PutEvents request: in stream
// order, up to MaxEntriesPerPut entries and MaxPutBytes, each the next of
// its job or following it in the request. Events the bus does not carry
// (Config.BusEvents) go with the request without an entry, so a job's
// events stay in order whichever go on the bus, and so do events whose
// entry is larger than the bus takes (counted in Result.TooLarge: retried,
// they would fail every try and hold their lane). A record that cannot be
// read or whose webhooks cannot be decided fails here, before anything of
// it or of its job's later events is put.
func (r *Relay) nextRequest(ctx context.Context, recs []*record, st *batchState) []*record {
	var round []*record
	blocked := map[string]bool{} // a job with an earlier record left out of this request
	size, onBus := 0, 0
	for _, rec := range recs {
		if onBus == MaxEntriesPerPut {
			break
		}
		if st.done[rec] || st.broken[rec.key] || blocked[rec.key] {
			continue
		}
		if rec.err != nil {
			r.fail(ctx, st, rec, "an event item could not be decoded", rec.err)
			continue
		}
		if rec.entry == nil && !rec.offBus {
			if !r.cfg.BusEvents.Carries(rec.ev.Type) {
				rec.offBus = true
			} else {
				e, err := r.entry(rec.ev)
				if err != nil {
					r.fail(ctx, st, rec, "an event's bus entry could not be rendered", err)
					continue
				}
				rec.entry, rec.size = &e, EntrySize(e)
				if rec.size > MaxPutBytes {
					// The bus would refuse it on every try: it goes
					// without its entry (its webhooks, its order and
					// the table's copy stay), counted, never a poison.
					rec.offBus, rec.tooLarge, rec.size = true, true, 0
					r.cfg.Logger.WarnContext(ctx, "an event is larger than EventBridge takes; relayed without its bus entry",
						"job_id", rec.ev.JobID, "seq", rec.ev.Seq, "type", rec.ev.Type, "bytes", EntrySize(e), "limit", MaxPutBytes)
				}
			}
		}
		if size+rec.size > MaxPutBytes {
			blocked[rec.key] = true
			continue
		}
		if !rec.decided {
			hooks, err := r.cfg.Webhooks.Deliveries(ctx, rec.ev)
			if err != nil {
				r.fail(ctx, st, rec, "deciding the event's webhooks failed", err)
				continue
			}
			rec.hooks, rec.decided = hooks, true
		}
		round = append(round, rec)
		size += rec.size
		if !rec.offBus {
			onBus++
		}
	}
	return round
}

// fail settles rec as failed: it and every later record of its job are
// reported for retry.
func (r *Relay) fail(ctx context.Context, st *batchState, rec *record, why string, err error) {
	st.done[rec] = true
	first := !st.broken[rec.key]
	st.broken[rec.key] = true
	if first || err != nil {
		r.cfg.Logger.WarnContext(ctx, why+"; the record and the later events of its job will be retried",
			"job_id", rec.ev.JobID, "seq", rec.ev.Seq, "sequence_number", rec.seq, "error", err)
	}
}

// entry renders ev as the bus takes it: its body with the job's summary
// (job.EventRecord.BusBody).
func (r *Relay) entry(ev job.EventRecord) (Entry, error) {
	body, err := ev.BusBody()
	if err != nil {
		return Entry{}, err
	}
	b, err := job.Marshal(body)
	if err != nil {
		return Entry{}, err
	}
	return Entry{Source: r.cfg.Source, DetailType: ev.Type, Detail: string(b), Time: ev.At}, nil
}

// queueWebhooks queues the deliveries of recs' events to the system tier,
// ten per request whatever event they come from (one request where a
// send per delivery was n), and counts the queued ones in res. It returns
// the error of each record with a delivery that was not queued.
func (r *Relay) queueWebhooks(ctx context.Context, recs []*record, res *Result) map[*record]error {
	var (
		msgs  []job.Message
		owner []*record
	)
	for _, rec := range recs {
		for _, m := range rec.hooks {
			msgs, owner = append(msgs, m), append(owner, rec)
		}
	}
	if len(msgs) == 0 {
		return nil
	}
	errs := map[*record]error{}
	for i, err := range r.cfg.Sender.SendBatch(ctx, job.System, msgs) {
		if err == nil {
			res.Webhooks++
		} else if errs[owner[i]] == nil {
			errs[owner[i]] = err
		}
	}
	return errs
}

// EntrySize is the size EventBridge counts for an entry against the
// 256 KiB limit of a PutEvents call: 14 bytes for the time, plus the UTF-8
// bytes of source, detail type and detail (and of resources, which the
// relay's entries have none of).
func EntrySize(e Entry) int {
	n := 0
	if !e.Time.IsZero() {
		n += 14
	}
	return n + len(e.Source) + len(e.DetailType) + len(e.Detail)
}

// IsEventItem reports whether a stream record's keys name an event item:
// the mapping's filter (resources.EventStream) lets only these through.
func IsEventItem(keys map[string]events.DynamoDBAttributeValue) bool {
	sk, ok := keys[resources.AttrSK]
	return ok && sk.DataType() == events.DataTypeString && strings.HasPrefix(sk.String(), resources.EventSKPrefix)
}
