package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/conveyor/conveyor/internal/apiclient"
	"github.com/conveyor/conveyor/internal/httpkind"
	"github.com/conveyor/conveyor/internal/job"
	"github.com/conveyor/conveyor/internal/publish"
	"github.com/conveyor/conveyor/internal/schedule"
	"github.com/conveyor/conveyor/internal/submission"
	"github.com/conveyor/conveyor/internal/uploads"
	"github.com/conveyor/conveyor/internal/webhook"
)

// The developer's commands act as a user: on the local stack the CLI mints
// a token for --as (default localUser); elsewhere the environment's token
// is the user's.

// addUser adds the common flags and --as to a command that acts as a user.
func (c *cli) addUser(cmd *cobra.Command) *common {
	o := c.addCommon(cmd, "the environment (required when several are configured)")
	cmd.Flags().StringVar(&o.as, "as", "", "on the local stack, the user to act as (default "+localUser+", the dashboard's)")
	return o
}

// Timings of jobs submit.
const (
	// confirmWaitDefault bounds the wait for the S3 event to confirm an
	// upload before the CLI confirms it on demand.
	confirmWaitDefault = 10 * time.Second
	pollInterval       = 200 * time.Millisecond
)

// submitFlags holds the flags of jobs submit.
type submitFlags struct {
	files                  []string
	title, description     string
	tags                   []string
	httpURL, method, body  string
	headers                []string
	expect                 []int
	timeout                time.Duration
	scheduleAt, webhookURL string
	wait                   time.Duration
	asJSON                 bool
}

// jobsSubmitCmd submits a job: a publish job of uploaded files, or an http
// job.
func (c *cli) jobsSubmitCmd() *cobra.Command {
	var (
		f submitFlags
		o *common
	)
	cmd := &cobra.Command{
		Use:   "submit (--file PATH… --title T | --http-url URL)",
		Short: "Submit a job: publish files (signed, uploaded, confirmed), or one HTTP request",
		Example: `  conveyor jobs submit --file cat.png --title "A cat" --tag cats --wait 1m
  conveyor jobs submit --http-url https://example.com/hook --method POST --body '{"a":1}' --header 'Content-Type: application/json'`,
		Args: args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			req, err := f.request()
			if err != nil {
				return err
			}
			t, err := c.one(o)
			if err != nil {
				return err
			}
			return c.submit(cmd.Context(), t, req, f)
		},
	}
	o = c.addUser(cmd)
	fs := cmd.Flags()
	fs.StringArrayVar(&f.files, "file", nil, "an image to publish (png, jpeg, gif, webp); repeat for several items")
	fs.StringVar(&f.title, "title", "", "publish: the title")
	fs.StringVar(&f.description, "description", "", "publish: the description")
	fs.StringArrayVar(&f.tags, "tag", nil, "publish: a tag (repeat)")
	fs.StringVar(&f.httpURL, "http-url", "", "http: the URL to call")
	fs.StringVar(&f.method, "method", "POST", "http: the method")
	fs.StringVar(&f.body, "body", "", "http: the request body")
	fs.StringArrayVar(&f.headers, "header", nil, "http: a header 'Name: value' (repeat)")
	fs.IntSliceVar(&f.expect, "expect-status", nil, "http: statuses that count as success (default any 2xx)")
	fs.DurationVar(&f.timeout, "timeout", 10*time.Second, "http: bound of the whole request")
	fs.StringVar(&f.scheduleAt, "schedule-at", "", "run at this time (RFC 3339)")
	fs.StringVar(&f.webhookURL, "webhook-url", "", "a URL told of the job's events (Standard Webhooks)")
	fs.DurationVar(&f.wait, "wait", 0, "wait up to this long for the job to finish (exit 1 unless it succeeds)")
	fs.BoolVar(&f.asJSON, "json", false, "print the job")
	_ = cmd.MarkFlagFilename("file", "png", "jpg", "jpeg", "gif", "webp")
	return cmd
}

