package bus_test

import (
	"context"
	"testing"
	"time"

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
