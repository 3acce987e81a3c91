package schedule_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/scheduler"

	"github.com/conveyor/conveyor/internal/schedule"
	"github.com/conveyor/conveyor/localstack/awstest"
	"github.com/conveyor/conveyor/localstack/stack"
)

func TestMain(m *testing.M) { awstest.Main(m) }

// clock is a test clock that only moves when told.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Set(t time.Time) {
	c.mu.Lock()
	c.t = t
	c.mu.Unlock()
}

func jobCount(b *awstest.Bundle, tok string) int {
	b.T.Helper()
	r := b.Must(b.Call("GET", "/v1/jobs?limit=0", tok, nil), 200)
	var n int
	for _, c := range r.Header.Get("X-Total-Count") {
		n = n*10 + int(c-'0')
	}
	return n
}

var template = map[string]any{"type": "http", "params": map[string]any{"url": "http://127.0.0.1:9/tick", "method": "POST"}}

// TestRateScheduleSubmitsOneJobPerTick runs a one-minute schedule through
// the emulator's Scheduler and the local firer with a test clock: one job
// per tick, none while paused and no replay of the paused ticks after the
// resume, and a tick fired twice makes one job.
func TestRateScheduleSubmitsOneJobPerTick(t *testing.T) {
	t.Parallel()
	t0 := time.Now().UTC().Truncate(time.Second)
	clk := &clock{t: t0}
	b := awstest.Setup(t, nil, stack.Options{DisablePollers: true, Now: clk.Now})
	tok := b.Token("u-sched", "user", "enterprise")
	ctx := context.Background()

	created := b.Must(b.Call("POST", "/v1/schedules", tok, map[string]any{"name": "ping", "rate": "1m", "timezone": "Europe/Moscow", "job": template}), 201)
	id := created.Body["id"].(string)
	if created.Body["status"] != "active" || created.Body["nextRunAt"] != t0.Add(time.Minute).Format(time.RFC3339) {
		t.Fatalf("created %s, want active with nextRunAt %s", created.Raw, t0.Add(time.Minute).Format(time.RFC3339))
	}
	// The definition is one Scheduler schedule, targeting the recovery function.
	got, err := b.Stack.App.Clients.Scheduler.GetSchedule(ctx, &scheduler.GetScheduleInput{Name: aws.String(id), GroupName: aws.String(b.Stack.Config.ScheduleGroup)})
	if err != nil {
		t.Fatalf("the Scheduler schedule: %v", err)
	}
	if aws.ToString(got.ScheduleExpression) != "rate(1 minute)" || got.State != "ENABLED" {
		t.Errorf("Scheduler has %s %s, want rate(1 minute) ENABLED", aws.ToString(got.ScheduleExpression), got.State)
	}

	// Three ticks.
	clk.Set(t0.Add(3*time.Minute + 30*time.Second))
	if n, err := b.Stack.Schedules.RunOnce(ctx, clk.Now()); err != nil || n != 3 {
		t.Fatalf("fired %d ticks (%v), want 3", n, err)
	}
	if n := jobCount(b, tok); n != 3 {
		t.Fatalf("%d jobs after three ticks, want 3", n)
	}
	one := b.Must(b.Call("GET", "/v1/schedules/"+id, tok, nil), 200)
	runs := one.Body["lastRuns"].([]any)
	if len(runs) != 3 {
		t.Fatalf("lastRuns %v, want 3", runs)
	}
	newest := runs[0].(map[string]any)
	if newest["at"] != t0.Add(3*time.Minute).Format(time.RFC3339) {
		t.Errorf("newest run at %v, want %s", newest["at"], t0.Add(3*time.Minute).Format(time.RFC3339))
	}
	j := b.Must(b.Call("GET", "/v1/jobs/"+newest["jobId"].(string), tok, nil), 200)
	if j.Body["type"] != "http" || j.Body["tier"] != "high" {
		t.Errorf("the tick's job is %v in tier %v, want an http job in the owner's tier (high)", j.Body["type"], j.Body["tier"])
	}

	// The same tick again (Scheduler retries an invocation): no new job.
	if err := b.Stack.Schedules.FireTick(ctx, schedule.TickInput(schedule.Schedule{ID: id, Owner: "u-sched"}), t0.Add(3*time.Minute)); err != nil {
		t.Fatal(err)
	}
	if n := jobCount(b, tok); n != 3 {
		t.Errorf("%d jobs after a duplicate tick, want 3", n)
	}

	// Paused for three ticks: nothing, and nothing replayed on resume.
	b.Must(b.Call("POST", "/v1/schedules/"+id+"/pause", tok, nil), 200)
	clk.Set(t0.Add(6*time.Minute + 30*time.Second))
	if n, err := b.Stack.Schedules.RunOnce(ctx, clk.Now()); err != nil || n != 0 {
		t.Fatalf("a paused schedule fired %d ticks (%v)", n, err)
	}
	// Even a tick delivered while paused (in flight in AWS) submits nothing.
	if err := b.Stack.Schedules.FireTick(ctx, schedule.TickInput(schedule.Schedule{ID: id, Owner: "u-sched"}), t0.Add(5*time.Minute)); err != nil {
		t.Fatal(err)
	}
	if n := jobCount(b, tok); n != 3 {
		t.Fatalf("%d jobs while paused, want 3", n)
	}
	resumed := b.Must(b.Call("POST", "/v1/schedules/"+id+"/resume", tok, nil), 200)
	if resumed.Body["nextRunAt"] != t0.Add(7*time.Minute).Format(time.RFC3339) {
		t.Errorf("after resume nextRunAt %v, want %s", resumed.Body["nextRunAt"], t0.Add(7*time.Minute).Format(time.RFC3339))
	}
	clk.Set(t0.Add(8*time.Minute + 30*time.Second))
	if n, err := b.Stack.Schedules.RunOnce(ctx, clk.Now()); err != nil || n != 2 {
		t.Fatalf("fired %d ticks after the resume (%v), want 2 (7m and 8m)", n, err)
	}
	if n := jobCount(b, tok); n != 5 {
		t.Errorf("%d jobs, want 5", n)
	}

	// Delete: 204, gone from the API and from Scheduler, and a late tick is moot.
	b.Must(b.Call("DELETE", "/v1/schedules/"+id, tok, nil), 204)
	b.Must(b.Call("GET", "/v1/schedules/"+id, tok, nil), 404)
	if _, err := b.Stack.App.Clients.Scheduler.GetSchedule(ctx, &scheduler.GetScheduleInput{Name: aws.String(id), GroupName: aws.String(b.Stack.Config.ScheduleGroup)}); err == nil {
		t.Error("the Scheduler schedule outlived its definition")
	}
	if err := b.Stack.Schedules.FireTick(ctx, schedule.TickInput(schedule.Schedule{ID: id, Owner: "u-sched"}), t0.Add(9*time.Minute)); err != nil {
		t.Fatal(err)
	}
	if n := jobCount(b, tok); n != 5 {
		t.Errorf("%d jobs after a tick of a deleted schedule, want 5", n)
	}
}

