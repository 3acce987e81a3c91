package admin

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/google/go-cmp/cmp"

	"github.com/conveyor/conveyor/internal/invalid"
	"github.com/conveyor/conveyor/internal/job"
	"github.com/conveyor/conveyor/internal/queue"
)

var quiet = slog.New(slog.NewJSONHandler(io.Discard, nil))

func TestCheckIDs(t *testing.T) {
	t.Parallel()
	a, b := "job_aaaaaaaaaaaaaaaaaaaaaaaaaa", "job_bbbbbbbbbbbbbbbbbbbbbbbbbb"
	many := make([]string, MaxBulk+1)
	for i := range many {
		many[i] = a
	}
	tests := []struct {
		name  string
		in    []string
		want  []string
		field string
	}{
		{"none", nil, nil, "jobIds"},
		{"empty", []string{}, nil, "jobIds"},
		{"too many", many, nil, "jobIds"},
		{"junk is kept, for bulk to skip", []string{a, "job_../../x"}, []string{a, "job_../../x"}, ""},
		{"an upload id is kept, for bulk to skip", []string{"upl_aaaaaaaaaaaaaaaaaaaaaaaaaa"}, []string{"upl_aaaaaaaaaaaaaaaaaaaaaaaaaa"}, ""},
		{"duplicates dropped, order kept", []string{b, a, b}, []string{b, a}, ""},
		{"exactly the maximum", many[:MaxBulk], []string{a}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := checkIDs(tt.in)
			var ie *invalid.FieldError
			switch {
			case tt.field != "" && (!errors.As(err, &ie) || ie.Field != tt.field):
				t.Fatalf("error %v, want an invalid.FieldError on %s", err, tt.field)
			case tt.field == "" && err != nil:
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("(-want +got)\n%s", diff)
			}
		})
	}
}

// fakeSQS is a FIFO-less, in-memory stand-in for the calls the movers make.
type fakeSQS struct {
	mu       sync.Mutex
	queues   map[string][]sqstypes.Message // url → messages not yet received
	held     map[string]sqstypes.Message   // receipt → message
	sent     map[string][]*sqs.SendMessageInput
	deleted  []string
	tasks    []*sqs.StartMessageMoveTaskInput
	released int
	seq      int
}

func newFakeSQS() *fakeSQS {
	return &fakeSQS{queues: map[string][]sqstypes.Message{}, held: map[string]sqstypes.Message{}, sent: map[string][]*sqs.SendMessageInput{}}
}

func (f *fakeSQS) put(url string, m queue.Message) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.seq++
	raw, _ := json.Marshal(m)
	f.queues[url] = append(f.queues[url], sqstypes.Message{
		MessageId: aws.String("msg-" + strconv.Itoa(f.seq)), Body: aws.String(string(raw)),
		Attributes: map[string]string{"MessageGroupId": m.JobID, "SentTimestamp": "1700000000000"},
	})
}

func (f *fakeSQS) GetQueueAttributes(_ context.Context, in *sqs.GetQueueAttributesInput, _ ...func(*sqs.Options)) (*sqs.GetQueueAttributesOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	url := aws.ToString(in.QueueUrl)
	return &sqs.GetQueueAttributesOutput{Attributes: map[string]string{
		"QueueArn":                    "arn:aws:sqs:eu-west-1:1:" + url[strings.LastIndex(url, "/")+1:],
		"ApproximateNumberOfMessages": strconv.Itoa(len(f.queues[url])),
	}}, nil
}

func (f *fakeSQS) ReceiveMessage(_ context.Context, in *sqs.ReceiveMessageInput, _ ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	url := aws.ToString(in.QueueUrl)
	n := min(int(in.MaxNumberOfMessages), len(f.queues[url]))
	out := append([]sqstypes.Message{}, f.queues[url][:n]...)
	f.queues[url] = f.queues[url][n:]
	for i := range out {
		f.seq++
		out[i].ReceiptHandle = aws.String(url + "#" + strconv.Itoa(f.seq))
		f.held[*out[i].ReceiptHandle] = out[i]
	}
	return &sqs.ReceiveMessageOutput{Messages: out}, nil
}

func (f *fakeSQS) ChangeMessageVisibilityBatch(_ context.Context, in *sqs.ChangeMessageVisibilityBatchInput, _ ...func(*sqs.Options)) (*sqs.ChangeMessageVisibilityBatchOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, e := range in.Entries {
		m, ok := f.held[aws.ToString(e.ReceiptHandle)]
		if !ok {
			continue
		}
		delete(f.held, aws.ToString(e.ReceiptHandle))
		url := aws.ToString(in.QueueUrl)
		f.queues[url] = append(f.queues[url], m)
		f.released++
	}
	return &sqs.ChangeMessageVisibilityBatchOutput{}, nil
}

func (f *fakeSQS) SendMessage(_ context.Context, in *sqs.SendMessageInput, _ ...func(*sqs.Options)) (*sqs.SendMessageOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.sent[aws.ToString(in.QueueUrl)] = append(f.sent[aws.ToString(in.QueueUrl)], in)
	return &sqs.SendMessageOutput{}, nil
}

func (f *fakeSQS) DeleteMessage(_ context.Context, in *sqs.DeleteMessageInput, _ ...func(*sqs.Options)) (*sqs.DeleteMessageOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	m := f.held[aws.ToString(in.ReceiptHandle)]
	delete(f.held, aws.ToString(in.ReceiptHandle))
	f.deleted = append(f.deleted, aws.ToString(m.MessageId))
	return &sqs.DeleteMessageOutput{}, nil
}

