package main

import (
	"encoding/json"
	"fmt"
	"runtime/debug"
	"slices"
	"strings"

	"github.com/conveyor/conveyor/internal/job"
	"github.com/spf13/cobra"
)

// version, commit and commitTime may be set at build time
// (-ldflags "-X main.version=v1.2.3 -X main.commit=… -X main.commitTime=…");
// without them the build information answers: the module's version (a
// pseudo-version from the VCS since Go 1.24) and the vcs.* settings.
var version, commit, commitTime = "", "", ""

// versionInfo is what `conveyor version` prints.
type versionInfo struct {
	// Version is the module's version: a tag, a pseudo-version
	// (v0.0.0-20260102150405-abcdef012345), or "(devel)".
	Version string `json:"version"`
	// Revision, Time and Modified are the VCS commit the binary was built
	// from, its time and whether the tree had uncommitted changes; empty
	// when the build carried no VCS information.
	Revision string `json:"revision"`
	Time     string `json:"time"`
	Modified bool   `json:"modified"`
	// Go is the toolchain that built it.
	Go string `json:"go"`
	// Note says why there is no revision, when there is none.
	Note string `json:"note"`
}

// noVCS explains a build without VCS information.
const noVCS = "built without VCS information (go run, -buildvcs=false, or outside a git checkout); `go build ./cmd/conveyor` in a clone stamps it"

// readVersion reads the build information (bi nil: none was embedded).
func readVersion(bi *debug.BuildInfo) versionInfo {
	v := versionInfo{Version: version, Revision: commit, Time: commitTime}
	if bi != nil {
		v.Go = bi.GoVersion
		if v.Version == "" {
			v.Version = bi.Main.Version
		}
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				if v.Revision == "" {
					v.Revision = s.Value
				}
			case "vcs.time":
				if v.Time == "" {
					v.Time = s.Value
				}
			case "vcs.modified":
				v.Modified = s.Value == "true"
			}
		}
	}
	if v.Version == "" {
		v.Version = "(devel)"
	}
	if v.Revision == "" {
		v.Note = noVCS
	}
	return v
}

// String is one line: "v0.0.0-2026…-abcdef012345+dirty (revision abcdef012345,
// 2026-01-02T15:04:05Z, modified) go1.26.8".
func (v versionInfo) String() string {
	var parts []string
	if v.Revision != "" {
		rev := v.Revision
		if len(rev) > 12 {
			rev = rev[:12]
		}
		parts = append(parts, "revision "+rev)
	}
	if v.Time != "" {
		parts = append(parts, v.Time)
	}
	if v.Modified {
		parts = append(parts, "modified")
	}
	if v.Note != "" {
		parts = append(parts, v.Note)
	}
	s := v.Version
	if len(parts) > 0 {
		s += " (" + strings.Join(parts, ", ") + ")"
	}
	if v.Go != "" {
		s += " " + v.Go
	}
	return s
}

// buildVersion is what --version and `version` print.
func buildVersion() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		bi = nil
	}
	return readVersion(bi).String()
}

// root builds the command tree. A group (jobs, dlq, tier, breaker) without
// a subcommand, an unknown subcommand, a bad flag or a wrong number of
// arguments are usage errors (exit 2); --help prints to stdout (exit 0).
func (c *cli) root() *cobra.Command {
	root := &cobra.Command{
		Use:   "conveyor",
		Short: "Operate Conveyor environments: overview, jobs, DLQs, tiers, breakers",
		Long: `conveyor operates one or several Conveyor environments.

Environments come from ~/.config/conveyor/environments.json (--config):
  {"environments": {"staging": {"url": "https://…", "tokenEnv": "CONVEYOR_TOKEN_STAGING"}, …}}
with exactly one of token, tokenEnv, tokenFile per environment. The environment
"local" needs no entry: its URL and secret come from .local/env (make run).

Exit status: 0 success, 1 failure (the API, or some jobs or environments),
2 usage error.`,
		Version:       buildVersion(),
		SilenceErrors: true,
		SilenceUsage:  true,
		Args:          rootArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return usagef("a command is required (overview, jobs, dlq, tier, breaker, token, completion)")
		},
	}
	root.SetOut(c.stdout) // before the completion command captures it
	root.SetErr(c.stderr)
	root.SetVersionTemplate("conveyor {{.Version}}\n")
	root.SetFlagErrorFunc(func(cmd *cobra.Command, err error) error {
		return &usageError{err: err, command: cmd.CommandPath()}
	})
	root.AddCommand(c.tokenCmd(), c.overviewCmd(), c.jobsCmd(), c.dlqCmd(), c.tierCmd(), c.breakerCmd(), c.operationsCmd(), c.eventsCmd(), c.schedulesCmd(), c.webhooksCmd(), c.versionCmd())
	root.AddCommand(c.relayCmd())
	// cobra's completion command (bash, zsh, fish, powershell), made now so
	// that a missing or unknown shell is a usage error like any group's.
	root.InitDefaultCompletionCmd()
	for _, sub := range root.Commands() {
		if sub.Name() == "completion" {
			sub.Args, sub.RunE = cobra.ArbitraryArgs, groupRunE
		}
	}
	return root
}

