package emulator

import (
	"context"
	"errors"
	"io"
	"sync"
	"time"

	"github.com/conveyor/conveyor/internal/aws/awsclient"
)

// Emulators is the offline AWS: moto for every service but DynamoDB, and
// DynamoDB Local (or dynoxide, DynamoDBOptions.Engine) for DynamoDB.
type Emulators struct {
	// Moto serves S3, SQS, KMS, EventBridge, Secrets Manager and the rest.
	Moto *Process
	// DynamoDB is DynamoDB Local or dynoxide.
	DynamoDB *Process
}

// AllOptions configures StartAll. Every field is optional.
type AllOptions struct {
	// Moto configures moto.
	Moto Options
	// DynamoDB configures DynamoDB Local.
	DynamoDB DynamoDBOptions
}

// LogTo returns AllOptions that send each emulator's output to its writer
// (nil discards it).
func LogTo(moto, dynamoDB io.Writer) AllOptions {
	return AllOptions{Moto: Options{Log: moto}, DynamoDB: DynamoDBOptions{Log: dynamoDB}}
}

// StartAll starts moto and DynamoDB Local at once and waits for both; if
// either fails, neither is left running.
func StartAll(ctx context.Context, opts AllOptions) (*Emulators, error) {
	var e Emulators
	var motoErr, ddbErr error
	var wg sync.WaitGroup
	wg.Go(func() { e.Moto, motoErr = Start(ctx, opts.Moto) })
	wg.Go(func() { e.DynamoDB, ddbErr = StartDynamoDB(ctx, opts.DynamoDB) })
	wg.Wait()
	if err := errors.Join(motoErr, ddbErr); err != nil {
		_ = e.Stop()
		return nil, err
	}
	return &e, nil
}

// Endpoints is where the SDK reaches each emulator (AWS_ENDPOINT_URL and
// AWS_ENDPOINT_URL_DYNAMODB).
func (e *Emulators) Endpoints() awsclient.Endpoints {
	return awsclient.Endpoints{Default: e.Moto.Endpoint, DynamoDB: e.DynamoDB.Endpoint}
}

// Pause freezes both emulators for d at once (an AWS outage).
func (e *Emulators) Pause(d time.Duration) {
	thaw := e.Freeze()
	time.Sleep(d)
	thaw()
}

// Freeze stops both emulators and returns once they are stopped: every
// request hangs until thaw is called. A test observes the outage between
// the two instead of racing a timed Pause.
func (e *Emulators) Freeze() (thaw func()) {
	if e == nil {
		return func() {}
	}
	e.Moto.freeze()
	e.DynamoDB.freeze()
	return func() {
		e.DynamoDB.thaw()
		e.Moto.thaw()
	}
}

// Stop ends both emulators.
func (e *Emulators) Stop() error {
	if e == nil {
		return nil
	}
	var wg sync.WaitGroup
	wg.Go(func() { _ = e.Moto.Stop() })
	wg.Go(func() { _ = e.DynamoDB.Stop() })
	wg.Wait()
	return nil
}