// request checks the flags and builds the submission they describe: an
// http job, or a publish job whose items the files become once uploaded.
func (f submitFlags) request() (submission.SubmitRequest, error) {
	if (len(f.files) > 0) == (f.httpURL != "") {
		return submission.SubmitRequest{}, usagef("give --file (a publish job) or --http-url (an http job), not both")
	}
	req := submission.SubmitRequest{WebhookURL: f.webhookURL}
	if f.scheduleAt != "" {
		at, err := time.Parse(time.RFC3339, f.scheduleAt)
		if err != nil {
			return submission.SubmitRequest{}, usagef("--schedule-at must be an RFC 3339 time like 2026-01-02T15:04:05Z (got %q)", f.scheduleAt)
		}
		req.ScheduleAt = &at
	}
	if f.httpURL != "" {
		p, err := f.httpParams()
		if err != nil {
			return submission.SubmitRequest{}, err
		}
		raw, _ := json.Marshal(p)
		req.Type, req.Params = "http", raw
	} else if f.title == "" {
		return submission.SubmitRequest{}, usagef("a publish job needs --title")
	}
	return req, nil
}

// httpParams returns the params of the http job the flags describe; a
// header not written 'Name: value' is a usage error.
func (f submitFlags) httpParams() (httpkind.Params, error) {
	p := httpkind.Params{Method: f.method, URL: f.httpURL, Body: f.body, ExpectStatus: f.expect, TimeoutMs: int(f.timeout / time.Millisecond)}
	for _, h := range f.headers {
		k, v, ok := strings.Cut(h, ":")
		if !ok || strings.TrimSpace(k) == "" {
			return httpkind.Params{}, usagef("--header must be 'Name: value' (got %q)", h)
		}
		if p.Headers == nil {
			p.Headers = map[string]string{}
		}
		p.Headers[strings.TrimSpace(k)] = strings.TrimSpace(v)
	}
	return p, nil
}

// submit uploads the files (a publish job), submits req, waits for the job
// to finish when asked and prints it; errPartial when a waited-for job did
// not succeed.
func (c *cli) submit(ctx context.Context, t target, req submission.SubmitRequest, f submitFlags) error {
	api := c.api(t)
	if len(f.files) > 0 {
		var ids []string
		for _, file := range f.files {
			u, err := c.uploadFile(ctx, api, file)
			if err != nil {
				return fmt.Errorf("%s: uploading %s: %w", t.name, file, err)
			}
			ids = append(ids, u.ID)
		}
		req = withPublish(req, publish.Params{Title: f.title, Description: f.description, Tags: f.tags}, ids)
	}
	j, created, err := api.SubmitJob(ctx, req)
	if err != nil {
		return fmt.Errorf("%s: submitting: %w", t.name, err)
	}
	if !created {
		fmt.Fprintf(c.stderr, "an active job of yours has the same request: %s\n", j.ID)
	}
	if f.wait > 0 {
		wctx, cancel := context.WithTimeout(ctx, f.wait)
		j, err = api.WaitJob(wctx, j.ID, pollInterval, func(j job.Job) bool { return j.Status.Finished() })
		cancel()
		if err != nil {
			return fmt.Errorf("%s: waiting for %s: %w", t.name, j.ID, err)
		}
	}
	if f.asJSON {
		if err := c.printJSON(j); err != nil {
			return err
		}
	} else {
		c.printJobLine(j)
	}
	if f.wait > 0 && j.Status != job.Succeeded {
		return errPartial
	}
	return nil
}

// withPublish makes req a publish job of the uploads.
func withPublish(req submission.SubmitRequest, p publish.Params, uploadIDs []string) submission.SubmitRequest {
	pr := apiclient.PublishRequest(p, uploadIDs...)
	pr.ScheduleAt, pr.WebhookURL = req.ScheduleAt, req.WebhookURL
	return pr
}