func (f *fakeSQS) StartMessageMoveTask(_ context.Context, in *sqs.StartMessageMoveTaskInput, _ ...func(*sqs.Options)) (*sqs.StartMessageMoveTaskOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.tasks = append(f.tasks, in)
	return &sqs.StartMessageMoveTaskOutput{TaskHandle: aws.String("task")}, nil
}

const (
	dlqURL   = "https://sqs.eu-west-1.amazonaws.com/1/conveyor-staging-low-dlq.fifo"
	queueURL = "https://sqs.eu-west-1.amazonaws.com/1/conveyor-staging-low.fifo"
)

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

func TestSQSMoverSelectsAndReArms(t *testing.T) {
	t.Parallel()
	f := newFakeSQS()
	a, b, c := "job_aaaaaaaaaaaaaaaaaaaaaaaaaa", "job_bbbbbbbbbbbbbbbbbbbbbbbbbb", "job_cccccccccccccccccccccccccc"
	for _, id := range []string{a, b, c} {
		f.put(dlqURL, queue.Message{Kind: queue.KindPublish, JobID: id, Send: 1})
	}
	f.queues[dlqURL] = append(f.queues[dlqURL], sqstypes.Message{MessageId: aws.String("junk"), Body: aws.String("not json")})
	re := &rearmer{}
	var progress []int
	m := SQSMover{SQS: f, Logger: quiet, Progress: func(n int) { progress = append(progress, n) }}
	moved, err := m.Move(context.Background(), Redrive{Tier: job.Low, DLQURL: dlqURL, QueueURL: queueURL,
		JobIDs: map[string]bool{a: true, c: true}, Rearm: re.rearm})
	if err != nil {
		t.Fatal(err)
	}
	if moved != 2 || !cmp.Equal(re.calls, []string{a, c}) || !cmp.Equal(progress, []int{1, 2}) {
		t.Errorf("moved %d, re-armed %v, progress %v", moved, re.calls, progress)
	}
	var got []string
	for _, in := range f.sent[queueURL] {
		got = append(got, aws.ToString(in.MessageGroupId)+" "+aws.ToString(in.MessageDeduplicationId)+" "+aws.ToString(in.MessageBody))
	}
	want := []string{
		a + " " + a + `-2 {"kind":"publish","jobId":"` + a + `","send":2}`,
		c + " " + c + `-2 {"kind":"publish","jobId":"` + c + `","send":2}`,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("sent (-want +got)\n%s", diff)
	}
	// The unselected and the unreadable messages are back in the DLQ.
	if n := len(f.queues[dlqURL]); n != 2 || len(f.held) != 0 || len(f.deleted) != 2 {
		t.Errorf("DLQ holds %d, %d still held, %d deleted", n, len(f.held), len(f.deleted))
	}

	// Without a selection, everything readable moves; Max bounds it.
	moved, err = m.Move(context.Background(), Redrive{Tier: job.Low, DLQURL: dlqURL, QueueURL: queueURL, Max: 1, Rearm: re.rearm})
	if err != nil || moved != 1 {
		t.Fatalf("moved %d: %v", moved, err)
	}
}

func TestTaskMoverReArmsThenStartsOneTask(t *testing.T) {
	t.Parallel()
	f := newFakeSQS()
	a, b := "job_aaaaaaaaaaaaaaaaaaaaaaaaaa", "job_bbbbbbbbbbbbbbbbbbbbbbbbbb"
	f.put(dlqURL, queue.Message{Kind: queue.KindPublish, JobID: a, Send: 1})
	f.put(dlqURL, queue.Message{Kind: queue.KindPublish, JobID: b, Send: 3})
	re := &rearmer{}
	fallback := &countingMover{}
	m := TaskMover{SQS: f, Fallback: fallback, Logger: quiet}
	moved, err := m.Move(context.Background(), Redrive{Tier: job.Low, DLQURL: dlqURL, QueueURL: queueURL, Rearm: re.rearm})
	if err != nil {
		t.Fatal(err)
	}
	if moved != 2 || len(f.tasks) != 1 || !cmp.Equal(re.calls, []string{a, b}) {
		t.Fatalf("moved %d, tasks %d, re-armed %v", moved, len(f.tasks), re.calls)
	}
	task := f.tasks[0]
	if aws.ToString(task.SourceArn) != "arn:aws:sqs:eu-west-1:1:conveyor-staging-low-dlq.fifo" ||
		aws.ToString(task.DestinationArn) != "arn:aws:sqs:eu-west-1:1:conveyor-staging-low.fifo" {
		t.Errorf("task %s → %s", aws.ToString(task.SourceArn), aws.ToString(task.DestinationArn))
	}
	// The move task moves the messages themselves: none was sent or
	// deleted, all are visible again.
	if len(f.sent) != 0 || len(f.deleted) != 0 || len(f.queues[dlqURL]) != 2 {
		t.Errorf("sent %d, deleted %d, DLQ %d", len(f.sent), len(f.deleted), len(f.queues[dlqURL]))
	}
	// A selection cannot be a task: the fallback does it.
	if _, err := m.Move(context.Background(), Redrive{DLQURL: dlqURL, QueueURL: queueURL, JobIDs: map[string]bool{a: true}}); err != nil || fallback.n != 1 {
		t.Errorf("selection: fallback called %d times, %v", fallback.n, err)
	}
	if len(f.tasks) != 1 {
		t.Errorf("%d tasks", len(f.tasks))
	}
}

type countingMover struct{ n int }

func (c *countingMover) Move(context.Context, Redrive) (int, error) { c.n++; return 0, nil }

func TestNewNamesWhatIsMissing(t *testing.T) {
	t.Parallel()
	_, err := New(Config{SQS: newFakeSQS()})
	if err == nil || err.Error() != "admin: the configuration lacks Breakers, Jobs, Sender, Store" {
		t.Errorf("%v", err)
	}
}
