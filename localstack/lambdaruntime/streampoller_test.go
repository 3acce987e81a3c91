package lambdaruntime_test

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/conveyor/conveyor/internal/aws/awsclient"
	"github.com/conveyor/conveyor/internal/resources"
	"github.com/conveyor/conveyor/localstack/awstest"
	"github.com/conveyor/conveyor/localstack/lambdaruntime"
)

// lanes is a stream consumer that notes, for each invocation, the records
// it was handed, and checks that no two invocations at once hold records
// of one partition key.
type lanes struct {
	mu       sync.Mutex
	inFlight map[string]int // partition key → invocations holding it
	running  int
	most     int           // the most invocations running at once
	overlap  chan struct{} // closed once two invocations run at once
	once     sync.Once
	got      map[string][]int // partition key → its records' n, in delivery order
	shared   []string         // keys held by two invocations at once
	batches  int
}

func (l *lanes) handle(ctx context.Context, ev events.DynamoDBEvent) (events.DynamoDBEventResponse, error) {
	keys := map[string]bool{}
	l.mu.Lock()
	l.batches++
	first := l.batches == 1
	l.running++
	l.most = max(l.most, l.running)
	if l.running > 1 {
		l.once.Do(func() { close(l.overlap) })
	}
	for _, r := range ev.Records {
		k := r.Change.Keys[resources.AttrPK].String()
		n, _ := strconv.Atoi(r.Change.NewImage["n"].Number())
		l.got[k] = append(l.got[k], n)
		if !keys[k] {
			keys[k] = true
			if l.inFlight[k] > 0 {
				l.shared = append(l.shared, k)
			}
			l.inFlight[k]++
		}
	}
	l.mu.Unlock()
	// Hold the first invocation until another one runs beside it (at most
	// a while: a poller that runs one batch at a time never gets there,
	// and the test fails on l.most, not on this wait).
	if first {
		select {
		case <-l.overlap:
		case <-time.After(20 * time.Second):
		case <-ctx.Done():
		}
	}
	l.mu.Lock()
	l.running--
	for k := range keys {
		l.inFlight[k]--
	}
	l.mu.Unlock()
	return events.DynamoDBEventResponse{}, nil
}

// TestStreamPollerLanes: with a ParallelizationFactor of 4 the poller runs
// several batches of one shard at once, split by partition key: every
// record arrives once, each key's records in order and never in two
// batches at once, as Lambda's mapping keeps order per partition key.
func TestStreamPollerLanes(t *testing.T) {
	t.Parallel()
	const keys, perKey = 8, 6
	env := awstest.Provision(t)
	def := env.Res.Definition
	ctx := context.Background()
	// Every record is in the stream before the poller reads it.
	for n := 1; n <= perKey; n++ {
		for k := range keys {
			if _, err := env.Clients.DynamoDB.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(def.Table.Name), Item: map[string]ddbtypes.AttributeValue{
				resources.AttrPK: &ddbtypes.AttributeValueMemberS{Value: fmt.Sprintf("KEY#%d", k)},
				resources.AttrSK: &ddbtypes.AttributeValueMemberS{Value: fmt.Sprintf("%s%012d", resources.EventSKPrefix, n)},
				"n":              &ddbtypes.AttributeValueMemberN{Value: strconv.Itoa(n)},
			}}); err != nil {
				t.Fatal(err)
			}
		}
	}
	l := &lanes{inFlight: map[string]int{}, overlap: make(chan struct{}), got: map[string][]int{}}
	p := &lambdaruntime.StreamPoller{
		Streams: awsclient.Streams(awstest.Config(t)), StreamARN: env.Res.TableStreamARN, Region: "us-east-1",
		BatchSize: 4, ParallelizationFactor: 4, PartitionKey: resources.AttrPK, StartingPosition: "TRIM_HORIZON",
		Function: lambdaruntime.InProcess("lanes", l.handle), Timeout: time.Minute, PollInterval: 50 * time.Millisecond,
		Logger: slog.New(slog.DiscardHandler),
	}
	pctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- p.Run(pctx) }()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		l.mu.Lock()
		n := 0
		for _, v := range l.got {
			n += len(v)
		}
		l.mu.Unlock()
		if n >= keys*perKey || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("poller: %v", err)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	want := make([]int, perKey)
	for i := range want {
		want[i] = i + 1
	}
	for k := range keys {
		key := fmt.Sprintf("KEY#%d", k)
		if !slices.Equal(l.got[key], want) {
			t.Errorf("%s's records arrived as %v, want %v", key, l.got[key], want)
		}
	}
	if len(l.shared) > 0 {
		t.Errorf("keys held by two batches at once: %v", l.shared)
	}
	if l.most < 2 {
		t.Errorf("at most %d batch ran at once, want several (ParallelizationFactor 4)", l.most)
	}
	if l.most > 4 {
		t.Errorf("%d batches of one shard ran at once, want at most 4", l.most)
	}
	t.Logf("%d batches, at most %d at once", l.batches, l.most)
}

// TestStreamPollerRefusesABadParallelizationFactor: Lambda takes 1–10, and
// lanes need the partition key.
func TestStreamPollerRefusesABadParallelizationFactor(t *testing.T) {
	t.Parallel()
	for _, p := range []*lambdaruntime.StreamPoller{
		{ParallelizationFactor: 11, PartitionKey: "pk"},
		{ParallelizationFactor: -1, PartitionKey: "pk"},
		{ParallelizationFactor: 2},
	} {
		if err := p.Run(context.Background()); err == nil {
			t.Errorf("factor %d, partition key %q: no error", p.ParallelizationFactor, p.PartitionKey)
		}
	}
}