// uploadFile signs a slot for the file, PUTs it and waits until the S3
// event confirms it (confirming it on demand after confirmWaitDefault).
func (c *cli) uploadFile(ctx context.Context, api *apiclient.Client, path string) (uploads.Upload, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return uploads.Upload{}, err
	}
	ct := mime.TypeByExtension(strings.ToLower(filepath.Ext(path)))
	if ct == "" || !strings.HasPrefix(ct, "image/") {
		ct = http.DetectContentType(data)
	}
	ct, _, _ = strings.Cut(ct, ";")
	s, err := api.SignUpload(ctx, uploads.SignRequest{Filename: filepath.Base(path), ContentType: ct, Size: int64(len(data))})
	if err != nil {
		return uploads.Upload{}, err
	}
	if err := api.PutObject(ctx, s, data); err != nil {
		return uploads.Upload{}, err
	}
	deadline := c.now().Add(confirmWaitDefault)
	for {
		u, err := api.GetUpload(ctx, s.UploadID)
		if err != nil {
			return uploads.Upload{}, err
		}
		if u.Status == "confirmed" {
			return u, nil
		}
		if u.Status != "pending" {
			return uploads.Upload{}, fmt.Errorf("upload %s is %s", u.ID, u.Status)
		}
		if c.now().After(deadline) {
			return api.ConfirmUpload(ctx, s.UploadID)
		}
		select {
		case <-ctx.Done():
			return uploads.Upload{}, ctx.Err()
		case <-time.After(pollInterval):
		}
	}
}

// printJobLine prints a job in one line, with why it waits when it does.
func (c *cli) printJobLine(j job.Job) {
	line := fmt.Sprintf("%s  %s  %s  tier %s  attempts %d/%d", j.ID, j.Type, j.Status, j.Tier, j.Attempts, j.MaxAttempts)
	if j.Error != nil {
		line += fmt.Sprintf("  error %s: %s", j.Error.Code, j.Error.Message)
	}
	fmt.Fprintln(c.stdout, line)
}

// eventsCmd holds `events tail`.
func (c *cli) eventsCmd() *cobra.Command {
	cmd := group("events", "Follow the live events of your jobs, or (admin) of every user")
	var (
		jobID, lastID string
		admin, asJSON bool
		count         int
		o             *common
	)
	tail := &cobra.Command{
		Use:   "tail",
		Short: "Follow an event stream (SSE), resuming after the last event seen when it drops",
		Long: `tail follows /v1/events (your jobs), /v1/jobs/{id}/events (--job), or with --admin
/v1/admin/events and /v1/admin/jobs/{id}/events (every user's). When the stream
drops it reconnects with Last-Event-ID, so no event is missed or repeated. A
job's stream ends once the job is finished (--last-event-id 0 replays its
whole log first). Pings are not printed.`,
		Args: args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			t, err := c.one(o)
			if err != nil {
				return err
			}
			return c.tail(cmd.Context(), t, apiclient.StreamRequest{JobID: jobID, Admin: admin, LastEventID: lastID}, count, asJSON)
		},
	}
	o = c.addUser(tail)
	fs := tail.Flags()
	fs.StringVar(&jobID, "job", "", "one job's events")
	fs.BoolVar(&admin, "admin", false, "the operators' streams: every user's events (admin or service token)")
	fs.StringVar(&lastID, "last-event-id", "", "resume after this event id")
	fs.IntVar(&count, "count", 0, "stop after this many events (snapshots not counted; 0: follow until interrupted)")
	fs.BoolVar(&asJSON, "json", false, `print one JSON object per event: {"id","type","data"}`)
	cmd.AddCommand(tail)
	return cmd
}

// reconnectDelay is the wait before reopening a dropped stream (a 429's
// Retry-After when longer).
const reconnectDelay = time.Second

