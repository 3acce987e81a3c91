//go:build sweepload

package recovery_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime"
	"runtime/pprof"
	"testing"
	"time"

	"github.com/conveyor/conveyor/internal/aws/awsclient"
	"github.com/conveyor/conveyor/internal/aws/bucket"
	"github.com/conveyor/conveyor/internal/aws/queue"
	"github.com/conveyor/conveyor/internal/aws/store"
	"github.com/conveyor/conveyor/internal/clock"
	"github.com/conveyor/conveyor/internal/ids"
	"github.com/conveyor/conveyor/internal/job"
	"github.com/conveyor/conveyor/internal/recovery"
	"github.com/conveyor/conveyor/internal/testfactory"
	"github.com/conveyor/conveyor/internal/uploads"
	"github.com/conveyor/conveyor/localstack/awstest"
)

// TestRetentionCPU seeds retainCPUJobs finished jobs past StaleAfter, each
// holding an upload, and runs retention until both are done, measuring the
// processor time and the allocations of this process per item (staled or
// expired). With CONVEYOR_RETAIN_PROFILE=<file> it writes a CPU profile of
// the runs:
//
//	CONVEYOR_RETAIN_PROFILE=/tmp/retain.pprof go test -tags sweepload -run TestRetentionCPU -v ./internal/recovery
//	go tool pprof -top /tmp/retain.pprof
func TestRetentionCPU(t *testing.T) {
	t.Parallel()
	const retainCPUJobs = 3000
	env := awstest.Provision(t)
	model := newLatencyClock(time.Now())
	cfg := model.Attach(recoveryConnections(t, env.Config))
	clients := awsclient.New(cfg)
	clk := clock.NewSimulated(time.Now())
	st := store.New(clients.DynamoDB, env.Res.Definition.Table.Name, clk.Now)
	rec := recovery.New(recovery.Config{
		Store: st, Sender: queue.NewSender(clients.SQS, env.Res.QueueURLs, queue.Fairness{}),
		Objects:    bucket.New(cfg, env.Res.Definition.Bucket.Name),
		StuckAfter: time.Hour, StaleAfter: 168 * time.Hour, DeleteAfter: 720 * time.Hour,
		Now: clk.Now, Clock: model.Now, Logger: slog.New(slog.NewJSONHandler(io.Discard, nil)),
	})
	ctx := context.Background()
	t0 := clk.Now()
	var jobs []job.Job
	var uploads []uploads.Upload
	for i := range retainCPUJobs {
		at := t0.Add(-30 * 24 * time.Hour)
		u := uploads.Upload{ID: ids.New(ids.Upload), Owner: testfactory.Owner(), Status: uploads.Confirmed, Key: fmt.Sprintf("uploads/u/%d.png", i),
			ContentType: "image/png", Size: 1024, CreatedAt: at, ConfirmedAt: &at, Refs: 1}
		uploads = append(uploads, u)
		j := testfactory.Build(testfactory.JobOpts{Owner: u.Owner, Status: job.Succeeded, At: t0.Add(-200 * time.Hour), UploadIDs: []string{u.ID}})
		j.MediaRefs = []string{u.ID}
		jobs = append(jobs, j)
	}
	if err := importAll(ctx, st, jobs, uploads); err != nil {
		t.Fatal(err)
	}
	if path := os.Getenv("CONVEYOR_RETAIN_PROFILE"); path != "" {
		f, err := os.Create(path)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			t.Fatal(err)
		}
		defer pprof.StopCPUProfile()
	}
	var ms0, ms1 runtime.MemStats
	runtime.ReadMemStats(&ms0)
	cpu0, wall0 := processCPU(), time.Now()
	var total recovery.Result
	for range 20 {
		res, err := rec.Retain(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		total.Staled += res.Staled
		total.MediaExpired += res.MediaExpired
		if res.Left == 0 && total.MediaExpired == retainCPUJobs {
			break
		}
		clk.Advance(time.Minute)
	}
	cpu, wall := processCPU()-cpu0, time.Since(wall0)
	runtime.ReadMemStats(&ms1)
	items := total.Staled + total.MediaExpired
	if total.Staled != retainCPUJobs || total.MediaExpired != retainCPUJobs {
		t.Fatalf("staled %d and expired %d; want %d each", total.Staled, total.MediaExpired, retainCPUJobs)
	}
	t.Logf("%d items in %s here: %.3f ms of CPU per item, %.0f allocations and %.1f KB per item",
		items, wall.Round(time.Millisecond), float64(cpu.Microseconds())/1000/float64(items),
		float64(ms1.Mallocs-ms0.Mallocs)/float64(items), float64(ms1.TotalAlloc-ms0.TotalAlloc)/1024/float64(items))
}
