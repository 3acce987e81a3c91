package httpapi_test

import (
	"context"
	"fmt"
	"net/url"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/conveyor/conveyor/internal/admin"
	"github.com/conveyor/conveyor/internal/aws/queue"
	"github.com/conveyor/conveyor/internal/job"
	"github.com/conveyor/conveyor/localstack/awstest"
)

// drain receives and deletes every message of tier's queue and returns the
// job ids they name.
func (ab *adminBundle) drain(tier job.Tier) []string {
	ab.T.Helper()
	ctx := context.Background()
	a := ab.Stack.App
	q := a.Config.QueueURLs[tier]
	var got []string
	for _, m := range awstest.ReceiveAll(ab.T, a.Clients.SQS, q, 0) {
		if msg, err := queue.Decode(aws.ToString(m.Body)); err == nil {
			got = append(got, msg.JobID)
		}
		if _, err := a.Clients.SQS.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: aws.String(q), ReceiptHandle: m.ReceiptHandle}); err != nil {
			ab.T.Fatal(err)
		}
	}
	return got
}

// park makes a queued job wait in the table for reason (breaker's circuit
// for circuit_open), an hour away, as the publisher does.
func (ab *adminBundle) park(id, reason, breaker string) {
	ab.T.Helper()
	until := time.Now().Add(time.Hour)
	if _, err := ab.Stack.App.Store.UpdateJob(context.Background(), id, func(j *job.Job) error {
		j.SetWait(reason, &until, "parked by the test", breaker)
		return j.Park(reason, until, time.Now())
	}); err != nil {
		ab.T.Fatal(err)
	}
}

// TestResetAndResumeReleaseWhatTheyParked: a breaker reset sends the jobs
// its open circuit parked at once (not at the old openUntil plus a sweep),
// and only those; a tier's resume sends the jobs its pause parked. Each
// job says why it waits until then, in the user's and the admin's view.
func TestResetAndResumeReleaseWhatTheyParked(t *testing.T) {
	t.Parallel()
	ab := setupAdmin(t, nil, false)
	const key, other = "host:api.example.com", "host:other.example.com"
	tok, open := ab.submit("u-release", "standard", 1)
	_, elsewhere := ab.submit("u-release-2", "standard", 1)
	_, paused := ab.submit("u-release-3", "standard", 1)
	_, pausedLow := ab.submit("u-release-4", "free", 1)
	ab.drain(job.Medium)
	ab.drain(job.Low)
	ab.park(open, job.WaitCircuitOpen, key)
	ab.park(elsewhere, job.WaitCircuitOpen, other)
	ab.park(paused, job.WaitPaused, "")
	ab.park(pausedLow, job.WaitPaused, "")

	got := ab.Must(ab.Call("GET", "/v1/jobs/"+open, tok, nil), 200)
	w, _ := got.Body["wait"].(map[string]any)
	if w["reason"] != "circuit_open" || w["breaker"] != key || w["until"] == nil || got.Body["phase"] != "waiting" {
		t.Fatalf("a job parked by an open circuit shows wait %v phase %v; want circuit_open, its key and until", got.Body["wait"], got.Body["phase"])
	}
	adm := ab.Must(ab.call("GET", "/v1/admin/jobs/"+paused, ab.admin, nil), 200)
	if w, _ := adm.Body["wait"].(map[string]any); w["reason"] != "paused" || w["until"] != nil {
		t.Fatalf("the admin view of a job parked by a pause: wait %v; want paused, until null", adm.Body["wait"])
	}

	ab.Must(ab.call("POST", "/v1/admin/breakers/"+url.PathEscape(key)+"/reset", ab.admin, nil), 200)
	if sent := ab.drain(job.Medium); len(sent) != 1 || sent[0] != open {
		t.Errorf("after the reset the queue holds %v; want only %s, at once", sent, open)
	}
	got = ab.Must(ab.Call("GET", "/v1/jobs/"+open, tok, nil), 200)
	if got.Body["wait"] != nil || got.Body["status"] != "queued" {
		t.Errorf("the released job: status %v wait %v; want queued with no wait", got.Body["status"], got.Body["wait"])
	}
	if j, _ := ab.Stack.App.Store.GetJob(context.Background(), elsewhere); j.Waiting == "" || j.Wait == nil || j.Wait.Breaker != other {
		t.Errorf("a job parked by another breaker was released: %+v", j.Wait)
	}

	ab.Must(ab.call("POST", "/v1/admin/tiers/medium/pause", ab.admin, nil), 200)
	ab.Must(ab.call("POST", "/v1/admin/tiers/medium/resume", ab.admin, nil), 200)
	if sent := ab.drain(job.Medium); len(sent) != 1 || sent[0] != paused {
		t.Errorf("after the resume the queue holds %v; want only %s", sent, paused)
	}
	if j, _ := ab.Stack.App.Store.GetJob(context.Background(), pausedLow); j.Waiting != job.WaitPaused {
		t.Errorf("resuming medium released a low job: waiting %q", j.Waiting)
	}
}

// TestAResumeReleasesABoundedBatchInItsRequest: a resume releases at most
// admin.ReleaseBatch of the jobs its pause parked inside its request (a
// write and a send each, so the request stays far within API Gateway's
// 30 s), and the release sweep's next run sends the rest: a job a pause
// parked is due at once. Every job is sent once.
func TestAResumeReleasesABoundedBatchInItsRequest(t *testing.T) {
	t.Parallel()
	ab := setupAdmin(t, nil, false)
	ctx := context.Background()
	st, now := ab.Stack.App.Store, time.Now().UTC()
	const n = admin.ReleaseBatch + 7
	parked := make([]string, n)
	var wg sync.WaitGroup
	sem := make(chan struct{}, 8)
	for i := range parked {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			parked[i] = putJob(t, st, fmt.Sprintf("u-parked-%03d", i), job.Medium, now, func(j *job.Job) error {
				return j.Park(job.WaitPaused, now, now)
			}).ID
		})
	}
	wg.Wait()
	ab.Must(ab.call("POST", "/v1/admin/tiers/medium/pause", ab.admin, nil), 200)
	ab.Must(ab.call("POST", "/v1/admin/tiers/medium/resume", ab.admin, nil), 200)
	inRequest := ab.drain(job.Medium)
	if len(inRequest) != admin.ReleaseBatch {
		t.Fatalf("the resume's request sent %d of %d parked jobs, want admin.ReleaseBatch (%d)", len(inRequest), n, admin.ReleaseBatch)
	}
	if _, err := ab.Stack.App.Recoverer.ReleaseScheduled(ctx, nil); err != nil {
		t.Fatal(err)
	}
	swept := ab.drain(job.Medium)
	all := append(slices.Clone(inRequest), swept...)
	slices.Sort(all)
	slices.Sort(parked)
	if len(swept) != n-admin.ReleaseBatch || !slices.Equal(slices.Compact(slices.Clone(all)), parked) || len(all) != n {
		t.Fatalf("after the release sweep: %d more sent (want %d), %d in all for %d parked jobs, each once", len(swept), n-admin.ReleaseBatch, len(all), n)
	}
}