func (c *cli) tail(ctx context.Context, t target, req apiclient.StreamRequest, count int, asJSON bool) error {
	// A stream lasts as long as it is followed: no client timeout, the
	// context ends it.
	h := *c.http
	h.Timeout = 0
	api := (&cli{http: &h}).api(t)
	seen := 0
	for {
		s, err := api.Events(ctx, req)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			var ae *apiclient.APIError
			if !errors.As(err, &ae) || !ae.Temporary() {
				return fmt.Errorf("%s: %w", t.name, err)
			}
			if !sleep(ctx, max(reconnectDelay, ae.RetryAfter)) {
				return nil
			}
			continue
		}
		ended := false
		for {
			e, err := s.Next()
			if err != nil {
				// A clean end of a job's stream: the server ends it once the
				// client has the job's final state. Anything else dropped:
				// reconnect after the last id seen.
				ended = req.JobID != "" && errors.Is(err, io.EOF)
				if !ended && ctx.Err() == nil {
					fmt.Fprintf(c.stderr, "the stream ended (%v); reconnecting after event %q\n", err, req.LastEventID)
				}
				break
			}
			if e.Type == "ping" || e.Type == "" {
				continue
			}
			if e.ID != "" && e.Type != "snapshot" {
				req.LastEventID = e.ID
			}
			c.printEvent(e, asJSON)
			if e.Type != "snapshot" {
				seen++
			}
			if count > 0 && seen >= count {
				s.Close()
				return nil
			}
		}
		s.Close()
		if ctx.Err() != nil || ended {
			return nil
		}
		if !sleep(ctx, reconnectDelay) {
			return nil
		}
	}
}

func sleep(ctx context.Context, d time.Duration) bool {
	select {
	case <-ctx.Done():
		return false
	case <-time.After(d):
		return true
	}
}

// printEvent prints an event: its JSON, or "time  type  job  status".
func (c *cli) printEvent(e apiclient.Event, asJSON bool) {
	if asJSON {
		raw, _ := json.Marshal(map[string]any{"id": e.ID, "type": e.Type, "data": json.RawMessage(orNull(e.Data))})
		fmt.Fprintln(c.stdout, string(raw))
		return
	}
	var body struct {
		At    string `json:"at"`
		JobID string `json:"jobId"`
		Job   struct {
			ID     string `json:"id"`
			Status string `json:"status"`
			Phase  string `json:"phase"`
		} `json:"job"`
		Jobs []json.RawMessage `json:"jobs"`
	}
	_ = json.Unmarshal([]byte(e.Data), &body)
	if e.Type == "snapshot" {
		fmt.Fprintf(c.stdout, "snapshot  %d bytes\n", len(e.Data))
		return
	}
	id := body.JobID
	if id == "" {
		id = body.Job.ID
	}
	fmt.Fprintf(c.stdout, "%s  %-20s  %s  %s  %s\n", body.At, e.Type, id, body.Job.Status, e.ID)
}

func orNull(s string) string {
	if strings.TrimSpace(s) == "" || !json.Valid([]byte(s)) {
		raw, _ := json.Marshal(s)
		return string(raw)
	}
	return s
}

// schedulesCmd lists, pauses, resumes and deletes recurring schedules.
// (The API has no "run now": a tick is only the schedule's own.)
func (c *cli) schedulesCmd() *cobra.Command {
	cmd := group("schedules", "List, pause, resume and delete your recurring schedules", "schedule")
	cmd.AddCommand(c.schedulesListCmd(), c.schedulesGetCmd(), c.schedulesPauseCmd(), c.schedulesResumeCmd(), c.schedulesDeleteCmd())
	return cmd
}

// schedulesListCmd lists your schedules with their next run, as a table
// or JSON.
func (c *cli) schedulesListCmd() *cobra.Command {
	var (
		listJSON bool
		lo       *common
	)
	list := &cobra.Command{
		Use:   "list",
		Short: "List your schedules with their next run",
		Args:  args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			t, err := c.one(lo)
			if err != nil {
				return err
			}
			ss, err := c.api(t).ListSchedules(cmd.Context())
			if err != nil {
				return fmt.Errorf("%s: %w", t.name, err)
			}
			if listJSON {
				return c.printJSON(map[string]any{"schedules": ss})
			}
			tw := tabwriter.NewWriter(c.stdout, 0, 0, 2, ' ', 0)
			fmt.Fprintln(tw, "SCHEDULE\tNAME\tSTATUS\tEXPRESSION\tTIMEZONE\tNEXT RUN")
			for _, s := range ss {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", s.ID, s.Name, s.Status, scheduleExpr(s), s.Timezone, timeOr(s.NextRunAt))
			}
			return tw.Flush()
		},
	}
	lo = c.addUser(list)
	list.Flags().BoolVar(&listJSON, "json", false, `print {"schedules":[…]}`)
	return list
}