// rootArgs refuses an unknown command, with suggestions.
func rootArgs(cmd *cobra.Command, args []string) error {
	if len(args) == 0 {
		return nil
	}
	msg := fmt.Sprintf("unknown command %q for %q", args[0], cmd.CommandPath())
	if s := cmd.SuggestionsFor(args[0]); len(s) > 0 {
		msg += "; did you mean " + strings.Join(s, ", ") + "?"
	}
	return &usageError{err: fmt.Errorf("%s", msg), command: cmd.CommandPath()}
}

// group is a command that only holds subcommands: run bare or with an
// unknown subcommand, it is a usage error.
func group(use, short string, aliases ...string) *cobra.Command {
	return &cobra.Command{
		Use:     use,
		Short:   short,
		Aliases: aliases,
		Args:    cobra.ArbitraryArgs,
		RunE:    groupRunE,
	}
}

// groupRunE refuses a group run without a known subcommand.
func groupRunE(cmd *cobra.Command, args []string) error {
	var names []string
	for _, s := range cmd.Commands() {
		if s.IsAvailableCommand() {
			names = append(names, s.Name())
		}
	}
	if len(args) == 0 {
		return &usageError{err: fmt.Errorf("%s needs a subcommand: %s", cmd.CommandPath(), strings.Join(names, ", ")), command: cmd.CommandPath()}
	}
	return &usageError{err: fmt.Errorf("unknown command %q for %q (want %s)", args[0], cmd.CommandPath(), strings.Join(names, ", ")), command: cmd.CommandPath()}
}

// args wraps a cobra argument check so that its complaint is a usage error.
func args(check cobra.PositionalArgs) cobra.PositionalArgs {
	return func(cmd *cobra.Command, a []string) error {
		if err := check(cmd, a); err != nil {
			return &usageError{err: err, command: cmd.CommandPath()}
		}
		return nil
	}
}

// cobraUsage recognises the usage complaints cobra makes itself.
func cobraUsage(err error) bool {
	msg := err.Error()
	for _, p := range []string{"unknown command", "unknown flag", "unknown shorthand flag", "flag needs an argument", "invalid argument", "accepts ", "requires at least", "requires at most", "required flag"} {
		if strings.HasPrefix(msg, p) {
			return true
		}
	}
	return false
}

// printJSON writes v indented, the shape every --json output shares.
func (c *cli) printJSON(v any) error {
	enc := json.NewEncoder(c.stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// tierNames completes a tier argument.
func tierNames(_ *cobra.Command, args []string, _ string) ([]string, cobra.ShellCompDirective) {
	if len(args) > 0 {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	var out []string
	for _, t := range job.Tiers {
		out = append(out, string(t))
	}
	return out, cobra.ShellCompDirectiveNoFileComp
}

func (c *cli) versionCmd() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print the CLI's version (also: conveyor --version)",
		Args:  args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if asJSON {
				bi, ok := debug.ReadBuildInfo()
				if !ok {
					bi = nil
				}
				return c.printJSON(readVersion(bi))
			}
			_, err := fmt.Fprintf(c.stdout, "conveyor %s\n", buildVersion())
			return err
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

// envNames completes --env from the environments file.
func (c *cli) envNames(o *common) func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
	return func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
		cf, _ := c.loadConfig(o)
		names := []string{localEnv}
		for n := range cf.Environments {
			names = append(names, n)
		}
		slices.Sort(names)
		return slices.Compact(names), cobra.ShellCompDirectiveNoFileComp
	}
}
