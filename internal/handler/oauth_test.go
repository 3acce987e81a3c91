package handler_test

import (
	"bytes"
	"context"
	"encoding/json"
	"image"
	"image/png"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/conveyor/conveyor/internal/admin"
	"github.com/conveyor/conveyor/internal/aws/bucket"
	"github.com/conveyor/conveyor/internal/aws/queue"
	"github.com/conveyor/conveyor/internal/aws/sealer"
	"github.com/conveyor/conveyor/internal/aws/secretref"
	"github.com/conveyor/conveyor/internal/config"
	"github.com/conveyor/conveyor/internal/handler"
	"github.com/conveyor/conveyor/internal/job"
	"github.com/conveyor/conveyor/internal/resources"
	"github.com/conveyor/conveyor/internal/testfactory"
	"github.com/conveyor/conveyor/localstack/awstest"
	"github.com/conveyor/conveyor/localstack/lambdaruntime"
	"github.com/conveyor/conveyor/localstack/simulator"
)

// TestWaitsForTheOAuthClientSecret is a first deploy before an operator
// filled in the OAuth client secret (it holds the stack's placeholder):
// the publisher starts anyway, through the same cold start as its binary;
// a job fed to it through the real queue, as the event source mapping
// does, waits parked in the table — no attempt spent, its message let go
// after one receive, nothing in the dead-letter queue — cycle after
// cycle, and the admin overview says why. Once the secret holds the
// credentials, the next cycle publishes the job.
func TestWaitsForTheOAuthClientSecret(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	res := awstest.Provision(t)
	sim, simURL, stop, err := simulator.Start("127.0.0.1:0", simulator.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	sm := secretsmanager.NewFromConfig(res.Config)
	secret, err := sm.CreateSecret(ctx, &secretsmanager.CreateSecretInput{Name: aws.String(awstest.Name(t, "oauth-client")),
		SecretString: aws.String(`{"clientId":"","clientSecret":"generated-placeholder-0123456789"}`)})
	if err != nil {
		t.Fatal(err)
	}
	vars := map[string]string{
		config.VarDeviantArtClientSecretARN: aws.ToString(secret.ARN), config.VarDeviantArtURL: simURL,
		config.VarOAuthClientRecheck: "1s", config.VarParkAfter: "1s", config.VarJWTSecret: strings.Repeat("k", 32),
	}

	// The cold start of the binary: Resolve, then Complete, then New.
	env := res.Function(t, resources.FuncPublisher, vars)
	if resolve := handler.Publisher.Resolve; resolve != nil {
		if err := resolve(ctx, &env.Config, env.AWS); err != nil {
			t.Fatalf("resolving at cold start: %v", err)
		}
	}
	if err := env.Config.Complete(resources.FuncPublisher); err != nil {
		t.Fatalf("the publisher refuses to start: %v", err)
	}
	h, err := handler.NewPublisher(ctx, env)
	if err != nil {
		t.Fatalf("building the publisher: %v", err)
	}
	release, err := handler.NewRecovery(ctx, res.Function(t, resources.FuncRecovery, vars))
	if err != nil {
		t.Fatal(err)
	}
	adminH, err := handler.NewAdminWith(onAWS)(ctx, res.Function(t, resources.FuncAdmin, vars))
	if err != nil {
		t.Fatal(err)
	}
	ops := awstest.HTTPFunction{T: t, Handler: adminH, Key: vars[config.VarJWTSecret]}

	// A connected user's job of one image, sent to its tier's queue.
	st := env.Store(env.DynamoDB())
	owner := testfactory.Owner()
	testfactory.Account(t, st, testfactory.AccountOpts{Owner: owner, Sealer: sealer.For(env.AWS, env.Config.KMSKeyID)})
	var img bytes.Buffer
	if err := png.Encode(&img, image.NewRGBA(image.Rect(0, 0, 4, 4))); err != nil {
		t.Fatal(err)
	}
	up := testfactory.Upload(t, st, testfactory.UploadOpts{Owner: owner, Size: int64(img.Len())})
	if _, err := bucket.New(env.AWS, env.Config.Bucket).Put(ctx, up.Key, bytes.NewReader(img.Bytes()), bucket.Headers{ContentType: "image/png"}); err != nil {
		t.Fatal(err)
	}
	j := testfactory.Job(t, st, testfactory.JobOpts{Owner: owner, Tier: job.Medium, UploadIDs: []string{up.ID}})
	sqsc := env.SQS()
	if err := queue.NewSender(sqsc, env.Config.QueueURLs, queue.Fairness(env.Config.Fairness)).Send(ctx, j.Tier, queue.ForJob(j)); err != nil {
		t.Fatal(err)
	}
	poller := lambdaruntime.Poller{SQS: sqsc, QueueURL: env.Config.QueueURLs[j.Tier], BatchSize: 10, Timeout: time.Minute,
		Function: lambdaruntime.InProcess(resources.FuncPublisher, func(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
			for _, m := range ev.Records {
				if n := m.Attributes["ApproximateReceiveCount"]; n != "1" {
					t.Errorf("a message of the job received %s times, want once: waiting must cost no receives", n)
				}
			}
			return h(ctx, ev)
		})}
	depth := func(url string) int {
		out, err := sqsc.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: aws.String(url),
			AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameApproximateNumberOfMessages,
				sqstypes.QueueAttributeNameApproximateNumberOfMessagesNotVisible}})
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, v := range out.Attributes {
			var k int
			_ = json.Unmarshal([]byte(v), &k)
			n += k
		}
		return n
	}
	// cycle delivers the job's message once, then lets recovery send the
	// parked job again when its wait is over.
	cycle := func(whileParked func()) job.Job {
		t.Helper()
		if n, err := poller.PollOnce(ctx); err != nil || n != 1 {
			t.Fatalf("poll: %d messages, %v; want the job's one", n, err)
		}
		got, err := st.GetJob(ctx, j.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got.Status == job.Queued {
			if whileParked != nil {
				whileParked()
			}
			time.Sleep(time.Until(*got.RetryAt) + 50*time.Millisecond) // the wait is real time: the secret's recheck
			// The release schedule's event (resources: TaskRelease).
			if err := release(ctx, events.EventBridgeEvent{Detail: json.RawMessage(`{"task":"` + resources.TaskRelease + `"}`)}); err != nil {
				t.Fatal(err)
			}
		}
		return got
	}

	overview := func() admin.Overview {
		t.Helper()
		resp := ops.Call(http.MethodGet, "/v1/admin/overview", ops.Token("ops", "admin"), "")
		var ov admin.Overview
		if err := json.Unmarshal([]byte(resp.Body), &ov); err != nil || resp.StatusCode != 200 {
			t.Fatalf("overview: %d %s", resp.StatusCode, resp.Body)
		}
		return ov
	}
	for i := range 3 {
		got := cycle(func() {
			if i > 0 {
				return
			}
			ov := overview()
			if len(ov.Blocked) != 1 || ov.Blocked[0].Reason != secretref.CodeOAuthClientNotSet || ov.Blocked[0].Jobs != 1 ||
				ov.Parked[secretref.CodeOAuthClientNotSet] != 1 || !strings.Contains(ov.Blocked[0].Message, "OAuth client secret is not set") {
				t.Errorf("overview: parked %v blocked %+v; want one job blocked on %s", ov.Parked, ov.Blocked, secretref.CodeOAuthClientNotSet)
			}
		})
		if got.Status != job.Queued || got.Waiting != secretref.CodeOAuthClientNotSet || got.Attempts != 0 ||
			got.Error == nil || got.Error.Code != secretref.CodeOAuthClientNotSet || !got.Error.Retryable {
			t.Fatalf("cycle %d: status %s waiting %q attempts %d error %+v; want queued, parked for %s, no attempt spent",
				i, got.Status, got.Waiting, got.Attempts, got.Error, secretref.CodeOAuthClientNotSet)
		}
		if !strings.Contains(got.Error.Message, "clientId is empty") || strings.Contains(got.Error.Message, "generated-placeholder") {
			t.Errorf("the job's error %q: want why, never the secret's value", got.Error.Message)
		}
	}
	if n := depth(env.Config.DLQURLs[j.Tier]); n != 0 {
		t.Fatalf("%d messages in the dead-letter queue, want none", n)
	}
	if n := len(sim.Publications()); n != 0 {
		t.Fatalf("%d publications before the secret was set", n)
	}

	// The operator fills the secret in.
	if _, err := sm.PutSecretValue(ctx, &secretsmanager.PutSecretValueInput{SecretId: secret.ARN,
		SecretString: aws.String(`{"clientId":"` + simulator.ClientIDDefault + `","clientSecret":"` + simulator.ClientSecretDefault + `"}`)}); err != nil {
		t.Fatal(err)
	}
	if got := cycle(nil); got.Status != job.Succeeded || got.Attempts != 1 || got.Items[0].Status != job.ItemPublished {
		t.Fatalf("after the secret was set: status %s attempts %d item %s; want succeeded on the first attempt", got.Status, got.Attempts, got.Items[0].Status)
	}
	if n := len(sim.Publications()); n != 1 {
		t.Errorf("%d publications, want 1", n)
	}
	if n := depth(env.Config.QueueURLs[j.Tier]) + depth(env.Config.DLQURLs[j.Tier]); n != 0 {
		t.Errorf("%d messages left in the queues, want none", n)
	}
	if ov := overview(); len(ov.Blocked) != 0 {
		t.Errorf("overview once the secret is set: blocked %+v, want none", ov.Blocked)
	}
}