// schedulesGetCmd shows a schedule with its last runs and their jobs.
func (c *cli) schedulesGetCmd() *cobra.Command {
	return c.scheduleActionCmd("get", "Show a schedule with its last runs and their jobs", (*apiclient.Client).GetSchedule)
}

// schedulesPauseCmd pauses a schedule and shows it.
func (c *cli) schedulesPauseCmd() *cobra.Command {
	return c.scheduleActionCmd("pause", "Pause a schedule (ticks while paused are not replayed)", (*apiclient.Client).PauseSchedule)
}

// schedulesResumeCmd resumes a paused schedule and shows it.
func (c *cli) schedulesResumeCmd() *cobra.Command {
	return c.scheduleActionCmd("resume", "Resume a paused schedule", (*apiclient.Client).ResumeSchedule)
}

// scheduleActionCmd is the subcommand verb <scheduleId>: it calls act on
// the schedule and shows the schedule act answers, as JSON with --json.
func (c *cli) scheduleActionCmd(verb, short string, act func(*apiclient.Client, context.Context, string) (schedule.Schedule, error)) *cobra.Command {
	var (
		asJSON bool
		o      *common
	)
	sub := &cobra.Command{
		Use:   verb + " <scheduleId>",
		Short: short,
		Args:  args(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, pos []string) error {
			t, err := c.one(o)
			if err != nil {
				return err
			}
			s, err := act(c.api(t), cmd.Context(), pos[0])
			if err != nil {
				return fmt.Errorf("%s: %w", t.name, err)
			}
			if asJSON {
				return c.printJSON(s)
			}
			c.printSchedule(s)
			return nil
		},
	}
	o = c.addUser(sub)
	sub.Flags().BoolVar(&asJSON, "json", false, "print the schedule as the API answers")
	return sub
}

// printSchedule prints s on a line, then each of its last runs as JSON.
func (c *cli) printSchedule(s schedule.Schedule) {
	fmt.Fprintf(c.stdout, "%s  %s  %s  %s  next run %s\n", s.ID, s.Name, s.Status, scheduleExpr(s), timeOr(s.NextRunAt))
	for _, r := range s.LastRuns {
		raw, _ := json.Marshal(r)
		fmt.Fprintf(c.stdout, "  run %s\n", raw)
	}
}

// schedulesDeleteCmd deletes a schedule.
func (c *cli) schedulesDeleteCmd() *cobra.Command {
	var (
		asJSON bool
		o      *common
	)
	del := &cobra.Command{
		Use:   "delete <scheduleId>",
		Short: "Delete a schedule",
		Args:  args(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, pos []string) error {
			t, err := c.one(o)
			if err != nil {
				return err
			}
			id := pos[0]
			if err := c.api(t).DeleteSchedule(cmd.Context(), id); err != nil {
				return fmt.Errorf("%s: %w", t.name, err)
			}
			if asJSON {
				return c.printJSON(map[string]any{"id": id, "deleted": true})
			}
			_, err = fmt.Fprintf(c.stdout, "%s: schedule %s deleted\n", t.name, id)
			return err
		},
	}
	o = c.addUser(del)
	del.Flags().BoolVar(&asJSON, "json", false, "print the schedule as the API answers")
	return del
}

func scheduleExpr(s schedule.Schedule) string {
	if s.Cron != "" {
		return "cron " + s.Cron
	}
	return "rate " + s.Rate
}

func timeOr(t *time.Time) string {
	if t == nil {
		return "-"
	}
	return t.UTC().Format(time.RFC3339)
}

// webhooksCmd manages your webhook endpoints and signing secret.
func (c *cli) webhooksCmd() *cobra.Command {
	cmd := group("webhooks", "List, add, enable, disable and delete your webhook endpoints; redeliver to one; show or rotate the signing secret", "webhook")
	cmd.AddCommand(c.webhooksListCmd(), c.webhooksAddCmd(), c.webhooksEnableCmd(true), c.webhooksEnableCmd(false),
		c.webhooksRedeliverCmd(), c.webhooksDeleteCmd(), c.webhooksSecretCmd())
	return cmd
}

