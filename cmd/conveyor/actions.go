package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/conveyor/conveyor/internal/admin"
	"github.com/conveyor/conveyor/internal/apiclient"
	jobids "github.com/conveyor/conveyor/internal/ids"
)

// chunk is how many job ids go in one bulk request (the API's limit).
const chunk = admin.MaxBulk

// jobsCmd holds the job commands: the inspector's reads and the bulk actions.
func (c *cli) jobsCmd() *cobra.Command {
	cmd := group("jobs", "Find, inspect, restart and stop jobs across users")
	cmd.AddCommand(c.jobsListCmd(), c.jobsGetCmd(), c.jobsOrphansCmd(), c.jobsActionCmd("restart"), c.jobsActionCmd("stop"), c.jobsSubmitCmd())
	return cmd
}

// jobsActionCmd restarts or stops jobs in bulk (restart: or one item).
func (c *cli) jobsActionCmd(verb string) *cobra.Command {
	var (
		item   string
		asJSON bool
		o      *common
		f      admin.Filter
		limit  int
		all    bool
		dry    bool
	)
	short := map[string]string{"restart": "Restart jobs (failed, cancelled, stale), or one item of a job", "stop": "Stop active jobs (outputs kept, error stopped)"}[verb]
	cmd := &cobra.Command{
		Use:   verb + " <jobId>... | --status S [--tier T --error-code C --type K --owner U] [--limit N | --all] [--dry-run]",
		Short: short,
		Args:  args(cobra.ArbitraryArgs),
		RunE: func(cmd *cobra.Command, ids []string) error {
			byFilter := f != (admin.Filter{})
			switch {
			case byFilter && (len(ids) > 0 || item != ""):
				return usagef("give job ids or a filter (--status …), not both")
			case !byFilter && len(ids) == 0:
				return usagef("give job ids, or a filter: conveyor jobs %s --status %s [--tier …] [--dry-run]", verb, map[string]string{"restart": "failed", "stop": "queued"}[verb])
			case !byFilter && (dry || all || limit != 0):
				return usagef("--dry-run, --limit and --all go with a filter (--status …)")
			case all && limit != 0:
				return usagef("--all or --limit, not both")
			case limit < 0 || limit > admin.MaxBulk:
				return usagef("--limit takes 1 to %d", admin.MaxBulk)
			}
			t, err := c.one(o)
			if err != nil {
				return err
			}
			if byFilter {
				return c.bulkMatching(cmd.Context(), t, verb, f, limit, all, dry, asJSON)
			}
			if item != "" {
				if len(ids) != 1 {
					return usagef("--item restarts one item of one job: conveyor jobs restart <jobId> --item <itemId>")
				}
				return c.restartItem(cmd.Context(), t, ids[0], item, asJSON)
			}
			return c.bulk(cmd.Context(), t, verb, ids, asJSON)
		},
	}
	o = c.addCommon(cmd, "the environment (required when several are configured)")
	if verb == "restart" {
		cmd.Flags().StringVar(&item, "item", "", "restart only this item of the one job given")
	}
	statuses := map[string]string{"restart": "failed, cancelled or stale", "stop": "scheduled, queued or running"}[verb]
	cmd.Flags().StringVar(&f.Status, "status", "", "act on the jobs in this status ("+statuses+"), found by the inspector's indexes")
	cmd.Flags().StringVar(&f.Tier, "tier", "", "with --status: only this tier")
	cmd.Flags().StringVar(&f.ErrorCode, "error-code", "", "with --status: only jobs whose error has this code")
	cmd.Flags().StringVar(&f.Type, "type", "", "with --status: only this kind of job")
	cmd.Flags().StringVar(&f.Owner, "owner", "", "with --status: only this user's jobs")
	cmd.Flags().IntVar(&limit, "limit", 0, fmt.Sprintf("with --status: act on at most this many, newest first, in one call (1–%d); without it every match, more than the API's sync max as an operation followed to its end", admin.MaxBulk))
	cmd.Flags().BoolVar(&all, "all", false, "with --status: call again until nothing matches (an API that answers at most its limit per call)")
	cmd.Flags().BoolVar(&dry, "dry-run", false, "with --status: change nothing; print how many match and the ids a call would take")
	json := map[string]string{"restart": `print {"environment","restarted":[…],"skipped":[{"id","reason"}]} (with --item: the job; when the API runs a large filter as an operation: the finished operation)`,
		"stop": `print {"environment","stopped":[…],"skipped":[{"id","reason"}]} (when the API runs a large filter as an operation: the finished operation)`}[verb]
	cmd.Flags().BoolVar(&asJSON, "json", false, json)
	return cmd
}

