package main

import (
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/conveyor/conveyor/internal/auth"
)

// tokenCmd mints a JWT for the local environment (its secret comes from
// CONVEYOR_JWT_SECRET or .local/env).
func (c *cli) tokenCmd() *cobra.Command {
	var (
		sub, role, plan, envFile string
		ttl                      time.Duration
		asJSON                   bool
	)
	cmd := &cobra.Command{
		Use:   "token",
		Short: "Mint a token for the local stack (secret from CONVEYOR_JWT_SECRET or .local/env)",
		Example: `  TOKEN=$(conveyor token --sub u1 --plan pro)
  conveyor token --sub ops --role admin`,
		Args: args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			r := auth.Role(role)
			if !r.Valid() {
				return usagef("--role must be user, admin or service (got %q)", role)
			}
			if ttl <= 0 {
				return usagef("--ttl must be positive (got %s)", ttl)
			}
			secret := c.getenv("CONVEYOR_JWT_SECRET")
			if secret == "" {
				secret = readEnvFile(envFile)["CONVEYOR_JWT_SECRET"]
			}
			if secret == "" {
				return errors.New("no CONVEYOR_JWT_SECRET: run `make run` (it writes .local/env) or set it")
			}
			exp := c.now().Add(ttl)
			tok, err := auth.Mint([]byte(secret), auth.Claims{Subject: sub, Role: r, Plan: plan, ExpiresAt: exp})
			if err != nil {
				return fmt.Errorf("minting the token: %w", err)
			}
			if asJSON {
				return c.printJSON(map[string]string{"token": tok, "sub": sub, "role": role, "plan": plan, "expiresAt": exp.UTC().Format(time.RFC3339)})
			}
			_, err = fmt.Fprintln(c.stdout, tok)
			return err
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&sub, "sub", "u-local", "subject (user id)")
	fs.StringVar(&role, "role", "user", "role: user, admin or service")
	fs.StringVar(&plan, "plan", "free", "plan: free, standard, pro, corporate, enterprise")
	fs.DurationVar(&ttl, "ttl", 24*time.Hour, "lifetime")
	fs.StringVar(&envFile, "env-file", ".local/env", "file written by make run")
	fs.BoolVar(&asJSON, "json", false, `print {"token","sub","role","plan","expiresAt"}`)
	_ = cmd.RegisterFlagCompletionFunc("role", cobra.FixedCompletions([]string{"user", "admin", "service"}, cobra.ShellCompDirectiveNoFileComp))
	_ = cmd.RegisterFlagCompletionFunc("plan", cobra.FixedCompletions([]string{"free", "standard", "pro", "corporate", "enterprise"}, cobra.ShellCompDirectiveNoFileComp))
	return cmd
}
