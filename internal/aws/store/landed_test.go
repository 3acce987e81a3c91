package store_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/conveyor/conveyor/internal/aws/store"
	"github.com/conveyor/conveyor/internal/job"
	"github.com/conveyor/conveyor/internal/testfactory"
	"github.com/conveyor/conveyor/localstack/awstest"
)

// loseAnswer forwards each request, and for the first of operation op it
// sends drops the answer and tells the client the server failed: the
// write landed, its answer was lost, and the SDK sends it again.
type loseAnswer struct {
	op   string
	lost atomic.Bool
}

func (l *loseAnswer) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := http.DefaultTransport.RoundTrip(r)
	if err != nil || !strings.HasSuffix(r.Header.Get("X-Amz-Target"), "."+l.op) || !l.lost.CompareAndSwap(false, true) {
		return resp, err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	body := `{"__type":"com.amazonaws.dynamodb.v20120810#InternalServerError","message":"the answer was lost"}`
	return &http.Response{StatusCode: http.StatusInternalServerError, Status: "500 Internal Server Error", Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: http.Header{"Content-Type": {"application/x-amz-json-1.0"}}, Body: io.NopCloser(strings.NewReader(body)), Request: r}, nil
}

// TestAWriteWhoseAnswerWasLostLanded: a job's write lands, its answer is
// lost, and the SDK sends it again; the retry fails the version condition
// the first attempt moved on. The store recognises its own write (the item
// names it) and reports success, not a conflict: a run that took its own
// snooze for another writer's would let its message go and leave the job
// to recovery. Both a plain write and one with its events (a transaction).
func TestAWriteWhoseAnswerWasLostLanded(t *testing.T) {
	t.Parallel()
	env := awstest.Provision(t)
	ctx := context.Background()
	for _, op := range []string{"PutItem", "TransactWriteItems"} {
		t.Run(op, func(t *testing.T) {
			cfg := env.Config.Copy()
			lose := &loseAnswer{op: op}
			cfg.HTTPClient = &http.Client{Transport: lose}
			st := store.New(dynamodb.NewFromConfig(cfg), env.Res.Definition.Table.Name, nil)
			now := time.Now().UTC()
			j := testfactory.Build(testfactory.JobOpts{Owner: "u-lost", At: now})
			if err := st.ImportJobs(ctx, []job.Job{j}); err != nil {
				t.Fatal(err)
			}
			if _, err := j.Claim("worker-1", now.Add(time.Minute), now); err != nil {
				t.Fatal(err)
			}
			if op == "PutItem" {
				j.Pending = nil // a change without events: one conditional PutItem
			}
			if err := st.SaveJob(ctx, &j); err != nil {
				t.Fatalf("saving a job whose write landed and whose answer was lost: %v", err)
			}
			if !lose.lost.Load() {
				t.Fatalf("no %s answer was lost", op)
			}
			back, err := st.GetJob(ctx, j.ID)
			if err != nil || back.Version != j.Version || back.Status != job.Running || back.LeaseOwner != "worker-1" {
				t.Errorf("stored %+v (%v), want version %d, running, leased to worker-1", back, err, j.Version)
			}
		})
	}
}