func (c *cli) restartItem(ctx context.Context, t target, jobID, item string, asJSON bool) error {
	j, err := c.api(t).RestartItem(ctx, jobID, item)
	if err != nil {
		return fmt.Errorf("%s: %w", t.name, err)
	}
	if asJSON {
		return c.printJSON(j)
	}
	_, err = fmt.Fprintf(c.stdout, "restarted item %s of %s: job %s\n", item, j.ID, j.Status)
	return err
}

// bulk restarts or stops ids by chunks of the API's limit. Only the bad
// ids are skipped, each with its reason: an id that is not a job id is not
// sent, and an id the API refuses by name (400 on jobIds[i]) is taken out
// of its chunk, which is sent again without it.
func (c *cli) bulk(ctx context.Context, t target, verb string, in []string, asJSON bool) error {
	bar := c.progress(verb, len(in))
	done := []string{}
	skipped := []admin.Skipped{}
	var ids []string
	for _, id := range in {
		switch {
		case !jobids.Valid(jobids.Job, id):
			skipped = append(skipped, admin.Skipped{ID: id, Reason: "not a job id (job_ and 26 letters and digits)"})
		case !slices.Contains(ids, id):
			ids = append(ids, id)
		}
	}
	var failed error
	for start := 0; start < len(ids) && failed == nil; start += chunk {
		part := slices.Clone(ids[start:min(start+chunk, len(ids))])
		for len(part) > 0 {
			got, sk, err := c.bulkCall(ctx, t, verb, part)
			if i, reason, ok := refusedID(err, len(part)); ok {
				skipped = append(skipped, admin.Skipped{ID: part[i], Reason: reason})
				part = slices.Delete(part, i, i+1)
				continue
			}
			if err != nil {
				failed = fmt.Errorf("%s: %w", t.name, friendly(err))
				for _, id := range append(part, ids[min(start+chunk, len(ids)):]...) {
					skipped = append(skipped, admin.Skipped{ID: id, Reason: "not sent: " + friendly(err).Error()})
				}
				break
			}
			done, skipped = append(done, got...), append(skipped, sk...)
			break
		}
		bar.set(min(start+chunk, len(ids)))
	}
	bar.finish()
	past := map[string]string{"restart": "restarted", "stop": "stopped"}[verb]
	if asJSON {
		if err := c.printJSON(map[string]any{"environment": t.name, past: done, "skipped": skipped}); err != nil {
			return err
		}
	} else {
		tw := tabwriter.NewWriter(c.stdout, 0, 0, 2, ' ', 0)
		for _, id := range done {
			fmt.Fprintf(tw, "%s\t%s\n", past, id)
		}
		for _, s := range skipped {
			fmt.Fprintf(tw, "skipped\t%s\t%s\n", s.ID, s.Reason)
		}
		tw.Flush()
		fmt.Fprintf(c.stdout, "%s: %d %s, %d skipped\n", t.name, len(done), past, len(skipped))
	}
	if failed != nil {
		return &exitError{code: exitFailure, msg: failed.Error()}
	}
	if len(skipped) > 0 {
		return errPartial
	}
	return nil
}

// bulkMatching restarts or stops the jobs a filter selects: one call of at
// most limit jobs, or with all, calls until nothing matches (a job acted on
// leaves the filter's status; one that is skipped twice stops the loop, so
// it never spins on a job the API keeps refusing). A dry run changes nothing
// and prints what matches.
func (c *cli) bulkMatching(ctx context.Context, t target, verb string, f admin.Filter, limit int, all, dry, asJSON bool) error {
	req := apiclient.BulkFilter{Filter: f, DryRun: dry}
	if limit > 0 {
		req.Limit = &limit
	}
	o, err := c.bulkCalls(ctx, t, verb, req, all, dry)
	if err != nil {
		return err
	}
	if o.op != nil {
		return c.followOperation(ctx, t, *o.op, asJSON)
	}
	return c.printBulk(t, verb, f, o, dry, asJSON)
}

// bulkOutcome is what a bulk action's calls did: the jobs acted on, the
// jobs skipped (each once) and the first call's selection.
type bulkOutcome struct {
	done    []string
	skipped []admin.Skipped
	first   *admin.Selection
	// op is the operation a call started instead (the filter matched more
	// than the API acts on inside a request): it works off every match in
	// the background.
	op *admin.Operation
}

