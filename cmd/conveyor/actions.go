package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/conveyor/conveyor/internal/admin"
	"github.com/conveyor/conveyor/internal/job"
)

// chunk is how many job ids go in one bulk request (the API's limit).
const chunk = admin.MaxBulk

func (c *cli) flags(name string) (*flag.FlagSet, *common) {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(c.stderr)
	return fs, c.commonFlags(fs)
}

// jobs restarts or stops jobs in bulk, or restarts one item.
func (c *cli) jobs(ctx context.Context, verb string, args []string) error {
	if verb != "restart" && verb != "stop" {
		return fmt.Errorf("unknown jobs command %q (restart, stop)", verb)
	}
	fs, o := c.flags("jobs " + verb)
	item := fs.String("item", "", "restart only this item of the one job given")
	ids, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(ids) == 0 {
		return fmt.Errorf("usage: conveyor jobs %s <jobId…>", verb)
	}
	t, err := c.one(o)
	if err != nil {
		return err
	}
	if *item != "" {
		if verb != "restart" || len(ids) != 1 {
			return errors.New("--item restarts one item of one job: conveyor jobs restart <jobId> --item <itemId>")
		}
		var j job.Job
		path := "/v1/admin/jobs/" + url.PathEscape(ids[0]) + "/items/" + url.PathEscape(*item) + "/restart"
		if err := c.call(ctx, t, http.MethodPost, path, nil, &j); err != nil {
			return fmt.Errorf("%s: %w", t.name, err)
		}
		_, err := fmt.Fprintf(c.stdout, "restarted item %s of %s: job %s\n", *item, j.ID, j.Status)
		return err
	}
	bar := c.progress(verb, len(ids))
	var done []string
	var skipped []admin.Skipped
	var failed error
	for start := 0; start < len(ids); start += chunk {
		part := ids[start:min(start+chunk, len(ids))]
		body := map[string]any{"jobIds": part}
		var got []string
		var sk []admin.Skipped
		if verb == "restart" {
			var r admin.Restarted
			err = c.call(ctx, t, http.MethodPost, "/v1/admin/jobs/restart", body, &r)
			got, sk = r.Restarted, r.Skipped
		} else {
			var r admin.Stopped
			err = c.call(ctx, t, http.MethodPost, "/v1/admin/jobs/stop", body, &r)
			got, sk = r.Stopped, r.Skipped
		}
		if err != nil {
			failed = fmt.Errorf("%s: %w", t.name, err)
			for _, id := range ids[start:] {
				skipped = append(skipped, admin.Skipped{ID: id, Reason: "not sent: " + err.Error()})
			}
			break
		}
		done, skipped = append(done, got...), append(skipped, sk...)
		bar.set(start + len(part))
	}
	bar.finish()
	past := map[string]string{"restart": "restarted", "stop": "stopped"}[verb]
	tw := tabwriter.NewWriter(c.stdout, 0, 0, 2, ' ', 0)
	for _, id := range done {
		fmt.Fprintf(tw, "%s\t%s\n", past, id)
	}
	for _, s := range skipped {
		fmt.Fprintf(tw, "skipped\t%s\t%s\n", s.ID, s.Reason)
	}
	tw.Flush()
	fmt.Fprintf(c.stdout, "%s: %d %s, %d skipped\n", t.name, len(done), past, len(skipped))
	if failed != nil {
		return &exitError{code: 1, msg: failed.Error()}
	}
	if len(skipped) > 0 {
		return errPartial
	}
	return nil
}

// dlq peeks into or redrives a tier's dead-letter queue.
func (c *cli) dlq(ctx context.Context, verb string, args []string) error {
	fs, o := c.flags("dlq " + verb)
	limit := fs.Int("limit", admin.PeekDefault, "peek: how many messages")
	asJSON := fs.Bool("json", false, "peek: print JSON")
	batch := fs.Int("batch", 100, "redrive: messages per request (the progress bar's step)")
	task := fs.Bool("task", false, "redrive: one request; in AWS an SQS move task moves everything")
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) == 0 {
		return fmt.Errorf("usage: conveyor dlq %s <tier>", verb)
	}
	tier, ids := pos[0], pos[1:]
	t, err := c.one(o)
	if err != nil {
		return err
	}
	switch verb {
	case "peek":
		if len(ids) > 0 {
			return errors.New("usage: conveyor dlq peek <tier> [--limit N]")
		}
		var res struct {
			Messages []admin.DLQMessage `json:"messages"`
		}
		if err := c.call(ctx, t, http.MethodGet, "/v1/admin/dlq/"+url.PathEscape(tier)+"?limit="+strconv.Itoa(*limit), nil, &res); err != nil {
			return fmt.Errorf("%s: %w", t.name, err)
		}
		if *asJSON {
			enc := json.NewEncoder(c.stdout)
			enc.SetIndent("", "  ")
			return enc.Encode(res)
		}
		tw := tabwriter.NewWriter(c.stdout, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "JOB\tSTATUS\tATTEMPTS\tRECEIVES\tSENT AT\tERROR")
		for _, m := range res.Messages {
			sent, status, jobID, errText := "-", m.Status, m.JobID, "-"
			if m.SentAt != nil {
				sent = m.SentAt.UTC().Format(time.RFC3339)
			}
			if status == "" {
				status = "-"
			}
			if jobID == "" {
				jobID = "(" + m.MessageID + ")"
			}
			if m.Error != nil {
				errText = m.Error.Code + ": " + m.Error.Message
			}
			fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%s\t%s\n", jobID, status, m.Attempts, m.ReceiveCount, sent, errText)
		}
		tw.Flush()
		_, err := fmt.Fprintf(c.stdout, "%s %s DLQ: %d shown\n", t.name, tier, len(res.Messages))
		return err
	case "redrive":
		moved, err := c.redrive(ctx, t, tier, ids, *batch, *task)
		fmt.Fprintf(c.stdout, "%s %s DLQ: %d moved back to the queue\n", t.name, tier, moved)
		if err != nil {
			return &exitError{code: 1, msg: fmt.Sprintf("%s: %v", t.name, err)}
		}
		return nil
	default:
		return fmt.Errorf("unknown dlq command %q (peek, redrive)", verb)
	}
}

