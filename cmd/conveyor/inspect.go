package main

import (
	"context"
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/conveyor/conveyor/internal/admin"
	"github.com/conveyor/conveyor/internal/apiclient"
	"github.com/conveyor/conveyor/internal/job"
)

// The job inspector's routes (API.md, "Admin"). An environment whose API
// predates the inspector answers 404 on them; the commands say so.
const (
	inspectorJobs    = "/v1/admin/jobs"
	inspectorOrphans = "/v1/admin/orphans"
)

// errNoInspector explains a 404 on an inspector route.
func errNoInspector(t target, route string) error {
	return fmt.Errorf("%s: the API does not serve the job inspector (GET %s answered 404): this environment runs a version without it; upgrade it, or use `conveyor overview`", t.name, route)
}

func isNotFound(err error) bool { return apiclient.IsNotFound(err) }

func (c *cli) jobsListCmd() *cobra.Command {
	var (
		f      = map[string]*string{}
		limit  int
		cursor string
		asJSON bool
		o      *common
	)
	cmd := &cobra.Command{
		Use:   "list",
		Short: "Search jobs across users (status, tier, owner, type, error code, creation window)",
		Example: `  conveyor jobs list --status failed --tier low --created-from 2026-01-01T00:00:00Z
  conveyor jobs list --owner u-123 --error-code account_reconnect_required --json`,
		Args: args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if limit < 0 || limit > 200 {
				return usagef("--limit must be between 0 and 200")
			}
			v := func(name string) string { return strings.TrimSpace(*f[name]) }
			q := admin.SearchRequest{Status: v("status"), Tier: v("tier"), Owner: v("owner"), Type: v("type"),
				ErrorCode: v("errorCode"), CreatedFrom: v("createdFrom"), CreatedTo: v("createdTo"), Cursor: cursor}
			for _, name := range []string{"createdFrom", "createdTo"} {
				if v := v(name); v != "" {
					if _, err := time.Parse(time.RFC3339, v); err != nil {
						return usagef("--%s must be an RFC 3339 time like 2026-01-02T15:04:05Z (got %q)", flagName(name), v)
					}
				}
			}
			if cmd.Flags().Changed("limit") {
				q.Limit = &limit
			}
			t, err := c.one(o)
			if err != nil {
				return err
			}
			return c.jobsList(cmd.Context(), t, q, asJSON)
		},
	}
	o = c.addCommon(cmd, "the environment (required when several are configured)")
	fs := cmd.Flags()
	for _, fl := range []struct{ name, help string }{
		{"status", "scheduled, queued, running, succeeded, failed, cancelled or stale"},
		{"tier", "high, medium, low or system"},
		{"owner", "the user id"},
		{"type", "the job type (publish, http)"},
		{"errorCode", "the job error's code (attempts_exhausted, account_reconnect_required, …)"},
		{"createdFrom", "created at or after (RFC 3339)"},
		{"createdTo", "created before (RFC 3339)"},
	} {
		f[fl.name] = fs.String(flagName(fl.name), "", fl.help)
	}
	fs.IntVar(&limit, "limit", 50, "jobs per page (0: only the count)")
	fs.StringVar(&cursor, "cursor", "", "continue from a previous page's nextCursor")
	fs.BoolVar(&asJSON, "json", false, `print {"environment","jobs":[…],"nextCursor","total"} (total: X-Total-Count)`)
	_ = cmd.RegisterFlagCompletionFunc("status", cobra.FixedCompletions([]string{"scheduled", "queued", "running", "succeeded", "failed", "cancelled", "stale"}, cobra.ShellCompDirectiveNoFileComp))
	_ = cmd.RegisterFlagCompletionFunc("tier", func(cmd *cobra.Command, _ []string, s string) ([]string, cobra.ShellCompDirective) {
		return tierNames(cmd, nil, s)
	})
	return cmd
}

