package main

import (
	"context"
	"encoding/json"
	"io"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/conveyor/conveyor/localstack/awstest"
	"github.com/conveyor/conveyor/localstack/stack"
)

// localCLI is a real local stack and the CLI pointed at it through an env
// file, as `make run` leaves it.
type localCLI struct {
	b       *awstest.Bundle
	envFile string
	home    map[string]string
}

func newLocalCLI(t *testing.T, opts stack.Options) *localCLI {
	t.Helper()
	b := awstest.Setup(t, nil, opts)
	dir := t.TempDir()
	envFile := filepath.Join(dir, "env")
	if err := b.Stack.WriteEnv(envFile); err != nil {
		t.Fatal(err)
	}
	return &localCLI{b: b, envFile: envFile, home: map[string]string{"HOME": dir, "XDG_CONFIG_HOME": dir}}
}

func (l *localCLI) run(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	return runMain(t, l.home, append(args, "--env-file", l.envFile)...)
}

// runTo runs the CLI against the local stack, writing to stdout and
// stderr as it goes.
func (l *localCLI) runTo(ctx context.Context, stdout, stderr io.Writer, args ...string) int {
	return testCLI(l.home, stdout, stderr, false).main(ctx, append(args, "--env-file", l.envFile))
}

// TestDeveloperCommandsOnTheLocalStack: jobs submit (a file published, an
// http job), events tail (user and admin, resumed by Last-Event-ID),
// schedules, webhooks, and bulk stop skipping only the bad ids.
func TestDeveloperCommandsOnTheLocalStack(t *testing.T) {
	t.Parallel()
	l := newLocalCLI(t, stack.Options{})
	// The CLI's local user has a connected account, as the Try-it block's.
	l.b.Connect(l.b.Token(localUser, "admin", "pro"))

	// jobs submit --file: signed, PUT, confirmed by the S3 event, submitted.
	out, stderr, code := l.run(t, "jobs", "submit", "--file", "../../docs/cat.png", "--title", "A cat", "--tag", "cats", "--wait", "60s", "--json")
	var published struct {
		ID, Status string
		Items      []struct{ UploadID string }
	}
	if err := json.Unmarshal([]byte(out), &published); code != 0 || err != nil || published.Status != "succeeded" || len(published.Items) != 1 {
		t.Fatalf("submit --file: exit %d %v\n%s\n%s", code, err, out, stderr)
	}

	// events tail --job: the finished job's stream, replayed from its first
	// event, ends by itself; resumed after an event, it starts after it.
	out, stderr, code = l.run(t, "events", "tail", "--job", published.ID, "--json", "--last-event-id", "0")
	var evs []struct{ ID, Type string }
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		var e struct{ ID, Type string }
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			t.Fatalf("not JSON: %q", line)
		}
		evs = append(evs, e)
	}
	if code != 0 || len(evs) < 3 || evs[0].Type != "snapshot" || evs[len(evs)-1].Type != "job.succeeded" {
		t.Fatalf("tail --job: exit %d %q %v", code, stderr, evs)
	}
	out, _, code = l.run(t, "events", "tail", "--job", published.ID, "--json", "--last-event-id", evs[1].ID)
	if code != 0 || strings.Contains(out, `"id":"`+evs[1].ID+`"`) || !strings.Contains(out, `"id":"`+evs[2].ID+`"`) {
		t.Errorf("tail --last-event-id %s:\n%s", evs[1].ID, out)
	}

	// jobs submit --http-url: followed live on the user's and the admin's
	// streams; then one scheduled in an hour, to stop.
	streamed := func(admin bool) (chan string, *awstest.Buffer) {
		ch, out := make(chan string, 1), &awstest.Buffer{}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		args := []string{"events", "tail", "--count", "1"}
		if admin {
			args = append(args, "--admin")
		}
		go func() {
			defer cancel()
			var stderr strings.Builder
			l.runTo(ctx, out, &stderr, args...)
			ch <- out.String() + stderr.String()
		}()
		return ch, out
	}
	user, userOut := streamed(false)
	admin, adminOut := streamed(true)
	// Both streams are open once each printed its snapshot: the job
	// submitted next is news to both.
	l.b.Eventually(func() bool {
		return strings.HasPrefix(userOut.String(), "snapshot") && strings.HasPrefix(adminOut.String(), "snapshot")
	}, "the streams did not open")
	out, stderr, code = l.run(t, "jobs", "submit", "--http-url", l.b.Stack.SimulatorURL+"/_sim/stats", "--method", "GET", "--json")
	var now struct{ ID, Status string }
	if err := json.Unmarshal([]byte(out), &now); code != 0 || err != nil || now.Status != "queued" {
		t.Fatalf("submit --http-url: exit %d %v\n%s\n%s", code, err, out, stderr)
	}
	for name, ch := range map[string]chan string{"user": user, "admin": admin} {
		// The job's first event on the stream, live: job.enqueued.
		got := <-ch
		if !strings.HasPrefix(got, "snapshot") || !strings.Contains(got, "job.enqueued") || !strings.Contains(got, now.ID) {
			t.Errorf("%s stream:\n%s", name, got)
		}
	}
	at := time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
	out, stderr, code = l.run(t, "jobs", "submit", "--http-url", l.b.Stack.SimulatorURL+"/_sim/stats", "--method", "GET", "--schedule-at", at, "--json")
	var scheduled struct{ ID, Status string }
	if err := json.Unmarshal([]byte(out), &scheduled); code != 0 || err != nil || scheduled.Status != "scheduled" {
		t.Fatalf("submit --schedule-at: exit %d %v\n%s\n%s", code, err, out, stderr)
	}

	// jobs stop: the good id stopped, the bad ones skipped each with its reason.
	out, _, code = l.run(t, "jobs", "stop", scheduled.ID, "job_nonexistent", "job_aaaaaaaaaaaaaaaaaaaaaaaaaa", published.ID)
	out = strings.Join(strings.Fields(strings.ReplaceAll(out, "\n", " | ")), " ")
	for _, want := range []string{"stopped " + scheduled.ID, "job_nonexistent not a job id", "job_aaaaaaaaaaaaaaaaaaaaaaaaaa not found", published.ID + " job is succeeded", "local: 1 stopped, 3 skipped"} {
		if !strings.Contains(out, want) {
			t.Errorf("jobs stop: no %q in\n%s", want, out)
		}
	}
	if code != exitFailure {
		t.Errorf("jobs stop with skipped ids: exit %d", code)
	}

	// schedules: list, pause, resume, delete.
	tok := l.b.Token(localUser, "admin", "pro")
	sch := l.b.Must(l.b.Call("POST", "/v1/schedules", tok, map[string]any{"name": "nightly", "cron": "0 3 * * *", "timezone": "Europe/Moscow",
		"job": map[string]any{"type": "http", "params": map[string]any{"method": "GET", "url": l.b.Stack.SimulatorURL + "/_sim/stats"}}}), 201).Body["id"].(string)
	for _, step := range []struct {
		args []string
		want string
	}{
		{[]string{"schedules", "list"}, sch + " nightly active cron 0 3 * * * Europe/Moscow"},
		{[]string{"schedules", "pause", sch}, sch + " nightly paused"},
		{[]string{"schedules", "resume", sch}, sch + " nightly active"},
		{[]string{"schedules", "delete", sch}, "local: schedule " + sch + " deleted"},
	} {
		out, stderr, code := l.run(t, step.args...)
		out = strings.Join(strings.Fields(out), " ")
		if code != 0 || !strings.Contains(out, step.want) {
			t.Errorf("%v: exit %d, no %q in\n%s%s", step.args, code, step.want, out, stderr)
		}
	}

	// webhooks: secret, add, list, disable, redeliver, enable, delete.
	out, _, code = l.run(t, "webhooks", "secret")
	if code != 0 || !strings.HasPrefix(out, "whsec_") {
		t.Errorf("webhooks secret: %d %q", code, out)
	}
	out, stderr, code = l.run(t, "webhooks", "add", "--url", "http://127.0.0.1:9/hook", "--event", "job.failed", "--json")
	var ep struct{ ID string }
	if err := json.Unmarshal([]byte(out), &ep); code != 0 || err != nil || ep.ID == "" {
		t.Fatalf("webhooks add: %d %v %s %s", code, err, out, stderr)
	}
	if out, _, _ = l.run(t, "webhooks", "list"); !strings.Contains(strings.Join(strings.Fields(out), " "), ep.ID+" http://127.0.0.1:9/hook job.failed") {
		t.Errorf("webhooks list:\n%s", out)
	}
	if out, _, code = l.run(t, "webhooks", "disable", ep.ID); code != 0 || !strings.Contains(out, ep.ID+" disabled") {
		t.Errorf("webhooks disable: %d %s", code, out)
	}
	if _, stderr, code = l.run(t, "webhooks", "redeliver", ep.ID, "--since", "1h"); code == 0 || !strings.Contains(stderr, "disabled") {
		t.Errorf("webhooks redeliver to a disabled endpoint: %d %s, want a refusal", code, stderr)
	}
	if out, _, code = l.run(t, "webhooks", "enable", ep.ID); code != 0 || !strings.Contains(out, ep.ID+" enabled") {
		t.Errorf("webhooks enable: %d %s", code, out)
	}
	if out, _, code = l.run(t, "webhooks", "redeliver", ep.ID, "--since", "1h"); code != 0 || !strings.Contains(out, "0 deliveries to "+ep.ID+" queued again") {
		t.Errorf("webhooks redeliver --since (nothing failed): %d %s", code, out)
	}
	if _, _, code = l.run(t, "webhooks", "redeliver", ep.ID); code == 0 {
		t.Errorf("webhooks redeliver with neither --delivery nor --since: exit 0")
	}
	if out, _, code = l.run(t, "webhooks", "delete", ep.ID); code != 0 {
		t.Errorf("webhooks delete: %d %s", code, out)
	}
	if out, _, _ = l.run(t, "webhooks", "list"); strings.Contains(out, ep.ID) {
		t.Errorf("deleted, still listed:\n%s", out)
	}
}