// callBulk makes one restart (verb "restart") or stop call of req and
// returns the jobs it acted on, those it skipped and its selection, or
// the operation the call started instead.
func (c *cli) callBulk(ctx context.Context, t target, verb string, req apiclient.BulkFilter) ([]string, []admin.Skipped, *admin.Selection, *admin.Operation, error) {
	if verb == "restart" {
		r, op, err := c.api(t).RestartMatching(ctx, req)
		return r.Restarted, r.Skipped, r.Selection, op, err
	}
	r, op, err := c.api(t).StopMatching(ctx, req)
	return r.Stopped, r.Skipped, r.Selection, op, err
}

// bulkCalls makes one call of req or, with all and not dry, calls until
// every job that matched at the first call is dealt with, nothing matches,
// or a call neither acts on a job nor skips a new one (it never spins on a
// job the API keeps refusing); a bar shows their progress.
func (c *cli) bulkCalls(ctx context.Context, t target, verb string, req apiclient.BulkFilter, all, dry bool) (bulkOutcome, error) {
	var (
		o   bulkOutcome
		bar *bar
	)
	seen := map[string]bool{}
	for {
		got, sk, sel, op, err := c.callBulk(ctx, t, verb, req)
		if err != nil {
			if bar != nil {
				bar.finish()
			}
			return o, fmt.Errorf("%s: %w", t.name, friendly(err))
		}
		if op != nil {
			if bar != nil {
				bar.finish()
			}
			o.op = op
			return o, nil
		}
		if sel == nil {
			sel = &admin.Selection{}
		}
		if o.first == nil {
			o.first = sel
			if all && !dry {
				bar = c.progress(verb, sel.Matched)
			}
		}
		o.done = append(o.done, got...)
		again := false
		for _, s := range sk {
			if !seen[s.ID] {
				o.skipped = append(o.skipped, s)
				seen[s.ID] = true
				again = true
			}
		}
		if bar != nil {
			bar.set(len(o.done) + len(o.skipped))
		}
		// Every job that matched at the first call is dealt with: jobs
		// entering the status meanwhile wait for the next command.
		if dry || !all || sel.Matched == 0 || (len(got) == 0 && !again) || len(o.done)+len(o.skipped) >= o.first.Matched {
			break
		}
	}
	if bar != nil {
		bar.finish()
	}
	return o, nil
}

// printBulk prints a bulk action's outcome o, as JSON with asJSON: for a
// dry run what matches, else each job acted on or skipped and the counts.
// Skipped jobs make the outcome partial.
func (c *cli) printBulk(t target, verb string, f admin.Filter, o bulkOutcome, dry, asJSON bool) error {
	past := map[string]string{"restart": "restarted", "stop": "stopped"}[verb]
	first := o.first
	if asJSON {
		out := map[string]any{"environment": t.name, "filter": f, "matched": first.Matched, past: nonNil(o.done), "skipped": nonNilSkipped(o.skipped)}
		if dry {
			out = map[string]any{"environment": t.name, "filter": f, "dryRun": true, "matched": first.Matched, "limit": first.Limit, "jobIds": nonNil(first.JobIDs)}
		}
		return c.printJSON(out)
	}
	if dry {
		fmt.Fprintf(c.stdout, "%s: %d jobs match %s; a %s would take %d (limit %d), nothing changed:\n", t.name, first.Matched, f, verb, len(first.JobIDs), first.Limit)
		for _, id := range first.JobIDs {
			fmt.Fprintf(c.stdout, "  %s\n", id)
		}
		return nil
	}
	tw := tabwriter.NewWriter(c.stdout, 0, 0, 2, ' ', 0)
	for _, id := range o.done {
		fmt.Fprintf(tw, "%s\t%s\n", past, id)
	}
	for _, s := range o.skipped {
		fmt.Fprintf(tw, "skipped\t%s\t%s\n", s.ID, s.Reason)
	}
	tw.Flush()
	fmt.Fprintf(c.stdout, "%s: %d matched %s, %d %s, %d skipped\n", t.name, first.Matched, f, len(o.done), past, len(o.skipped))
	if len(o.skipped) > 0 {
		return errPartial
	}
	return nil
}

func nonNil(ids []string) []string {
	if ids == nil {
		return []string{}
	}
	return ids
}

func nonNilSkipped(s []admin.Skipped) []admin.Skipped {
	if s == nil {
		return []admin.Skipped{}
	}
	return s
}

// bulkCall sends one chunk.
func (c *cli) bulkCall(ctx context.Context, t target, verb string, part []string) ([]string, []admin.Skipped, error) {
	if verb == "restart" {
		r, err := c.api(t).RestartJobs(ctx, part)
		return r.Restarted, r.Skipped, err
	}
	r, err := c.api(t).StopJobs(ctx, part)
	return r.Stopped, r.Skipped, err
}