// webhooksListCmd lists your webhook endpoints, as a table or JSON.
func (c *cli) webhooksListCmd() *cobra.Command {
	var (
		listJSON bool
		lo       *common
	)
	list := &cobra.Command{
		Use:   "list",
		Short: "List your webhook endpoints",
		Args:  args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			t, err := c.one(lo)
			if err != nil {
				return err
			}
			eps, err := c.api(t).ListWebhooks(cmd.Context())
			if err != nil {
				return fmt.Errorf("%s: %w", t.name, err)
			}
			if listJSON {
				return c.printJSON(map[string]any{"webhooks": eps})
			}
			tw := tabwriter.NewWriter(c.stdout, 0, 0, 2, ' ', 0)
			fmt.Fprintln(tw, "WEBHOOK\tURL\tEVENTS")
			for _, e := range eps {
				fmt.Fprintf(tw, "%s\t%s\t%s\n", e.ID, e.URL, strings.Join(e.Events, ","))
			}
			return tw.Flush()
		},
	}
	lo = c.addUser(list)
	list.Flags().BoolVar(&listJSON, "json", false, `print {"webhooks":[…]}`)
	return list
}

// webhooksAddCmd adds an endpoint for the given event types (by default
// every type that triggers webhooks).
func (c *cli) webhooksAddCmd() *cobra.Command {
	var (
		url     string
		events  []string
		addJSON bool
		ao      *common
	)
	add := &cobra.Command{
		Use:     "add --url URL [--event TYPE…]",
		Short:   "Add an endpoint told of your jobs' events",
		Example: `  conveyor webhooks add --url https://example.com/hooks --event job.succeeded --event job.failed`,
		Args:    args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if url == "" {
				return usagef("--url is required")
			}
			if len(events) == 0 {
				for ev := range job.WebhookEvents {
					events = append(events, ev)
				}
				slices.Sort(events)
			}
			t, err := c.one(ao)
			if err != nil {
				return err
			}
			ep, err := c.api(t).CreateWebhook(cmd.Context(), webhook.CreateRequest{URL: url, Events: events})
			if err != nil {
				return fmt.Errorf("%s: %w", t.name, err)
			}
			if addJSON {
				return c.printJSON(ep)
			}
			_, err = fmt.Fprintf(c.stdout, "%s: webhook %s added for %s\n", t.name, ep.ID, strings.Join(ep.Events, ","))
			return err
		},
	}
	ao = c.addUser(add)
	add.Flags().StringVar(&url, "url", "", "the endpoint (https; http only locally)")
	add.Flags().StringArrayVar(&events, "event", nil, "an event type (repeat; default every type that triggers webhooks)")
	add.Flags().BoolVar(&addJSON, "json", false, "print the endpoint")
	return add
}

// webhooksDeleteCmd deletes one of your endpoints.
func (c *cli) webhooksDeleteCmd() *cobra.Command {
	var do *common
	del := &cobra.Command{
		Use:   "delete <webhookId>",
		Short: "Delete an endpoint",
		Args:  args(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, pos []string) error {
			t, err := c.one(do)
			if err != nil {
				return err
			}
			if err := c.api(t).DeleteWebhook(cmd.Context(), pos[0]); err != nil {
				return fmt.Errorf("%s: %w", t.name, err)
			}
			_, err = fmt.Fprintf(c.stdout, "%s: webhook %s deleted\n", t.name, pos[0])
			return err
		},
	}
	do = c.addUser(del)
	return del
}

