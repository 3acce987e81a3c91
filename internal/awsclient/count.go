package awsclient

import (
	"context"
	"sort"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsmiddleware "github.com/aws/aws-sdk-go-v2/aws/middleware"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/smithy-go/middleware"
)

// Counter counts the AWS requests made through the configurations it is
// attached to, by service and operation ("DynamoDB.Query"). Benchmarks turn
// the counts into cost; tests use them to prove, for example, that no Scan
// is ever issued. Retries of one call count once (it counts operations).
type Counter struct {
	mu     sync.Mutex
	counts map[string]int
	empty  map[string]int
}

// NewCounter returns an empty Counter.
func NewCounter() *Counter { return &Counter{counts: map[string]int{}, empty: map[string]int{}} }

// Attach adds the counting middleware to cfg and returns it.
func (c *Counter) Attach(cfg aws.Config) aws.Config {
	cfg.APIOptions = append(append([]func(*middleware.Stack) error{}, cfg.APIOptions...), c.add)
	return cfg
}

func (c *Counter) add(stack *middleware.Stack) error {
	return stack.Initialize.Add(middleware.InitializeMiddlewareFunc("conveyorCount",
		func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
			svc, op := awsmiddleware.GetServiceID(ctx), awsmiddleware.GetOperationName(ctx)
			if svc == "" || op == "" {
				// Presigning runs the stack without sending anything.
				return next.HandleInitialize(ctx, in)
			}
			key := svc + "." + op
			c.mu.Lock()
			c.counts[key]++
			c.mu.Unlock()
			out, md, err := next.HandleInitialize(ctx, in)
			if r, ok := out.Result.(*sqs.ReceiveMessageOutput); ok && err == nil && len(r.Messages) == 0 {
				c.mu.Lock()
				c.empty[key]++
				c.mu.Unlock()
			}
			return out, md, err
		}), middleware.Before)
}

// Snapshot returns a copy of the counts.
func (c *Counter) Snapshot() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[string]int, len(c.counts))
	for k, v := range c.counts {
		out[k] = v
	}
	return out
}

// Empty returns, by "Service.Operation", how many of the counted requests
// found nothing to work on: receives that returned no message (a queue's
// idle long polls, whose cost is the time they span, not the work done).
func (c *Counter) Empty() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[string]int, len(c.empty))
	for k, v := range c.empty {
		out[k] = v
	}
	return out
}

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