// refusedID reads a 400 that names one id of the request (field
// "jobIds[i]"): its index and the API's reason.
func refusedID(err error, n int) (int, string, bool) {
	var ae *apiclient.APIError
	if !errors.As(err, &ae) || ae.Status != http.StatusBadRequest {
		return 0, "", false
	}
	rest, ok := strings.CutPrefix(ae.Field, "jobIds[")
	if !ok {
		return 0, "", false
	}
	i, err2 := strconv.Atoi(strings.TrimSuffix(rest, "]"))
	if err2 != nil || i < 0 || i >= n {
		return 0, "", false
	}
	return i, strings.TrimPrefix(ae.Message, ae.Field+" "), true
}

// dlqCmd peeks into or redrives a tier's dead-letter queue.
func (c *cli) dlqCmd() *cobra.Command {
	cmd := group("dlq", "Peek into and redrive a tier's dead-letter queue")
	cmd.AddCommand(c.dlqPeekCmd(), c.dlqRedriveCmd())
	return cmd
}

func (c *cli) dlqPeekCmd() *cobra.Command {
	var (
		limit  int
		asJSON bool
		o      *common
	)
	cmd := &cobra.Command{
		Use:               "peek <tier>",
		Short:             "Show the messages of a tier's DLQ with their jobs' attempts and errors (they stay in the DLQ)",
		Args:              args(cobra.ExactArgs(1)),
		ValidArgsFunction: tierNames,
		RunE: func(cmd *cobra.Command, pos []string) error {
			t, err := c.one(o)
			if err != nil {
				return err
			}
			return c.dlqPeek(cmd.Context(), t, pos[0], limit, asJSON)
		},
	}
	o = c.addCommon(cmd, "the environment (required when several are configured)")
	cmd.Flags().IntVar(&limit, "limit", admin.PeekDefault, "how many messages")
	cmd.Flags().BoolVar(&asJSON, "json", false, `print {"messages":[…]} as the API answers`)
	return cmd
}