// webhooksEnableCmd enables (its failures forgotten, its circuit closed)
// or disables one of your endpoints.
func (c *cli) webhooksEnableCmd(enabled bool) *cobra.Command {
	verb, short := "enable", "Enable an endpoint: its failures forgotten, its circuit closed (redeliver makes what failed meanwhile again)"
	if !enabled {
		verb, short = "disable", "Disable an endpoint: its deliveries fail at once until it is enabled"
	}
	var eo *common
	cmd := &cobra.Command{
		Use:   verb + " <webhookId>",
		Short: short,
		Args:  args(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, pos []string) error {
			t, err := c.one(eo)
			if err != nil {
				return err
			}
			if _, err := c.api(t).UpdateWebhook(cmd.Context(), pos[0], webhook.UpdateRequest{Enabled: &enabled}); err != nil {
				return fmt.Errorf("%s: %w", t.name, err)
			}
			_, err = fmt.Fprintf(c.stdout, "%s: webhook %s %sd\n", t.name, pos[0], verb)
			return err
		},
	}
	eo = c.addUser(cmd)
	return cmd
}

// webhooksRedeliverCmd makes one delivery to an endpoint again
// (--delivery), or every one that failed since a time (--since, every page
// of 100 in turn, with progress on stderr).
func (c *cli) webhooksRedeliverCmd() *cobra.Command {
	var (
		delivery string
		since    time.Duration
		from     string
		ro       *common
	)
	cmd := &cobra.Command{
		Use:   "redeliver <webhookId> (--delivery dlv_… | --since 24h | --from RFC3339)",
		Short: "Make deliveries to an endpoint again: one (its webhook-id), or every one that failed since a time",
		Example: `  conveyor webhooks redeliver whe_… --since 6h
  conveyor webhooks redeliver whe_… --delivery dlv_…`,
		Args: args(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, pos []string) error {
			req := webhook.RedeliverRequest{Delivery: delivery}
			switch {
			case from != "" && since != 0:
				return usagef("--since and --from name the same time: give one")
			case from != "":
				at, err := time.Parse(time.RFC3339, from)
				if err != nil {
					return usagef("--from: %v", err)
				}
				req.Since = &at
			case since > 0:
				at := time.Now().Add(-since)
				req.Since = &at
			}
			if (req.Since == nil) == (delivery == "") {
				return usagef("give --delivery, or --since or --from")
			}
			t, err := c.one(ro)
			if err != nil {
				return err
			}
			total := 0
			for {
				res, err := c.api(t).RedeliverWebhook(cmd.Context(), pos[0], req)
				if err != nil {
					return fmt.Errorf("%s: %w", t.name, err)
				}
				total += res.Queued
				if res.NextCursor == nil {
					break
				}
				fmt.Fprintf(c.stderr, "%s: %d deliveries queued so far\n", t.name, total)
				req.Cursor = *res.NextCursor
			}
			_, err = fmt.Fprintf(c.stdout, "%s: %d deliveries to %s queued again\n", t.name, total, pos[0])
			return err
		},
	}
	ro = c.addUser(cmd)
	cmd.Flags().StringVar(&delivery, "delivery", "", "a delivery's webhook-id (dlv_…): made again whatever its outcome")
	cmd.Flags().DurationVar(&since, "since", 0, "every delivery that failed in this long before now")
	cmd.Flags().StringVar(&from, "from", "", "every delivery that failed at or after this time (RFC 3339)")
	return cmd
}

// webhooksSecretCmd prints your signing secret, or rotates it with --rotate.
func (c *cli) webhooksSecretCmd() *cobra.Command {
	var (
		rotate, secJSON bool
		so              *common
	)
	secret := &cobra.Command{
		Use:   "secret",
		Short: "Print your signing secret (whsec_…); --rotate makes a new one (the old one signs alongside for 24 h)",
		Args:  args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			t, err := c.one(so)
			if err != nil {
				return err
			}
			get := c.api(t).WebhookSecret
			if rotate {
				get = c.api(t).RotateWebhookSecret
			}
			sec, err := get(cmd.Context())
			if err != nil {
				return fmt.Errorf("%s: %w", t.name, err)
			}
			if secJSON {
				return c.printJSON(sec)
			}
			_, err = fmt.Fprintln(c.stdout, sec.Secret)
			return err
		},
	}
	so = c.addUser(secret)
	secret.Flags().BoolVar(&rotate, "rotate", false, "rotate the secret")
	secret.Flags().BoolVar(&secJSON, "json", false, `print {"secret","previousExpiresAt"}`)
	return secret
}
