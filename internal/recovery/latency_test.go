package recovery_test

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsmiddleware "github.com/aws/aws-sdk-go-v2/aws/middleware"
	"github.com/aws/smithy-go/middleware"
)

// The round trips the capacity model assumes for AWS requests: 8 ms, as the
// bill "at AWS latencies" prices every request (docs/performance.md); a
// transaction twice that (DynamoDB prepares, then commits); an S3 request
// 25 ms.
const (
	awsLatency         = 8 * time.Millisecond
	transactionLatency = 2 * awsLatency
	s3Latency          = 25 * time.Millisecond
)

// latencyOf is the modelled round trip of one request.
func latencyOf(service, op string) time.Duration {
	switch {
	case service == "S3":
		return s3Latency
	case op == "TransactWriteItems":
		return transactionLatency
	}
	return awsLatency
}

// latencyClock is a budget clock for the sweeps that reads the time AWS
// would have taken for the requests they made, whatever the emulators
// took: each request adds its latency divided by the requests in flight as
// it starts, itself included (Little's law: n requests in flight at once
// share their round trips — a sweep's 128 concurrent items; its queries,
// one at a time, add their whole latency). The emulators serialise much of
// what AWS runs in parallel, which this reads as more in flight, never as
// longer round trips. Recovery's Config.Clock reads it, so a budget is spent
// by requests, never by the emulators' speed or the machine's load.
type latencyClock struct {
	start    time.Time
	spent    atomic.Int64 // nanoseconds
	inflight atomic.Int64
}

func newLatencyClock(start time.Time) *latencyClock { return &latencyClock{start: start} }

// Now is the start plus the modelled time of every request so far.
func (c *latencyClock) Now() time.Time { return c.start.Add(time.Duration(c.spent.Load())) }

// Attach returns cfg with the clock fed by every request made with it.
func (c *latencyClock) Attach(cfg aws.Config) aws.Config {
	cfg.APIOptions = append(append([]func(*middleware.Stack) error{}, cfg.APIOptions...), func(stack *middleware.Stack) error {
		return stack.Initialize.Add(middleware.InitializeMiddlewareFunc("conveyorLatencyClock",
			func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
				n := c.inflight.Add(1)
				defer c.inflight.Add(-1)
				c.spent.Add(int64(latencyOf(awsmiddleware.GetServiceID(ctx), awsmiddleware.GetOperationName(ctx))) / n)
				return next.HandleInitialize(ctx, in)
			}), middleware.After)
	})
	return cfg
}