func (c *cli) dlqPeek(ctx context.Context, t target, tier string, limit int, asJSON bool) error {
	msgs, err := c.api(t).DLQPeek(ctx, tier, limit)
	if err != nil {
		return fmt.Errorf("%s: %w", t.name, err)
	}
	res := struct {
		Messages []admin.DLQMessage `json:"messages"`
	}{msgs}
	if asJSON {
		return c.printJSON(res)
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
	_, err = fmt.Fprintf(c.stdout, "%s %s DLQ: %d shown\n", t.name, tier, len(res.Messages))
	return err
}

func (c *cli) dlqRedriveCmd() *cobra.Command {
	var (
		batch  int
		task   bool
		asJSON bool
		o      *common
	)
	cmd := &cobra.Command{
		Use:   "redrive <tier> [jobId...]",
		Short: "Move a tier's DLQ (or only the given jobs) back to its queue",
		Long: `redrive moves the messages of a tier's DLQ back to the queue, re-arming failed
jobs: the given jobs only, or everything in steps of --batch messages (the
progress bar's step, drawn on stderr when it is a terminal), or with --task
everything in one request (an SQS move task in AWS).`,
		Args:              args(cobra.MinimumNArgs(1)),
		ValidArgsFunction: tierNames,
		RunE: func(cmd *cobra.Command, pos []string) error {
			if batch < 1 || batch > admin.RedriveDefault {
				return usagef("--batch must be between 1 and %d", admin.RedriveDefault)
			}
			t, err := c.one(o)
			if err != nil {
				return err
			}
			tier := pos[0]
			moved, err := c.redrive(cmd.Context(), t, tier, pos[1:], batch, task)
			if asJSON {
				if jerr := c.printJSON(map[string]any{"environment": t.name, "tier": tier, "moved": moved}); jerr != nil {
					return jerr
				}
			} else {
				fmt.Fprintf(c.stdout, "%s %s DLQ: %d moved back to the queue\n", t.name, tier, moved)
			}
			if err != nil {
				return &exitError{code: exitFailure, msg: fmt.Sprintf("%s: %v", t.name, err)}
			}
			return nil
		},
	}
	o = c.addCommon(cmd, "the environment (required when several are configured)")
	cmd.Flags().IntVar(&batch, "batch", 100, "messages per request (the progress bar's step)")
	cmd.Flags().BoolVar(&task, "task", false, "one request; in AWS an SQS move task moves everything")
	cmd.Flags().BoolVar(&asJSON, "json", false, `print {"environment","tier","moved"}`)
	return cmd
}

// redrive moves a DLQ back in steps, so the bar can show progress: by
// chunks of job ids when given, else batch messages per request until the
// DLQ is empty (or, with task, in one request).
func (c *cli) redrive(ctx context.Context, t target, tier string, ids []string, batch int, task bool) (int, error) {
	api := c.api(t)
	if task {
		res, err := api.DLQRedrive(ctx, tier, apiclient.RedriveRequest{})
		return res.Moved, err
	}
	if len(ids) > 0 {
		bar := c.progress("redrive", len(ids))
		moved := 0
		for start := 0; start < len(ids); start += chunk {
			part := ids[start:min(start+chunk, len(ids))]
			res, err := api.DLQRedrive(ctx, tier, apiclient.RedriveRequest{JobIDs: part})
			if err != nil {
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
	ov, err := api.Overview(ctx)
	if err != nil {
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
		res, err := api.DLQRedrive(ctx, tier, apiclient.RedriveRequest{Max: batch})
		if err != nil {
			return moved, err
		}
		moved += res.Moved
		bar.set(moved)
		if res.Moved < batch {
			return moved, nil
		}
	}
}

// tierCmd pauses or resumes a tier.
func (c *cli) tierCmd() *cobra.Command {
	cmd := group("tier", "Pause or resume a tier's processing (submissions are still accepted)")
	for _, verb := range []string{"pause", "resume"} {
		var (
			asJSON bool
			o      *common
		)
		sub := &cobra.Command{
			Use:               verb + " <tier>",
			Short:             strings.ToUpper(verb[:1]) + verb[1:] + " a tier (high, medium, low, system)",
			Args:              args(cobra.ExactArgs(1)),
			ValidArgsFunction: tierNames,
			RunE: func(cmd *cobra.Command, pos []string) error {
				t, err := c.one(o)
				if err != nil {
					return err
				}
				set := c.api(t).PauseTier
				if verb == "resume" {
					set = c.api(t).ResumeTier
				}
				st, err := set(cmd.Context(), pos[0])
				if err != nil {
					return fmt.Errorf("%s: %w", t.name, err)
				}
				if asJSON {
					return c.printJSON(st)
				}
				state := "running"
				if st.Paused {
					state = "paused"
				}
				_, err = fmt.Fprintf(c.stdout, "%s: tier %s is %s\n", t.name, st.Tier, state)
				return err
			},
		}
		o = c.addCommon(sub, "the environment (required when several are configured)")
		sub.Flags().BoolVar(&asJSON, "json", false, `print {"tier","paused"}`)
		cmd.AddCommand(sub)
	}
	return cmd
}

// breakerCmd lists the breakers or resets one.
func (c *cli) breakerCmd() *cobra.Command {
	cmd := group("breaker", "List the circuit breakers or reset one", "breakers")
	var (
		listJSON bool
		lo       *common
	)
	list := &cobra.Command{
		Use:   "list",
		Short: "List every breaker with a record",
		Args:  args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			t, err := c.one(lo)
			if err != nil {
				return err
			}
			bs, err := c.api(t).Breakers(cmd.Context())
			if err != nil {
				return fmt.Errorf("%s: %w", t.name, err)
			}
			res := struct {
				Breakers []admin.BreakerView `json:"breakers"`
			}{bs}
			if listJSON {
				return c.printJSON(res)
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
		},
	}
	lo = c.addCommon(list, "the environment (required when several are configured)")
	list.Flags().BoolVar(&listJSON, "json", false, `print {"breakers":[…]} as the API answers`)

	var (
		resetJSON bool
		ro        *common
	)
	reset := &cobra.Command{
		Use:   "reset <key>",
		Short: "Close a breaker and forget its failures",
		Args:  args(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, pos []string) error {
			key := strings.TrimSpace(pos[0])
			if key == "" {
				return usagef("the breaker key is empty")
			}
			t, err := c.one(ro)
			if err != nil {
				return err
			}
			res, err := c.api(t).ResetBreaker(cmd.Context(), key)
			if err != nil {
				return fmt.Errorf("%s: %w", t.name, err)
			}
			if resetJSON {
				return c.printJSON(res)
			}
			_, err = fmt.Fprintf(c.stdout, "%s: breaker %s reset (closed)\n", t.name, key)
			return err
		},
	}
	ro = c.addCommon(reset, "the environment (required when several are configured)")
	reset.Flags().BoolVar(&resetJSON, "json", false, `print {"key","state"} as the API answers`)
	cmd.AddCommand(list, reset)
	return cmd
}
