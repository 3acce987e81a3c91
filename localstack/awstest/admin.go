package awstest

import (
	"context"
	"io"
	"log/slog"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/conveyor/conveyor/internal/admin"
	"github.com/conveyor/conveyor/internal/aws/awsenv"
	"github.com/conveyor/conveyor/internal/aws/queue"
	"github.com/conveyor/conveyor/internal/httpapi"
	"github.com/conveyor/conveyor/internal/job"
	"github.com/conveyor/conveyor/internal/resources"
	"github.com/conveyor/conveyor/localstack/lambdaruntime"
	"github.com/conveyor/conveyor/localstack/stack"
)

// AdminServer is an admin Service built from a stack's parts and its routes
// served over HTTP until the test ends.
type AdminServer struct {
	Service *admin.Service
	// URL is the base URL of the admin routes.
	URL   string
	stack *stack.Stack
	// pollers are RunPollers' pollers by tier.
	pollers map[job.Tier]*lambdaruntime.Poller
}

var quietAdmin = slog.New(slog.NewJSONHandler(io.Discard, nil))

// NewAdminService builds an admin Service from a running stack's parts.
func NewAdminService(t testing.TB, s *stack.Stack) *admin.Service {
	t.Helper()
	a := s.App
	svc, err := admin.New(admin.Config{
		Env: a.Config.Env, Store: a.Store, Jobs: a.Jobs, Sender: a.Sender,
		Queues: queue.Inspector{SQS: a.Clients.SQS, Logger: a.Logger}, Mover: queue.SQSMover{SQS: a.Clients.SQS, Logger: a.Logger},
		QueueURLs: a.Config.QueueURLs, DLQURLs: a.Config.DLQURLs, Breakers: a.Breaker,
		StuckAfter: a.Config.StuckAfter, BulkSyncMax: a.Config.BulkSyncMax, Logger: a.Logger,
	})
	if err != nil {
		t.Fatal(err)
	}
	return svc
}

// ServeAdmin serves the admin routes of s (verified with its JWT secret).
func ServeAdmin(t testing.TB, s *stack.Stack) *AdminServer {
	t.Helper()
	svc := NewAdminService(t, s)
	rt := httpapi.NewRouter(httpapi.Options{Verifier: httpapi.NewVerifier(s.Config.JWTSecret, time.Now), Logger: s.App.Logger})
	httpapi.RegisterAdmin(rt, svc)
	srv := httptest.NewServer(lambdaruntime.Gateway(lambdaruntime.InProcess(resources.FuncAdmin, rt.Serve), quietAdmin))
	t.Cleanup(srv.Close)
	return &AdminServer{Service: svc, URL: srv.URL, stack: s}
}

// RunPollers consumes every publish tier of the stack (started with
// DisablePollers) with the stack's publisher, skipping paused tiers, until
// the test ends.
func (s *AdminServer) RunPollers(t testing.TB) {
	t.Helper()
	a := s.stack.App
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	s.pollers = map[job.Tier]*lambdaruntime.Poller{}
	for _, tier := range job.PublishTiers {
		q, _ := s.stack.Provisioned.Definition.Queue(tier)
		p := &lambdaruntime.Poller{
			SQS: a.Clients.SQS, QueueURL: a.Config.QueueURLs[tier],
			QueueARN: "arn:aws:sqs:" + awsenv.DefaultRegion + ":123456789012:" + q.Name, Region: awsenv.DefaultRegion,
			BatchSize: q.BatchSize, Concurrency: 2, Timeout: resources.ConsumerTimeout, Wait: 200 * time.Millisecond,
			Paused: s.Service.PausedFunc(tier), Function: s.stack.Functions.Invokers[resources.FuncPublisher], Logger: quietAdmin,
		}
		s.pollers[tier] = p
		wg.Go(func() { p.Run(ctx) })
	}
	t.Cleanup(func() { cancel(); wg.Wait() })
}

// WaitPaused returns once no receive of tier's poller that started before
// the tier was paused is still under way, so that no message sent from now
// on reaches the publisher until the tier is resumed. Call it after the
// pause call answered; it fails the test when the pollers do not run or do
// not settle within a minute.
func (s *AdminServer) WaitPaused(t testing.TB, tier job.Tier) {
	t.Helper()
	p, ok := s.pollers[tier]
	if !ok {
		t.Fatalf("awstest: no poller of tier %s (call RunPollers first)", tier)
	}
	ctx := context.Background()
	deadline := time.Now().Add(time.Minute)
	for !s.Service.Paused(ctx, tier) || p.Receiving() > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("awstest: tier %s's poller still receiving a minute after the pause", tier)
		}
		time.Sleep(5 * time.Millisecond) // polling the condition above
	}
}
