package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strconv"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/conveyor/conveyor/internal/admin"
	"github.com/conveyor/conveyor/internal/breaker"
	"github.com/conveyor/conveyor/internal/job"
)

// envOverview is one environment's overview, or why it has none.
type envOverview struct {
	Overview *admin.Overview `json:"overview,omitempty"`
	Error    string          `json:"error,omitempty"`
}

// overviewCmd prints the overview of every named environment at once.
func (c *cli) overviewCmd() *cobra.Command {
	var (
		asJSON bool
		watch  time.Duration
		o      *common
	)
	cmd := &cobra.Command{
		Use:   "overview",
		Short: "Tiers, jobs, orphans and breakers of every environment at once",
		Long: `overview asks every named environment (default: every configured one, or
local) in parallel and prints one table per concern. An environment that fails
prints its error and the others still print; the exit status is then 1.`,
		Example: `  conveyor overview --env local,staging,prod-ru --watch 5s
  conveyor overview --json`,
		Args: args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if watch < 0 || (watch > 0 && watch < 100*time.Millisecond) {
				return usagef("--watch must be at least 100ms")
			}
			targets, err := c.targets(o)
			if err != nil {
				return err
			}
			return c.overview(cmd.Context(), targets, asJSON, watch)
		},
	}
	o = c.addCommon(cmd, "environments, comma-separated (default: every configured one)")
	cmd.Flags().BoolVar(&asJSON, "json", false, `print {"environments":{name:{"overview"|"error"}}}`)
	cmd.Flags().DurationVar(&watch, "watch", 0, "print again every interval (like 5s) until interrupted")
	return cmd
}

func (c *cli) overview(ctx context.Context, targets []target, asJSON bool, watch time.Duration) error {
	for {
		res := c.fetchOverviews(ctx, targets)
		var buf bytes.Buffer
		if watch > 0 {
			fmt.Fprintf(&buf, "\033[H\033[2J%s — every %s, Ctrl-C to stop\n\n", c.now().UTC().Format(time.RFC3339), watch)
		}
		if asJSON {
			enc := json.NewEncoder(&buf)
			enc.SetIndent("", "  ")
			if err := enc.Encode(map[string]any{"environments": res}); err != nil {
				return err
			}
		} else {
			renderOverview(&buf, res)
		}
		if _, err := c.stdout.Write(buf.Bytes()); err != nil {
			return err
		}
		if watch == 0 {
			for _, r := range res {
				if r.Error != "" {
					return errPartial
				}
			}
			return nil
		}
		t := time.NewTimer(watch)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C:
		}
	}
}

// fetchOverviews asks every target at once.
func (c *cli) fetchOverviews(ctx context.Context, targets []target) map[string]envOverview {
	out := make(map[string]envOverview, len(targets))
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, t := range targets {
		wg.Go(func() {
			var r envOverview
			err := t.err
			if err == nil {
				var ov admin.Overview
				if ov, err = c.api(t).Overview(ctx); err == nil {
					r.Overview = &ov
				}
			}
			if err != nil {
				r.Error = friendly(err).Error()
			}
			mu.Lock()
			out[t.name] = r
			mu.Unlock()
		})
	}
	wg.Wait()
	return out
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// tierOrder lists the tiers highest first, then any others by name.
func tierOrder(m map[string]admin.TierStats) []string {
	var out []string
	for _, t := range job.Tiers {
		if _, ok := m[string(t)]; ok {
			out = append(out, string(t))
		}
	}
	for _, k := range sortedKeys(m) {
		if !slices.Contains(out, k) {
			out = append(out, k)
		}
	}
	return out
}

var jobColumns = []string{"scheduled", "queued", "running", "succeeded", "failed", "cancelled"}

// renderOverview prints the tables of the environments that answered —
// queues per tier, jobs per environment (with a total), breakers — then one
// line per environment that failed, with its error.
func renderOverview(w io.Writer, res map[string]envOverview) {
	envs := sortedKeys(res)
	renderTiers(w, envs, res)
	fmt.Fprintln(w)
	renderJobs(w, envs, res)
	renderBreakers(w, envs, res)
	renderBlocked(w, envs, res)
	renderErrors(w, envs, res)
}

// renderTiers prints the queues of every tier of the environments that
// answered, a row per environment and tier.
func renderTiers(w io.Writer, envs []string, res map[string]envOverview) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ENVIRONMENT\tTIER\tWAITING\tIN FLIGHT\tDELAYED\tDLQ\tPAUSED")
	for _, e := range envs {
		ov := res[e].Overview
		if ov == nil {
			continue
		}
		for _, t := range tierOrder(ov.Tiers) {
			st := ov.Tiers[t]
			paused := "-"
			if st.Paused {
				paused = "paused"
			}
			fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%d\t%s\n", e, t, st.Waiting, st.InFlight, st.Delayed, st.DLQ, paused)
		}
	}
	tw.Flush()
}

