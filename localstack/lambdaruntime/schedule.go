package lambdaruntime

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/scheduler"
	schedtypes "github.com/aws/aws-sdk-go-v2/service/scheduler/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/conveyor/conveyor/internal/ids"
	"github.com/conveyor/conveyor/internal/schedule"
)

// Ticker invokes a scheduled function every Interval with the event
// EventBridge Scheduler would deliver — the local twin of `rate(...)`,
// since the emulator's schedules never fire.
type Ticker struct {
	Name     string
	Interval time.Duration
	// Detail is the event's detail JSON (default {}).
	Detail string
	// Function is the scheduled function.
	Function Invoker
	Logger   *slog.Logger
}

// Run ticks until ctx ends. Runs never overlap within one Ticker (in AWS
// they may, and the handlers are written for that).
func (t *Ticker) Run(ctx context.Context) {
	log := t.Logger
	if log == nil {
		log = slog.Default()
	}
	detail := t.Detail
	if detail == "" {
		detail = "{}"
	}
	tick := time.NewTicker(t.Interval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-tick.C:
			ev := events.EventBridgeEvent{
				Version: "0", ID: ids.New("evt"), DetailType: "Scheduled Event", Source: "aws.scheduler",
				AccountID: "123456789012", Time: now.UTC(), Region: "us-east-1",
				Resources: []string{"arn:aws:scheduler:us-east-1:123456789012:schedule/default/" + t.Name},
				Detail:    json.RawMessage(detail),
			}
			if err := invokeJSON(ctx, t.Function, ev, nil); err != nil && ctx.Err() == nil {
				log.ErrorContext(ctx, "scheduled function failed", "schedule", t.Name, "error", err)
			}
		}
	}
}

// S3Bridge delivers the bucket's ObjectCreated notifications to their
// function. The emulator cannot invoke a Lambda, so provisioning points the
// notification at a standard queue; the bridge reads the genuine S3 event
// records from it and invokes the function, deleting a message only after
// the function succeeded (S3 → Lambda is asynchronous and retried too).
type S3Bridge struct {
	SQS      *sqs.Client
	QueueURL string
	// Function is the notified function.
	Function Invoker
	Logger   *slog.Logger
}

// Run delivers until ctx ends.
func (b *S3Bridge) Run(ctx context.Context) {
	log := b.Logger
	if log == nil {
		log = slog.Default()
	}
	for ctx.Err() == nil {
		out, err := b.SQS.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{
			QueueUrl: aws.String(b.QueueURL), MaxNumberOfMessages: 10, WaitTimeSeconds: 1,
		})
		if err != nil {
			if ctx.Err() == nil {
				log.WarnContext(ctx, "reading S3 notifications failed", "error", err)
				sleep(ctx, time.Second)
			}
			continue
		}
		for _, m := range out.Messages {
			var ev events.S3Event
			if err := json.Unmarshal([]byte(aws.ToString(m.Body)), &ev); err != nil || len(ev.Records) == 0 {
				// s3:TestEvent and anything that is no event: drop it.
				_, _ = b.SQS.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: aws.String(b.QueueURL), ReceiptHandle: m.ReceiptHandle})
				continue
			}
			// The genuine event, byte for byte, as S3 would deliver it.
			if _, err := b.Function.Invoke(ctx, []byte(aws.ToString(m.Body))); err != nil {
				log.WarnContext(ctx, "S3 notification handler failed; it will be retried", "error", err)
				continue
			}
			_, _ = b.SQS.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: aws.String(b.QueueURL), ReceiptHandle: m.ReceiptHandle})
		}
	}
}

// MaxTicksPerPoll bounds the ticks one schedule fires in one poll: a
// runtime that slept (a laptop lid) does not fire a burst of old ticks.
const MaxTicksPerPoll = 10

