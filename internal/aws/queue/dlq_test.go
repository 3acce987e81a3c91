package queue_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/google/go-cmp/cmp"

	"github.com/conveyor/conveyor/internal/aws/queue"
	"github.com/conveyor/conveyor/internal/job"
	"github.com/conveyor/conveyor/localstack/awstest"
)

var quiet = slog.New(slog.DiscardHandler)

// dlqBundle is one test's low tier: its queue, its DLQ and a client.
type dlqBundle struct {
	env           awstest.Env
	dlq, queueURL string
}

func setupDLQ(t *testing.T) dlqBundle {
	t.Helper()
	env := awstest.Provision(t)
	return dlqBundle{env: env, dlq: env.Res.DLQURLs[job.Low], queueURL: env.Res.QueueURLs[job.Low]}
}

// dead puts a message on the DLQ as SQS's redrive leaves it: in its job's
// group, with its body as sent; a body that is no message goes as given.
func (b dlqBundle) dead(t *testing.T, group, body string) {
	t.Helper()
	if _, err := b.env.Clients.SQS.SendMessage(context.Background(), &sqs.SendMessageInput{QueueUrl: aws.String(b.dlq),
		MessageBody: aws.String(body), MessageGroupId: aws.String(group), MessageDeduplicationId: aws.String(group)}); err != nil {
		t.Fatal(err)
	}
}

func (b dlqBundle) deadJob(t *testing.T, id string, send int) {
	t.Helper()
	raw, _ := json.Marshal(queue.Message{Kind: queue.KindJob, JobID: id, Send: send})
	b.dead(t, id, string(raw))
}