// renderJobs prints the jobs of every environment that answered, a row
// each, with a TOTAL row when more than one did.
func renderJobs(w io.Writer, envs []string, res map[string]envOverview) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ENVIRONMENT\tSCHEDULED\tQUEUED\tRUNNING\tSUCCEEDED\tFAILED\tCANCELLED\tORPHANS\tOK 24H\tFAILED 24H\tOPEN BREAKERS")
	total := make([]int, len(jobColumns)+4)
	ok := 0
	for _, e := range envs {
		ov := res[e].Overview
		if ov == nil {
			continue
		}
		ok++
		fmt.Fprint(tw, e)
		for i, n := range jobRow(ov, len(total)) {
			total[i] += n
			fmt.Fprintf(tw, "\t%d", n)
		}
		fmt.Fprintln(tw)
	}
	if ok > 1 {
		fmt.Fprint(tw, "TOTAL")
		for _, n := range total {
			fmt.Fprintf(tw, "\t%d", n)
		}
		fmt.Fprintln(tw)
	}
	tw.Flush()
}

// jobRow returns an environment's counts in the columns of renderJobs: jobs
// by status, orphans, the last 24 h's outcomes and the breakers not closed.
func jobRow(ov *admin.Overview, columns int) []int {
	row := make([]int, 0, columns)
	for _, st := range jobColumns {
		row = append(row, ov.Jobs[st])
	}
	open := 0
	for _, b := range ov.Breakers {
		if b.State != breaker.Closed {
			open++
		}
	}
	return append(row, ov.Orphans, ov.Stats.Succeeded, ov.Stats.Failed, open)
}

// renderBreakers prints the breakers of the environments that answered,
// after a blank line; nothing when there are none.
func renderBreakers(w io.Writer, envs []string, res map[string]envOverview) {
	var brk [][]string
	for _, e := range envs {
		if ov := res[e].Overview; ov != nil {
			for _, b := range ov.Breakers {
				until := "-"
				if b.OpenUntil != nil && b.State != breaker.Closed {
					until = b.OpenUntil.UTC().Format(time.RFC3339)
				}
				brk = append(brk, []string{e, b.Key, string(b.State), strconv.Itoa(b.Failures), until})
			}
		}
	}
	if len(brk) > 0 {
		fmt.Fprintln(w)
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "ENVIRONMENT\tBREAKER\tSTATE\tFAILURES\tOPEN UNTIL")
		for _, r := range brk {
			fmt.Fprintln(tw, joinTab(r))
		}
		tw.Flush()
	}
}

// renderBlocked prints the work that waits for an operator, said in words,
// a line each after a blank line; nothing when none waits.
func renderBlocked(w io.Writer, envs []string, res map[string]envOverview) {
	first := true
	for _, e := range envs {
		if ov := res[e].Overview; ov != nil {
			for _, b := range ov.Blocked {
				if first {
					fmt.Fprintln(w)
					first = false
				}
				fmt.Fprintf(w, "%s: %s\n", e, b)
			}
		}
	}
}

// renderErrors prints why each environment that failed did, a line each
// after a blank line; nothing when all answered.
func renderErrors(w io.Writer, envs []string, res map[string]envOverview) {
	first := true
	for _, e := range envs {
		if msg := res[e].Error; msg != "" {
			if first {
				fmt.Fprintln(w)
				first = false
			}
			fmt.Fprintf(w, "error: %s: %s\n", e, msg)
		}
	}
}

func joinTab(cells []string) string {
	var b bytes.Buffer
	for i, c := range cells {
		if i > 0 {
			b.WriteByte('\t')
		}
		b.WriteString(c)
	}
	return b.String()
}
