package awsclient

import (
	"context"
	"maps"
	"reflect"
	"sort"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsmiddleware "github.com/aws/aws-sdk-go-v2/aws/middleware"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	dynamodbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/smithy-go/middleware"
)

// Counter counts the AWS requests made through the configurations it is
// attached to, by service and operation ("DynamoDB.Query"). Benchmarks turn
// the counts into cost; tests use them to prove, for example, that no Scan
// is ever issued. Retries of one call count once (it counts operations).
//
// It also asks DynamoDB what each call consumed (ReturnConsumedCapacity
// INDEXES on the caller's behalf) and sums the capacity units: "read" and
// "write" in all, and "write table" and "write <index>" for where the
// write units went. DynamoDB bills on-demand tables by these units, not by
// requests: one write of an item costs a unit per KB in the table and again
// in every index it enters or leaves; in a transaction, the table's units
// twice (TxPricer).
type Counter struct {
	mu     sync.Mutex
	counts map[string]int
	empty  map[string]int
	units  map[string]float64
	items  map[string]int
	// label, when set, names who made a request (Labeled).
	label   func(context.Context) string
	labeled map[string]int
	// pricer, when set, prices transactions (PriceTransactions).
	pricer *TxPricer
}

// PriceTransactions makes the counter price every TransactWriteItems by
// DynamoDB's rules through p instead of taking the units the emulator
// reports for it (see TxPricer: DynamoDB Local counts a transaction's
// items of equal size once). Call it before any request is counted.
func (c *Counter) PriceTransactions(p *TxPricer) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.pricer = p
}

// NewCounter returns an empty Counter.
func NewCounter() *Counter {
	return &Counter{counts: map[string]int{}, empty: map[string]int{}, units: map[string]float64{}, items: map[string]int{}, labeled: map[string]int{}}
}

// Attach adds the counting middleware to cfg and returns it.
func (c *Counter) Attach(cfg aws.Config) aws.Config {
	cfg.APIOptions = append(append([]func(*middleware.Stack) error{}, cfg.APIOptions...), c.add)
	return cfg
}

type uncountedKey struct{}

// Uncounted returns ctx marked so that no Counter counts the requests made
// with it: those a local stand-in makes for what AWS does without a
// request of ours (a disabled event source mapping stops polling; the
// local poller reads the tier flags to know).
func Uncounted(ctx context.Context) context.Context {
	return context.WithValue(ctx, uncountedKey{}, true)
}

func (c *Counter) add(stack *middleware.Stack) error {
	return stack.Initialize.Add(middleware.InitializeMiddlewareFunc("conveyorCount",
		func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
			svc, op := awsmiddleware.GetServiceID(ctx), awsmiddleware.GetOperationName(ctx)
			if svc == "" || op == "" || ctx.Value(uncountedKey{}) != nil {
				// Presigning runs the stack without sending anything; a
				// local stand-in's requests are not the product's.
				return next.HandleInitialize(ctx, in)
			}
			key := svc + "." + op
			c.mu.Lock()
			c.counts[key]++
			if c.label != nil {
				c.labeled[c.label(ctx)+" "+key]++
			}
			if p, ok := in.Parameters.(*eventbridge.PutEventsInput); ok {
				c.items[key] += len(p.Entries)
				for _, e := range p.Entries {
					// EventBridge's size of an entry: 14 bytes for the
					// time, and the UTF-8 bytes of its strings.
					n := 14 + len(aws.ToString(e.Source)) + len(aws.ToString(e.DetailType)) + len(aws.ToString(e.Detail))
					c.items[key+" bytes"] += n
					c.items[key+" largest entry bytes"] = max(c.items[key+" largest entry bytes"], n)
				}
			}
			pricer := c.pricer
			c.mu.Unlock()
			var priced func() map[string]float64
			if tx, ok := in.Parameters.(*dynamodb.TransactWriteItemsInput); ok && pricer != nil {
				priced = pricer.begin(ctx, tx)
			}
			in.Parameters = withCapacity(in.Parameters)
			out, md, err := next.HandleInitialize(ctx, in)
			if r, ok := out.Result.(*sqs.ReceiveMessageOutput); ok && err == nil && len(r.Messages) == 0 {
				c.mu.Lock()
				c.empty[key]++
				c.mu.Unlock()
			}
			var units map[string]float64
			if priced != nil && err == nil {
				units = priced()
			}
			switch used := consumed(out.Result); {
			case units != nil:
				c.addPriced(units)
			case len(used) > 0:
				c.addUnits(op, used)
			}
			return out, md, err
		}), middleware.Before)
}

