package lambdaruntime_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/conveyor/conveyor/localstack/awstest"
	"github.com/conveyor/conveyor/localstack/emulator"
	"github.com/conveyor/conveyor/localstack/lambdaruntime"
)

// TestTickerDeliversSchedulerEvents: each tick invokes the function with
// the event EventBridge Scheduler sends, carrying the schedule's detail;
// cancelling the context stops it.
func TestTickerDeliversSchedulerEvents(t *testing.T) {
	t.Parallel()
	got := make(chan events.EventBridgeEvent, 10)
	tk := &lambdaruntime.Ticker{Name: "release", Interval: 10 * time.Millisecond, Detail: `{"task":"release"}`, Logger: quiet,
		Function: lambdaruntime.InProcess("recovery", func(_ context.Context, ev events.EventBridgeEvent) error {
			select {
			case got <- ev:
			default:
			}
			return nil
		})}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { tk.Run(ctx); close(done) }()
	var first, second events.EventBridgeEvent
	for _, ev := range []*events.EventBridgeEvent{&first, &second} {
		select {
		case *ev = <-got:
		case <-time.After(time.Minute):
			t.Fatal("no tick within a minute")
		}
	}
	cancel()
	<-done
	if first.Source != "aws.scheduler" || first.DetailType != "Scheduled Event" || string(first.Detail) != `{"task":"release"}` ||
		len(first.Resources) != 1 || !strings.HasSuffix(first.Resources[0], ":schedule/default/release") {
		t.Errorf("event = %+v", first)
	}
	if first.ID == "" || first.ID == second.ID || second.Time.Before(first.Time) {
		t.Errorf("two ticks: ids %q %q, times %v %v; want distinct ids in time order", first.ID, second.ID, first.Time, second.Time)
	}
}

// TestS3BridgeHandsTheGenuineEventOver: an object written under the upload
// prefix reaches the function as the S3 event S3 itself sent — its key
// URL-encoded, as S3 encodes it — and the s3:TestEvent that setting the
// notification produced never reaches the function.
func TestS3BridgeHandsTheGenuineEventOver(t *testing.T) {
	t.Parallel()
	env := awstest.Provision(t)
	bucket := env.Res.Definition.Bucket.Name
	key := env.Res.Definition.Bucket.UploadPrefix + "u-1/upl_x/a.png"
	got := make(chan events.S3Event, 10)
	br := &lambdaruntime.S3Bridge{SQS: env.Clients.SQS, QueueURL: env.Res.NotificationQueueURL, Logger: quiet,
		Function: lambdaruntime.InProcess("confirm", func(_ context.Context, ev events.S3Event) error {
			got <- ev
			return nil
		})}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { br.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })

	if _, err := emulator.S3(env.Config).PutObject(context.Background(), &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String(key),
		Body: bytes.NewReader([]byte("png")), ContentType: aws.String("image/png")}); err != nil {
		t.Fatal(err)
	}
	select {
	case ev := <-got:
		if len(ev.Records) != 1 {
			t.Fatalf("records = %d, want 1: %+v", len(ev.Records), ev)
		}
		r := ev.Records[0]
		if r.S3.Bucket.Name != bucket || r.S3.Object.URLDecodedKey != key || r.S3.Object.Key != url.QueryEscape(key) || !strings.HasPrefix(r.EventName, "ObjectCreated:") {
			raw, _ := json.Marshal(r)
			t.Errorf("record = %s", raw)
		}
	case <-time.After(time.Minute):
		t.Fatal("no S3 event within a minute")
	}
}