// ScheduleFirer is the local twin of EventBridge Scheduler for the users'
// recurring schedules: the API creates them in the emulator's Scheduler,
// whose schedules never fire, and the firer reads them back (one list, one
// get per schedule), computes their ticks and invokes the target function
// with each tick's input, the scheduled time filled in as Scheduler does.
// A disabled schedule fires nothing, and its missed ticks are not fired
// when it is enabled again.
type ScheduleFirer struct {
	Client *scheduler.Client
	Group  string
	// Function is the schedules' target (the recovery function).
	Function Invoker
	// Interval between polls (Run).
	Interval time.Duration
	// Now defaults to time.Now.
	Now    func() time.Time
	Logger *slog.Logger

	mu   sync.Mutex
	seen map[string]time.Time // schedule → end of the last window looked at
}

// Run polls every Interval until ctx ends.
func (f *ScheduleFirer) Run(ctx context.Context) {
	now := f.Now
	if now == nil {
		now = time.Now
	}
	tick := time.NewTicker(f.Interval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			if _, err := f.RunOnce(ctx, now()); err != nil && ctx.Err() == nil {
				f.log().WarnContext(ctx, "firing the users' schedules failed", "error", err)
			}
		}
	}
}

func (f *ScheduleFirer) log() *slog.Logger {
	if f.Logger == nil {
		return slog.Default()
	}
	return f.Logger
}

// RunOnce fires every enabled schedule's ticks since the last poll, up to
// now, and returns how many it fired. A schedule seen for the first time
// fires its ticks since it was last modified.
func (f *ScheduleFirer) RunOnce(ctx context.Context, now time.Time) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.seen == nil {
		f.seen = map[string]time.Time{}
	}
	fired := 0
	p := scheduler.NewListSchedulesPaginator(f.Client, &scheduler.ListSchedulesInput{GroupName: aws.String(f.Group)})
	present := map[string]bool{}
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return fired, fmt.Errorf("listing schedules: %w", err)
		}
		for _, s := range page.Schedules {
			name := aws.ToString(s.Name)
			present[name] = true
			from, ok := f.seen[name]
			if !ok {
				from = aws.ToTime(s.LastModificationDate)
			}
			f.seen[name] = now
			if s.State != schedtypes.ScheduleStateEnabled {
				continue
			}
			n, err := f.fireSchedule(ctx, name, from, now)
			fired += n
			if err != nil {
				f.log().WarnContext(ctx, "a schedule's tick failed", "schedule", name, "error", err)
			}
		}
	}
	for name := range f.seen {
		if !present[name] {
			delete(f.seen, name)
		}
	}
	return fired, nil
}

func (f *ScheduleFirer) fireSchedule(ctx context.Context, name string, from, to time.Time) (int, error) {
	out, err := f.Client.GetSchedule(ctx, &scheduler.GetScheduleInput{Name: aws.String(name), GroupName: aws.String(f.Group)})
	if err != nil {
		return 0, err
	}
	loc, err := time.LoadLocation(aws.ToString(out.ScheduleExpressionTimezone))
	if err != nil {
		loc = time.UTC
	}
	start := aws.ToTime(out.StartDate)
	if start.IsZero() {
		start = aws.ToTime(out.CreationDate)
	}
	e, err := schedule.ParseAWS(aws.ToString(out.ScheduleExpression), loc, start)
	if err != nil {
		return 0, err
	}
	if out.Target == nil {
		return 0, fmt.Errorf("schedule %s has no target", name)
	}
	fired := 0
	for _, at := range e.Ticks(from, to, MaxTicksPerPoll) {
		if err := f.FireTick(ctx, aws.ToString(out.Target.Input), at); err != nil {
			return fired, err
		}
		fired++
	}
	return fired, nil
}

// FireTick invokes the target once with input, its scheduled time at (what
// Scheduler does at each tick, and again on a retry).
func (f *ScheduleFirer) FireTick(ctx context.Context, input string, at time.Time) error {
	payload := strings.ReplaceAll(input, schedule.ScheduledTime, at.UTC().Format(time.RFC3339))
	var ev events.EventBridgeEvent
	if err := json.Unmarshal([]byte(payload), &ev); err != nil {
		return fmt.Errorf("the schedule's input is not an event: %w", err)
	}
	ev.ID, ev.Time, ev.AccountID, ev.Region = ids.New("evt"), at.UTC(), "123456789012", "us-east-1"
	return invokeJSON(ctx, f.Function, ev, nil)
}