func (b dlqBundle) depth(t *testing.T, url string) queue.Depth {
	t.Helper()
	d, err := queue.Inspector{SQS: b.env.Clients.SQS}.Depth(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// rearmer counts re-arms and hands out send numbers like the job would.
type rearmer struct {
	mu    sync.Mutex
	calls []string
}

func (r *rearmer) rearm(_ context.Context, m queue.Message) (queue.Message, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls = append(r.calls, m.JobID)
	m.Send++
	return m, nil
}

func (r *rearmer) sorted() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Sorted(slices.Values(r.calls))
}

const (
	jobA = "job_aaaaaaaaaaaaaaaaaaaaaaaaaa"
	jobB = "job_bbbbbbbbbbbbbbbbbbbbbbbbbb"
	jobC = "job_cccccccccccccccccccccccccc"
)

// TestInspectorPeeksWithoutConsuming: a peek reads the DLQ's messages with
// their send times and receive counts and leaves every one of them visible.
func TestInspectorPeeksWithoutConsuming(t *testing.T) {
	t.Parallel()
	b := setupDLQ(t)
	for _, id := range []string{jobA, jobB, jobC} {
		b.deadJob(t, id, 1)
	}
	in := queue.Inspector{SQS: b.env.Clients.SQS, Logger: quiet}
	ctx := context.Background()
	got, err := in.Peek(ctx, b.dlq, 2)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 {
		t.Fatalf("peeked %d messages, want 2", len(got))
	}
	for _, p := range got {
		m, err := queue.Decode(p.Body)
		if err != nil || p.ID == "" || p.ReceiveCount < 1 || time.Since(p.SentAt) > time.Hour {
			t.Errorf("peeked %+v (%v): want a message with its id, send time and receive count", p, err)
		}
		if m.Send != 1 {
			t.Errorf("peeked job %s's send %d, want 1", m.JobID, m.Send)
		}
	}
	if d := b.depth(t, b.dlq); d != (queue.Depth{Visible: 3}) {
		t.Errorf("after the peek the DLQ holds %+v, want all 3 visible", d)
	}
	if all, err := in.Peek(ctx, b.dlq, 10); err != nil || len(all) != 3 {
		t.Errorf("a second peek read %d messages (%v), want 3", len(all), err)
	}
}

// TestSQSMoverSelectsAndReArms: a redrive of selected jobs re-arms and
// sends back exactly those, in their groups with their new deduplication
// ids, and leaves the others (an unreadable body among them) in the DLQ,
// visible; without a selection Max bounds the move.
func TestSQSMoverSelectsAndReArms(t *testing.T) {
	t.Parallel()
	b := setupDLQ(t)
	for _, id := range []string{jobA, jobB, jobC} {
		b.deadJob(t, id, 1)
	}
	b.dead(t, "junk", "not json")
	re := &rearmer{}
	var progress []int
	m := queue.SQSMover{SQS: b.env.Clients.SQS, Logger: quiet, Progress: func(n int) { progress = append(progress, n) }}
	ctx := context.Background()
	moved, err := m.Move(ctx, queue.Redrive{Tier: job.Low, DLQURL: b.dlq, QueueURL: b.queueURL,
		JobIDs: map[string]bool{jobA: true, jobC: true}, Rearm: re.rearm})
	if err != nil {
		t.Fatal(err)
	}
	if moved != 2 || !cmp.Equal(re.sorted(), []string{jobA, jobC}) || !cmp.Equal(progress, []int{1, 2}) {
		t.Errorf("moved %d, re-armed %v, progress %v", moved, re.sorted(), progress)
	}
	var got []string
	for _, r := range receiveAll(t, b.env.Clients.SQS, b.queueURL) {
		got = append(got, r.Group+" "+r.Dedup+" "+r.Body)
	}
	slices.Sort(got)
	want := []string{
		jobA + " " + jobA + `-2 {"kind":"publish","jobId":"` + jobA + `","send":2}`,
		jobC + " " + jobC + `-2 {"kind":"publish","jobId":"` + jobC + `","send":2}`,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("sent back (-want +got)\n%s", diff)
	}
	// The unselected and the unreadable messages are back in the DLQ.
	if d := b.depth(t, b.dlq); d != (queue.Depth{Visible: 2}) {
		t.Errorf("the DLQ holds %+v, want 2 visible", d)
	}

	// Without a selection, everything readable moves; Max bounds it.
	moved, err = m.Move(ctx, queue.Redrive{Tier: job.Low, DLQURL: b.dlq, QueueURL: b.queueURL, Max: 1, Rearm: re.rearm})
	if err != nil || moved != 1 {
		t.Fatalf("moved %d: %v", moved, err)
	}
	if d := b.depth(t, b.dlq); d != (queue.Depth{Visible: 1}) {
		t.Errorf("the DLQ holds %+v, want the unreadable message alone, visible", d)
	}
}

// moveTasks is the emulator's SQS with StartMessageMoveTask, which moto
// lacks (it answers 500), recorded instead of run.
type moveTasks struct {
	*sqs.Client
	mu    sync.Mutex
	tasks []*sqs.StartMessageMoveTaskInput
}

func (m *moveTasks) StartMessageMoveTask(_ context.Context, in *sqs.StartMessageMoveTaskInput, _ ...func(*sqs.Options)) (*sqs.StartMessageMoveTaskOutput, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.tasks = append(m.tasks, in)
	return &sqs.StartMessageMoveTaskOutput{TaskHandle: aws.String("task")}, nil
}

type countingMover struct{ n int }

func (c *countingMover) Move(context.Context, queue.Redrive) (int, error) { c.n++; return 0, nil }

// TestTaskMoverReArmsThenStartsOneTask: a whole redrive re-arms every
// job in the DLQ, then starts one move task from the DLQ to the tier's
// queue and moves nothing itself; a selection goes to the fallback.
func TestTaskMoverReArmsThenStartsOneTask(t *testing.T) {
	t.Parallel()
	b := setupDLQ(t)
	b.deadJob(t, jobA, 1)
	b.deadJob(t, jobB, 3)
	re := &rearmer{}
	fallback := &countingMover{}
	client := &moveTasks{Client: b.env.Clients.SQS}
	m := queue.TaskMover{SQS: client, Fallback: fallback, Logger: quiet}
	ctx := context.Background()
	moved, err := m.Move(ctx, queue.Redrive{Tier: job.Low, DLQURL: b.dlq, QueueURL: b.queueURL, Rearm: re.rearm})
	if err != nil {
		t.Fatal(err)
	}
	if moved != 2 || len(client.tasks) != 1 || !cmp.Equal(re.sorted(), []string{jobA, jobB}) {
		t.Fatalf("moved %d, tasks %d, re-armed %v", moved, len(client.tasks), re.sorted())
	}
	task := client.tasks[0]
	if aws.ToString(task.SourceArn) != b.env.Res.DLQARNs[job.Low] ||
		!strings.HasSuffix(aws.ToString(task.DestinationArn), ":"+b.queueURL[strings.LastIndex(b.queueURL, "/")+1:]) {
		t.Errorf("task %s → %s", aws.ToString(task.SourceArn), aws.ToString(task.DestinationArn))
	}
	// The move task moves the messages themselves: none was sent or
	// deleted, all are visible again.
	if d := b.depth(t, b.dlq); d != (queue.Depth{Visible: 2}) {
		t.Errorf("the DLQ holds %+v, want 2 visible", d)
	}
	if d := b.depth(t, b.queueURL); d != (queue.Depth{}) {
		t.Errorf("the queue holds %+v, want nothing", d)
	}
	// A selection cannot be a task: the fallback does it.
	if _, err := m.Move(ctx, queue.Redrive{DLQURL: b.dlq, QueueURL: b.queueURL, JobIDs: map[string]bool{jobA: true}}); err != nil || fallback.n != 1 {
		t.Errorf("selection: fallback called %d times, %v", fallback.n, err)
	}
	if len(client.tasks) != 1 {
		t.Errorf("%d tasks", len(client.tasks))
	}
}