func TestScheduleRequestsAreValidated(t *testing.T) {
	t.Parallel()
	b := awstest.Setup(t, nil, stack.Options{DisablePollers: true})
	tok := b.Token("u-sched-bad", "user", "free")
	other := b.Token("u-sched-other", "user", "free")
	for _, tc := range []struct {
		name  string
		body  map[string]any
		field string
	}{
		{"no name", map[string]any{"rate": "5m", "job": template}, "name"},
		{"both", map[string]any{"name": "x", "rate": "5m", "cron": "* * * * *", "job": template}, "cron"},
		{"neither", map[string]any{"name": "x", "job": template}, "cron"},
		{"bad cron", map[string]any{"name": "x", "cron": "*/15 * * *", "job": template}, "cron"},
		{"short rate", map[string]any{"name": "x", "rate": "30s", "job": template}, "rate"},
		{"bad zone", map[string]any{"name": "x", "rate": "5m", "timezone": "Mars/Olympus", "job": template}, "timezone"},
		{"bad job", map[string]any{"name": "x", "rate": "5m", "job": map[string]any{"type": "http", "params": map[string]any{"url": "gopher://x"}}}, "job.params.url"},
		{"unknown kind", map[string]any{"name": "x", "rate": "5m", "job": map[string]any{"type": "nope"}}, "job.type"},
		{"scheduleAt", map[string]any{"name": "x", "rate": "5m", "job": map[string]any{"type": "http", "params": map[string]any{"url": "http://127.0.0.1/x"}, "scheduleAt": "2030-01-01T00:00:00Z"}}, "job.scheduleAt"},
	} {
		r := b.Call("POST", "/v1/schedules", tok, tc.body)
		if r.Status != 400 {
			t.Errorf("%s: status %d (%s), want 400", tc.name, r.Status, r.Raw)
			continue
		}
		if e, _ := r.Body["error"].(map[string]any); e == nil || e["field"] != tc.field {
			t.Errorf("%s: error %v, want field %q", tc.name, r.Body["error"], tc.field)
		}
	}
	sc := b.Must(b.Call("POST", "/v1/schedules", tok, map[string]any{"name": "weekday mornings", "cron": "30 8 * * 1-5", "timezone": "Europe/Moscow", "job": template}), 201)
	id := sc.Body["id"].(string)
	list := b.Must(b.Call("GET", "/v1/schedules", tok, nil), 200)
	if n := len(list.Body["schedules"].([]any)); n != 1 {
		t.Errorf("list holds %d schedules, want 1", n)
	}
	// Another user's schedule does not exist for them; unknown ids are 404.
	for _, path := range []string{"/v1/schedules/" + id, "/v1/schedules/sch_aaaaaaaaaaaaaaaaaaaaaaaaaa", "/v1/schedules/nonsense"} {
		b.Must(b.Call("GET", path, other, nil), 404)
	}
	b.Must(b.Call("POST", "/v1/schedules/"+id+"/pause", other, nil), 404)
	b.Must(b.Call("DELETE", "/v1/schedules/"+id, other, nil), 404)
	if n := len(b.Must(b.Call("GET", "/v1/schedules", other, nil), 200).Body["schedules"].([]any)); n != 0 {
		t.Errorf("another user lists %d schedules, want 0", n)
	}
	paused := b.Must(b.Call("POST", "/v1/schedules/"+id+"/pause", tok, nil), 200)
	if paused.Body["status"] != "paused" || paused.Body["nextRunAt"] != nil {
		t.Errorf("paused: %s", paused.Raw)
	}
	// A service token reads but does not write.
	svc := b.Token("monitor", "service", "free")
	b.Must(b.Call("POST", "/v1/schedules", svc, map[string]any{"name": "x", "rate": "5m", "job": template}), 403)
}
