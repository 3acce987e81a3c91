package main

import (
	"errors"
	"flag"
	"fmt"
	"time"

	"github.com/conveyor/conveyor/internal/auth"
)

// token mints a JWT for the local environment (its secret comes from
// CONVEYOR_JWT_SECRET or .local/env).
func (c *cli) token(args []string) error {
	fs := flag.NewFlagSet("token", flag.ContinueOnError)
	fs.SetOutput(c.stderr)
	sub := fs.String("sub", "u-local", "subject (user id)")
	role := fs.String("role", "user", "role: user, admin or service")
	plan := fs.String("plan", "free", "plan: free, standard, pro, corporate, enterprise")
	ttl := fs.Duration("ttl", 24*time.Hour, "lifetime")
	envFile := fs.String("env-file", ".local/env", "file written by `make run`")
	if err := fs.Parse(args); err != nil {
		return err
	}
	secret := c.getenv("CONVEYOR_JWT_SECRET")
	if secret == "" {
		secret = readEnvFile(*envFile)["CONVEYOR_JWT_SECRET"]
	}
	if secret == "" {
		return errors.New("no CONVEYOR_JWT_SECRET: run `make run` (it writes .local/env) or set it")
	}
	tok, err := auth.Mint([]byte(secret), auth.Claims{Subject: *sub, Role: auth.Role(*role), Plan: *plan, ExpiresAt: c.now().Add(*ttl)})
	if err != nil {
		return err
	}
	_, err = fmt.Fprintln(c.stdout, tok)
	return err
}
