// Command conveyor is the operator CLI. Today: `conveyor token` mints a JWT
// for the local environment (its secret comes from .local/env or
// CONVEYOR_JWT_SECRET).
package main

import (
	"bufio"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/conveyor/conveyor/internal/auth"
)

func main() {
	if err := run(os.Args[1:], os.Stdout, os.Getenv); err != nil {
		fmt.Fprintf(os.Stderr, "conveyor: %v\n", err)
		os.Exit(2)
	}
}

func run(args []string, out io.Writer, getenv func(string) string) error {
	if len(args) == 0 {
		return errors.New("usage: conveyor token [--sub ID] [--role user|admin|service] [--plan PLAN] [--ttl 24h]")
	}
	switch args[0] {
	case "token":
		return token(args[1:], out, getenv)
	default:
		return fmt.Errorf("unknown command %q (try: token)", args[0])
	}
}

func token(args []string, out io.Writer, getenv func(string) string) error {
	fs := flag.NewFlagSet("token", flag.ContinueOnError)
	sub := fs.String("sub", "u-local", "subject (user id)")
	role := fs.String("role", "user", "role: user, admin or service")
	plan := fs.String("plan", "free", "plan: free, standard, pro, corporate, enterprise")
	ttl := fs.Duration("ttl", 24*time.Hour, "lifetime")
	envFile := fs.String("env-file", ".local/env", "file written by `make run`")
	if err := fs.Parse(args); err != nil {
		return err
	}
	secret := getenv("CONVEYOR_JWT_SECRET")
	if secret == "" {
		secret = readEnvFile(*envFile)["CONVEYOR_JWT_SECRET"]
	}
	if secret == "" {
		return errors.New("no CONVEYOR_JWT_SECRET: run `make run` (it writes .local/env) or set it")
	}
	tok, err := auth.Mint([]byte(secret), auth.Claims{Subject: *sub, Role: auth.Role(*role), Plan: *plan, ExpiresAt: time.Now().Add(*ttl)})
	if err != nil {
		return err
	}
	_, err = fmt.Fprintln(out, tok)
	return err
}

// readEnvFile reads `export K='v'` lines.
func readEnvFile(path string) map[string]string {
	m := map[string]string{}
	f, err := os.Open(path)
	if err != nil {
		return m
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimPrefix(strings.TrimSpace(sc.Text()), "export ")
		k, v, ok := strings.Cut(line, "=")
		if !ok || strings.HasPrefix(k, "#") {
			continue
		}
		m[k] = strings.ReplaceAll(strings.Trim(v, "'"), `'\''`, "'")
	}
	return m
}
