package main

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/conveyor/conveyor/internal/admin"
)

// operationsCmd holds the commands of the bulk operations: a bulk restart
// or stop by filter that matches more jobs than the API acts on inside a
// request runs in the background as an operation.
func (c *cli) operationsCmd() *cobra.Command {
	cmd := group("operations", "Follow bulk operations (large restarts and stops by filter, worked off in the background)")
	cmd.AddCommand(c.operationsGetCmd())
	return cmd
}

func (c *cli) operationsGetCmd() *cobra.Command {
	var (
		asJSON, wait bool
		o            *common
	)
	cmd := &cobra.Command{
		Use:   "get <operationId>",
		Short: "Show a bulk operation: status, matched, done, skipped by reason, progress",
		Args:  args(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, pos []string) error {
			t, err := c.one(o)
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			op, err := c.api(t).GetOperation(ctx, pos[0])
			if isNotFound(err) {
				return fmt.Errorf("%s: no operation %s", t.name, pos[0])
			}
			if err != nil {
				return fmt.Errorf("%s: %w", t.name, friendly(err))
			}
			if wait && !op.Finished() {
				return c.followOperation(ctx, t, op, asJSON)
			}
			return c.printOperation(t, op, asJSON)
		},
	}
	o = c.addCommon(cmd, "the environment (required when several are configured)")
	cmd.Flags().BoolVar(&wait, "wait", false, "wait until the operation has finished, its progress on stderr")
	cmd.Flags().BoolVar(&asJSON, "json", false, `print {"environment","id","action","filter","status","matched","done","skipped":{reason:n},"progress","error",…}`)
	return cmd
}

// followOperation waits for op to finish, its progress on stderr (a bar
// on a terminal), and prints it as it finished.
func (c *cli) followOperation(ctx context.Context, t target, op admin.Operation, asJSON bool) error {
	bar := c.progress(op.Action+" "+op.ID, op.Matched)
	final, err := c.api(t).WaitOperation(ctx, op.ID, c.opPoll, func(op admin.Operation) {
		bar.total = op.Matched
		bar.set(op.Done + skippedCount(op.Skipped))
	})
	bar.finish()
	if err != nil {
		return fmt.Errorf("%s: operation %s (conveyor operations get %s --wait goes on following it): %w", t.name, op.ID, op.ID, friendly(err))
	}
	return c.printOperation(t, final, asJSON)
}

// printOperation prints op, as JSON with asJSON. A failed operation fails
// the command; one that skipped jobs makes it partial.
func (c *cli) printOperation(t target, op admin.Operation, asJSON bool) error {
	if asJSON {
		if err := c.printJSON(struct {
			Environment string `json:"environment"`
			admin.Operation
		}{t.name, op}); err != nil {
			return err
		}
	} else {
		past := map[string]string{admin.ActionRestart: "restarted", admin.ActionStop: "stopped"}[op.Action]
		fmt.Fprintf(c.stdout, "%s: operation %s (%s %s): %s, %d%%: %d matched, %d %s, %d skipped\n",
			t.name, op.ID, op.Action, op.Filter, op.Status, op.Progress, op.Matched, op.Done, past, skippedCount(op.Skipped))
		for _, reason := range slices.Sorted(maps.Keys(op.Skipped)) {
			fmt.Fprintf(c.stdout, "  skipped %d: %s\n", op.Skipped[reason], reason)
		}
		if op.Error != nil {
			fmt.Fprintf(c.stdout, "  error: %s\n", *op.Error)
		}
	}
	switch {
	case op.Status == admin.OperationFailed:
		msg := "failed"
		if op.Error != nil {
			msg = strings.TrimSpace(*op.Error)
		}
		return &exitError{code: exitFailure, msg: fmt.Sprintf("%s: operation %s: %s", t.name, op.ID, msg)}
	case op.Finished() && skippedCount(op.Skipped) > 0:
		return errPartial
	}
	return nil
}

func skippedCount(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}
