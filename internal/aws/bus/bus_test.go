package bus_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/aws/smithy-go"

	"github.com/conveyor/conveyor/internal/aws/bus"
	"github.com/conveyor/conveyor/internal/relay"
	"github.com/conveyor/conveyor/internal/resources"
	"github.com/conveyor/conveyor/localstack/awstest"
)

// TestPutAnswersEachEntry puts a request on the emulator's bus whose
// middle entry the bus refuses (its detail is not JSON): the others are
// taken, the refused one's error names why.
func TestPutAnswersEachEntry(t *testing.T) {
	t.Parallel()
	env := awstest.Provision(t)
	b := bus.New(env.Config, env.Res.Definition.EventBus)
	src, now := resources.EventSource(env.Res.Definition.Env), time.Now()
	errs, err := b.Put(context.Background(), []relay.Entry{
		{Source: src, DetailType: "job.started", Detail: `{"jobId":"job_a","seq":1}`, Time: now},
		{Source: src, DetailType: "job.progress", Detail: `{"cut short":`, Time: now},
		{Source: src, DetailType: "job.succeeded", Detail: `{"jobId":"job_a","seq":3}`, Time: now},
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(errs) != 3 || errs[0] != nil || errs[1] == nil || errs[2] != nil {
		t.Errorf("entry errors %v, want the middle entry's alone", errs)
	}
}

// TestPutToAMissingBusFails: a request the bus cannot take at all (the
// emulator refuses a missing bus's whole request) is an error alone.
func TestPutToAMissingBusFails(t *testing.T) {
	t.Parallel()
	b := bus.New(awstest.Config(t), awstest.Name(t, "no-such-bus"))
	errs, err := b.Put(context.Background(), []relay.Entry{{Source: "conveyor.local", DetailType: "job.started", Detail: `{}`, Time: time.Now()}})
	if err == nil || errs != nil {
		t.Errorf("a put to a missing bus: entry errors %v, error %v; want an error alone", errs, err)
	}
}

// TestAPutOverEventBridgesLimitIsRefused: moto takes a PutEvents of any
// size; EventBridge refuses one whose entries exceed 256 KiB, as counted
// by relay.EntrySize, with a ValidationException. The clients made for the
// emulators refuse it the same way, so the relay meets AWS's limit here.
func TestAPutOverEventBridgesLimitIsRefused(t *testing.T) {
	t.Parallel()
	env := awstest.Provision(t)
	b := bus.New(env.Config, env.Res.Definition.EventBus)
	src, now := resources.EventSource(env.Res.Definition.Env), time.Now()
	entry := func(size int) relay.Entry {
		e := relay.Entry{Source: src, DetailType: "job.started", Time: now, Detail: `{"pad":""}`}
		e.Detail = `{"pad":"` + strings.Repeat("x", size-relay.EntrySize(e)) + `"}`
		return e
	}
	if e := entry(relay.MaxPutBytes); relay.EntrySize(e) != relay.MaxPutBytes {
		t.Fatalf("the test's entry is %d bytes", relay.EntrySize(e))
	}
	if errs, err := b.Put(context.Background(), []relay.Entry{entry(relay.MaxPutBytes)}); err != nil || errs[0] != nil {
		t.Errorf("an entry of exactly 256 KiB: %v %v, want it taken", errs, err)
	}
	_, err := b.Put(context.Background(), []relay.Entry{entry(relay.MaxPutBytes/2 + 1), entry(relay.MaxPutBytes / 2)})
	var api smithy.APIError
	if !errors.As(err, &api) || api.ErrorCode() != "ValidationException" {
		t.Errorf("entries of 256 KiB and a byte: %v, want EventBridge's ValidationException", err)
	}
}