// flagName turns a query parameter (errorCode) into its flag (error-code).
func flagName(param string) string {
	var b strings.Builder
	for _, r := range param {
		if r >= 'A' && r <= 'Z' {
			b.WriteByte('-')
			r += 'a' - 'A'
		}
		b.WriteRune(r)
	}
	return b.String()
}

func (c *cli) jobsList(ctx context.Context, t target, q admin.SearchRequest, asJSON bool) error {
	res, err := c.api(t).SearchJobs(ctx, q)
	if isNotFound(err) {
		return errNoInspector(t, inspectorJobs)
	}
	if err != nil {
		return fmt.Errorf("%s: %w", t.name, err)
	}
	var total *int
	if res.Total >= 0 {
		total = &res.Total
	}
	var next *string
	if res.NextCursor != "" {
		next = &res.NextCursor
	}
	if asJSON {
		return c.printJSON(map[string]any{"environment": t.name, "jobs": res.Jobs, "nextCursor": next, "total": total})
	}
	tw := tabwriter.NewWriter(c.stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "JOB\tOWNER\tTYPE\tTIER\tSTATUS\tATTEMPTS\tUPDATED\tERROR")
	for _, j := range res.Jobs {
		errText := "-"
		if j.Error != nil {
			errText = j.Error.Code
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d/%d\t%s\t%s\n", j.ID, dash(j.Owner), j.Type, j.Tier, j.Status, j.Attempts, j.MaxAttempts, j.UpdatedAt.UTC().Format(time.RFC3339), errText)
	}
	tw.Flush()
	summary := fmt.Sprintf("%s: %d shown", t.name, len(res.Jobs))
	if total != nil {
		summary += fmt.Sprintf(" of %d", *total)
	}
	if res.NextCursor != "" {
		summary += "; more with --cursor " + res.NextCursor
	}
	_, err = fmt.Fprintln(c.stdout, summary)
	return err
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func (c *cli) jobsGetCmd() *cobra.Command {
	var (
		asJSON bool
		o      *common
	)
	cmd := &cobra.Command{
		Use:   "get <jobId>",
		Short: "Show any user's job in full: owner, phases, items, error",
		Args:  args(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, pos []string) error {
			t, err := c.one(o)
			if err != nil {
				return err
			}
			return c.jobsGet(cmd.Context(), t, pos[0], asJSON)
		},
	}
	o = c.addCommon(cmd, "the environment (required when several are configured)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the job as the API answers, with owner")
	return cmd
}

func (c *cli) jobsGet(ctx context.Context, t target, id string, asJSON bool) error {
	api := c.api(t)
	j, err := api.InspectJob(ctx, id)
	if isNotFound(err) {
		// An unknown job, or no inspector at all: the list route tells.
		countOnly := 0
		if _, perr := api.SearchJobs(ctx, admin.SearchRequest{Limit: &countOnly}); isNotFound(perr) {
			return errNoInspector(t, inspectorJobs+"/{id}")
		}
		return fmt.Errorf("%s: no job %s", t.name, id)
	}
	if err != nil {
		return fmt.Errorf("%s: %w", t.name, err)
	}
	if asJSON {
		return c.printJSON(j.InspectedJob) // the job and its owner; its events are not shown
	}
	ts := func(p *time.Time) string {
		if p == nil {
			return "-"
		}
		return p.UTC().Format(time.RFC3339)
	}
	tw := tabwriter.NewWriter(c.stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "job\t%s\n", j.ID)
	fmt.Fprintf(tw, "owner\t%s\n", dash(j.Owner))
	fmt.Fprintf(tw, "type\t%s\n", j.Type)
	fmt.Fprintf(tw, "tier\t%s\n", j.Tier)
	fmt.Fprintf(tw, "status\t%s (phase %s, %d%%)\n", j.Status, j.Phase, j.Progress)
	fmt.Fprintf(tw, "attempts\t%d/%d\n", j.Attempts, j.MaxAttempts)
	if j.Error != nil {
		fmt.Fprintf(tw, "error\t%s: %s (retryable: %t)\n", j.Error.Code, j.Error.Message, j.Error.Retryable)
	}
	if !j.Result.Empty() {
		fmt.Fprintf(tw, "result\t%s\n", resultLine(j.Result))
	}
	fmt.Fprintf(tw, "created\t%s\n", j.CreatedAt.UTC().Format(time.RFC3339))
	fmt.Fprintf(tw, "updated\t%s\n", j.UpdatedAt.UTC().Format(time.RFC3339))
	fmt.Fprintf(tw, "scheduled\t%s\n", ts(j.ScheduleAt))
	fmt.Fprintf(tw, "started\t%s\n", ts(j.StartedAt))
	fmt.Fprintf(tw, "finished\t%s\n", ts(j.FinishedAt))
	tw.Flush()
	if len(j.Phases) > 0 {
		fmt.Fprintln(c.stdout)
		tw = tabwriter.NewWriter(c.stdout, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "PHASE\tSTATUS\tPROGRESS\tSTARTED\tCOMPLETED\tERROR")
		for _, p := range j.Phases {
			errText := "-"
			if p.Error != nil {
				errText = p.Error.Code + ": " + p.Error.Message
			}
			fmt.Fprintf(tw, "%s\t%s\t%d%%\t%s\t%s\t%s\n", p.Name, p.Status, p.Progress, ts(p.StartedAt), ts(p.CompletedAt), errText)
		}
		tw.Flush()
	}
	if len(j.Items) > 0 {
		fmt.Fprintln(c.stdout)
		tw = tabwriter.NewWriter(c.stdout, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "ITEM\tUPLOAD\tSTATUS\tOUTPUT")
		for _, it := range j.Items {
			out := "-"
			if it.Output != nil {
				out = it.Output.DeviationID + " " + it.Output.URL
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", it.ID, it.UploadID, it.Status, out)
		}
		tw.Flush()
	}
	return nil
}

func (c *cli) jobsOrphansCmd() *cobra.Command {
	var (
		asJSON bool
		o      *common
	)
	cmd := &cobra.Command{
		Use:   "orphans",
		Short: "List the jobs nobody works on although they should be (queued unreceived, running without heartbeat)",
		Args:  args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			t, err := c.one(o)
			if err != nil {
				return err
			}
			orphans, err := c.api(t).Orphans(cmd.Context())
			if isNotFound(err) {
				return errNoInspector(t, inspectorOrphans)
			}
			if err != nil {
				return fmt.Errorf("%s: %w", t.name, err)
			}
			if orphans == nil {
				orphans = []admin.Orphan{}
			}
			if asJSON {
				return c.printJSON(map[string]any{"environment": t.name, "orphans": orphans})
			}
			tw := tabwriter.NewWriter(c.stdout, 0, 0, 2, ' ', 0)
			fmt.Fprintln(tw, "JOB\tOWNER\tTIER\tSTATUS\tSINCE\tREASON")
			for _, r := range orphans {
				since := "-"
				if !r.Since.IsZero() {
					since = r.Since.UTC().Format(time.RFC3339)
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", r.JobID, dash(r.Owner), r.Tier, r.Status, since, r.Reason)
			}
			tw.Flush()
			_, err = fmt.Fprintf(c.stdout, "%s: %d orphans\n", t.name, len(orphans))
			return err
		},
	}
	o = c.addCommon(cmd, "the environment (required when several are configured)")
	cmd.Flags().BoolVar(&asJSON, "json", false, `print {"environment","orphans":[{"jobId","owner","tier","status","since","reason"}]}`)
	return cmd
}

// resultLine renders a job's result on one line: a publication as its
// deviation id and URL, any other kind's result as its JSON (cut at 200
// bytes).
func resultLine(d job.Doc) string {
	var pub job.Output
	if err := d.Decode(&pub); err == nil && pub.DeviationID != "" {
		return pub.DeviationID + " " + pub.URL
	}
	s := string(d)
	if len(s) > 200 {
		s = s[:200] + "…"
	}
	return s
}