func (c *Counter) addUnits(op string, used []dynamodbtypes.ConsumedCapacity) {
	kind := "write"
	switch op {
	case "GetItem", "BatchGetItem", "Query", "Scan", "TransactGetItems":
		kind = "read"
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, u := range used {
		c.units[kind] += aws.ToFloat64(u.CapacityUnits)
		if kind != "write" {
			continue
		}
		if u.Table != nil {
			c.units["write table"] += aws.ToFloat64(u.Table.CapacityUnits)
		}
		for name, ix := range u.GlobalSecondaryIndexes {
			c.units["write "+name] += aws.ToFloat64(ix.CapacityUnits)
		}
	}
}

// addPriced adds a transaction's units as a TxPricer priced them.
func (c *Counter) addPriced(units map[string]float64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for k, v := range units {
		c.units[k] += v
	}
}

// Units returns a copy of the capacity units summed so far.
func (c *Counter) Units() map[string]float64 { return copied(&c.mu, c.units) }

// copied returns a copy of m, read under mu, never nil (callers write into
// it; maps.Clone would return nil for an empty map).
func copied[V any](mu *sync.Mutex, m map[string]V) map[string]V {
	mu.Lock()
	defer mu.Unlock()
	out := make(map[string]V, len(m))
	maps.Copy(out, m)
	return out
}

// withCapacity returns a DynamoDB call's input asking for the capacity it
// consumes, index by index: a copy of any input with a
// ReturnConsumedCapacity field (the caller's input is not changed); other
// inputs as they are.
func withCapacity(p any) any {
	v := reflect.ValueOf(p)
	if v.Kind() != reflect.Pointer || v.IsNil() || v.Elem().Kind() != reflect.Struct {
		return p
	}
	f := v.Elem().FieldByName("ReturnConsumedCapacity")
	want := reflect.ValueOf(dynamodbtypes.ReturnConsumedCapacityIndexes)
	if !f.IsValid() || f.Type() != want.Type() {
		return p
	}
	c := reflect.New(v.Elem().Type())
	c.Elem().Set(v.Elem())
	c.Elem().FieldByName("ReturnConsumedCapacity").Set(want)
	return c.Interface()
}

// consumed is what a DynamoDB call's output says it consumed: its
// ConsumedCapacity field, one or a list.
func consumed(r any) []dynamodbtypes.ConsumedCapacity {
	v := reflect.ValueOf(r)
	if v.Kind() != reflect.Pointer || v.IsNil() || v.Elem().Kind() != reflect.Struct {
		return nil
	}
	switch c := v.Elem().FieldByName("ConsumedCapacity"); {
	case !c.IsValid() || !c.CanInterface():
	case c.Type() == reflect.TypeOf([]dynamodbtypes.ConsumedCapacity(nil)):
		return c.Interface().([]dynamodbtypes.ConsumedCapacity)
	case c.Type() == reflect.TypeOf((*dynamodbtypes.ConsumedCapacity)(nil)) && !c.IsNil():
		return []dynamodbtypes.ConsumedCapacity{*c.Interface().(*dynamodbtypes.ConsumedCapacity)}
	}
	return nil
}

// Items returns, by "Service.Operation", how many billed items the counted
// requests carried where a service bills items rather than requests: the
// entries of EventBridge.PutEvents (EventBridge bills each event put), and
// under "EventBridge.PutEvents bytes" their size (what the bus's archive
// bills), and under "EventBridge.PutEvents largest entry bytes" the size
// of the largest entry sent.
func (c *Counter) Items() map[string]int { return copied(&c.mu, c.items) }

// LabelWith makes the counter also count each request under the label
// label gives its context (Labeled): a local runtime names the function
// whose invocation made it. Call it before any request is counted.
func (c *Counter) LabelWith(label func(context.Context) string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.label = label
}

// Labeled returns the counts by "<label> Service.Operation" (LabelWith).
func (c *Counter) Labeled() map[string]int { return copied(&c.mu, c.labeled) }

// Snapshot returns a copy of the counts.
func (c *Counter) Snapshot() map[string]int { return copied(&c.mu, c.counts) }

// Empty returns, by "Service.Operation", how many of the counted requests
// found nothing to work on: receives that returned no message (a queue's
// idle long polls, whose cost is the time they span, not the work done).
func (c *Counter) Empty() map[string]int { return copied(&c.mu, c.empty) }

// Get returns the count of one "Service.Operation".
func (c *Counter) Get(key string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.counts[key]
}

// Total is the number of requests counted.
func (c *Counter) Total() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, v := range c.counts {
		n += v
	}
	return n
}

// Reset forgets every count.
func (c *Counter) Reset() {
	c.mu.Lock()
	c.counts = map[string]int{}
	c.empty = map[string]int{}
	c.units = map[string]float64{}
	c.items = map[string]int{}
	c.labeled = map[string]int{}
	c.mu.Unlock()
}

// Keys returns the counted "Service.Operation" names, sorted.
func (c *Counter) Keys() []string {
	s := c.Snapshot()
	keys := make([]string, 0, len(s))
	for k := range s {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
