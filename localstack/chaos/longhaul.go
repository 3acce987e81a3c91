package chaos

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/conveyor/conveyor/internal/accounts"
	"github.com/conveyor/conveyor/internal/apiclient"
	"github.com/conveyor/conveyor/internal/httpapi"
	"github.com/conveyor/conveyor/internal/job"
	"github.com/conveyor/conveyor/internal/resources"
	"github.com/conveyor/conveyor/localstack/simulator"
	"github.com/conveyor/conveyor/localstack/stack"
)

// Long-haul timings: what takes hours in production, compressed.
const (
	longHaulStuckAfter = 2 * time.Second
	longHaulCooldown   = time.Second // the chaos stack's CONVEYOR_BREAKER_COOLDOWN
	// longHaulPause holds the low tier for more than 5 × STUCK_AFTER.
	longHaulPause = 5*longHaulStuckAfter + time.Second
	// longHaulOutage lasts longer than maxReceiveCount × cooldown: long
	// enough to dead-letter every waiting job if waiting burned receives.
	longHaulOutage = (resources.DefaultMaxReceiveCount + 2) * longHaulCooldown
	// cancelRate is the share of jobs cancelled while they run; half of
	// those are retried by their owner.
	cancelRate = 0.15
)

// longHaul drives the long-haul scenarios beside the ordinary chaos.
type longHaul struct {
	s                *stack.Stack
	rep              *Report
	chance           func(float64) bool
	admin            string
	api              *apiclient.Client
	freeTok, freeUp  string
	mu               sync.Mutex
	held, cancelled  map[string]bool
	scenarios, users sync.WaitGroup
	watch            sync.Once
	finished         chan struct{}
}

func startLongHaul(ctx context.Context, s *stack.Stack, o Options, rep *Report, chance func(float64) bool) (*longHaul, error) {
	lh := &longHaul{s: s, rep: rep, chance: chance, held: map[string]bool{}, cancelled: map[string]bool{}, finished: make(chan struct{})}
	mint := func(c httpapi.Claims) (string, error) {
		c.ExpiresAt = time.Now().Add(2 * time.Hour)
		return httpapi.Mint(s.Config.JWTSecret, c)
	}
	var err error
	if lh.admin, err = mint(httpapi.Claims{Subject: "chaos-ops", Role: httpapi.RoleAdmin, Plan: "enterprise"}); err != nil {
		return nil, err
	}
	if lh.freeTok, err = mint(httpapi.Claims{Subject: "chaos-free", Role: httpapi.RoleUser, Plan: "free"}); err != nil {
		return nil, err
	}
	lh.api = apiclient.New(s.APIURL)
	free := lh.api.As(lh.freeTok)
	if err := free.Connect(ctx, accounts.ConnectRequest{Provider: "deviantart", RefreshToken: "rt-chaos-free"}); err != nil {
		return nil, err
	}
	up, err := free.Upload(ctx, "image.png", "image/png", simulator.PNG(9))
	if err != nil {
		return nil, err
	}
	lh.freeUp = up.ID
	// The low tier is paused before its jobs arrive, for longer than
	// 5 × STUCK_AFTER: they wait, spend nothing, and run after the resume.
	if _, err := lh.api.As(lh.admin).PauseTier(ctx, string(job.Low)); err != nil {
		return nil, fmt.Errorf("pausing the low tier: %w", err)
	}
	rep.PausedFor, rep.OutageFor = longHaulPause, longHaulOutage
	lh.scenarios.Go(func() {
		time.Sleep(longHaulPause)
		if _, err := lh.api.As(lh.admin).ResumeTier(context.Background(), string(job.Low)); err != nil {
			lh.broken("resuming the low tier failed: " + err.Error())
		}
	})
	// The external API fails every upload and publication for longer than
	// maxReceiveCount × cooldown.
	lh.scenarios.Go(func() {
		time.Sleep(time.Second)
		s.Simulator.ClearFaults()
		s.Simulator.AddFault(simulator.Fault{Path: "/api/v1/oauth2/stash/", Status: 503})
		time.Sleep(longHaulOutage)
		s.Simulator.ClearFaults()
		addFaults(s.Simulator, o.FaultRate)
	})
	return lh, nil
}

// submitted takes note of a new job and, by chance, has its owner cancel
// it while it runs (and, by chance again, retry it).
func (lh *longHaul) submitted(i int, id, tok string) {
	lh.mu.Lock()
	if tok == lh.freeTok {
		lh.held[id] = true
		lh.rep.HeldJobs++
	}
	lh.mu.Unlock()
	if !lh.chance(cancelRate) {
		return
	}
	retry := lh.chance(0.5)
	lh.users.Go(func() {
		time.Sleep(time.Duration(rand.IntN(400)) * time.Millisecond)
		if _, err := lh.api.As(tok).CancelJob(context.Background(), id); err != nil {
			return // already finished: 409
		}
		lh.mu.Lock()
		lh.cancelled[id] = true
		lh.rep.Cancels++
		lh.mu.Unlock()
		if !retry {
			return
		}
		time.Sleep(time.Duration(rand.IntN(200)) * time.Millisecond)
		if _, err := lh.api.As(tok).RetryJob(context.Background(), id); err != nil {
			lh.broken(fmt.Sprintf("job %d: retry after cancel refused: %v", i, err))
			return
		}
		lh.mu.Lock()
		delete(lh.cancelled, id)
		lh.rep.Retries++
		lh.mu.Unlock()
	})
}

func (lh *longHaul) broken(what string) {
	lh.mu.Lock()
	lh.rep.Stuck = append(lh.rep.Stuck, what)
	lh.mu.Unlock()
}

// done reports whether every scenario has ended (call it once every job
// was submitted).
func (lh *longHaul) done() bool {
	lh.watch.Do(func() {
		go func() { lh.wait(); close(lh.finished) }()
	})
	select {
	case <-lh.finished:
		return true
	default:
		return false
	}
}

func (lh *longHaul) wait() { lh.scenarios.Wait(); lh.users.Wait() }

// dlqDepth counts the messages in every tier's dead-letter queue.
func dlqDepth(ctx context.Context, s *stack.Stack) (int, error) {
	total := 0
	for tier, url := range s.Config.DLQURLs {
		out, err := s.App.Clients.SQS.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: aws.String(url), AttributeNames: []sqstypes.QueueAttributeName{
			sqstypes.QueueAttributeNameApproximateNumberOfMessages, sqstypes.QueueAttributeNameApproximateNumberOfMessagesNotVisible}})
		if err != nil {
			return 0, fmt.Errorf("reading the %s DLQ: %w", tier, err)
		}
		for _, k := range []string{"ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"} {
			n, _ := strconv.Atoi(out.Attributes[k])
			total += n
		}
	}
	return total, nil
}