// redrive moves a DLQ back in steps, so the bar can show progress: by
// chunks of job ids when given, else batch messages per request until the
// DLQ is empty (or, with task, in one request).
func (c *cli) redrive(ctx context.Context, t target, tier string, ids []string, batch int, task bool) (int, error) {
	path := "/v1/admin/dlq/" + url.PathEscape(tier) + "/redrive"
	var res admin.Redriven
	if task {
		err := c.call(ctx, t, http.MethodPost, path, nil, &res)
		return res.Moved, err
	}
	if len(ids) > 0 {
		bar := c.progress("redrive", len(ids))
		moved := 0
		for start := 0; start < len(ids); start += chunk {
			part := ids[start:min(start+chunk, len(ids))]
			if err := c.call(ctx, t, http.MethodPost, path, map[string]any{"jobIds": part}, &res); err != nil {
				bar.finish()
				return moved, err
			}
			moved += res.Moved
			bar.set(start + len(part))
		}
		bar.finish()
		return moved, nil
	}
	if batch < 1 || batch > admin.RedriveDefault {
		return 0, fmt.Errorf("--batch must be between 1 and %d", admin.RedriveDefault)
	}
	// The depth now is the bar's end; messages arriving meanwhile move too.
	var ov admin.Overview
	if err := c.call(ctx, t, http.MethodGet, "/v1/admin/overview", nil, &ov); err != nil {
		return 0, err
	}
	st, ok := ov.Tiers[tier]
	if !ok {
		return 0, fmt.Errorf("no tier %q here", tier)
	}
	bar := c.progress("redrive", st.DLQ)
	defer bar.finish()
	moved := 0
	for {
		if err := c.call(ctx, t, http.MethodPost, path, map[string]any{"max": batch}, &res); err != nil {
			return moved, err
		}
		moved += res.Moved
		bar.set(moved)
		if res.Moved < batch {
			return moved, nil
		}
	}
}

// tier pauses or resumes a tier.
func (c *cli) tier(ctx context.Context, verb string, args []string) error {
	if verb != "pause" && verb != "resume" {
		return fmt.Errorf("unknown tier command %q (pause, resume)", verb)
	}
	fs, o := c.flags("tier " + verb)
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return fmt.Errorf("usage: conveyor tier %s <tier>", verb)
	}
	t, err := c.one(o)
	if err != nil {
		return err
	}
	var st admin.TierState
	if err := c.call(ctx, t, http.MethodPost, "/v1/admin/tiers/"+url.PathEscape(pos[0])+"/"+verb, nil, &st); err != nil {
		return fmt.Errorf("%s: %w", t.name, err)
	}
	state := "running"
	if st.Paused {
		state = "paused"
	}
	_, err = fmt.Fprintf(c.stdout, "%s: tier %s is %s\n", t.name, st.Tier, state)
	return err
}

// breaker lists the breakers or resets one.
func (c *cli) breaker(ctx context.Context, verb string, args []string) error {
	fs, o := c.flags("breaker " + verb)
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	t, err := c.one(o)
	if err != nil {
		return err
	}
	switch verb {
	case "list":
		var res struct {
			Breakers []admin.BreakerView `json:"breakers"`
		}
		if err := c.call(ctx, t, http.MethodGet, "/v1/admin/breakers", nil, &res); err != nil {
			return fmt.Errorf("%s: %w", t.name, err)
		}
		tw := tabwriter.NewWriter(c.stdout, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "BREAKER\tSTATE\tFAILURES\tOPEN UNTIL")
		for _, b := range res.Breakers {
			until := "-"
			if b.OpenUntil != nil {
				until = b.OpenUntil.UTC().Format(time.RFC3339)
			}
			fmt.Fprintf(tw, "%s\t%s\t%d\t%s\n", b.Key, b.State, b.Failures, until)
		}
		return tw.Flush()
	case "reset":
		if len(pos) != 1 || strings.TrimSpace(pos[0]) == "" {
			return errors.New("usage: conveyor breaker reset <key>")
		}
		if err := c.call(ctx, t, http.MethodPost, "/v1/admin/breakers/"+url.PathEscape(pos[0])+"/reset", nil, nil); err != nil {
			return fmt.Errorf("%s: %w", t.name, err)
		}
		_, err := fmt.Fprintf(c.stdout, "%s: breaker %s reset (closed)\n", t.name, pos[0])
		return err
	default:
		return fmt.Errorf("unknown breaker command %q (list, reset)", verb)
	}
}
