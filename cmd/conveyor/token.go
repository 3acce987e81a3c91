package main

import (
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/conveyor/conveyor/internal/aws/secretref"
	"github.com/conveyor/conveyor/internal/httpapi"
	"github.com/conveyor/conveyor/internal/job"
	"github.com/conveyor/conveyor/internal/resources"
)

// Bounds of a minted token's lifetime.
const (
	// maxTokenTTL bounds every token (a monitor's service token included).
	maxTokenTTL = 90 * 24 * time.Hour
	// maxAdminTTL bounds an admin token for a deployed environment: an
	// operator mints another rather than keep one.
	maxAdminTTL = 12 * time.Hour
	// deployedTTLDefault is a deployed environment's default lifetime.
	deployedTTLDefault = time.Hour
)

// tokenFlags holds the flags of token.
type tokenFlags struct {
	sub, role, plan, envFile, env, cfgPath string
	ttl                                    time.Duration
	asJSON                                 bool
}

// tokenCmd mints a JWT: for the local stack (its secret from
// CONVEYOR_JWT_SECRET or .local/env), or with --env for a deployed
// environment, a service or admin token signed with its HS256 key read
// from Secrets Manager.
func (c *cli) tokenCmd() *cobra.Command {
	var f tokenFlags
	cmd := &cobra.Command{
		Use:   "token",
		Short: "Mint a token: for the local stack, or (--env) a service/admin token for a deployed environment",
		Long: `Without --env (or with --env local) the token is for the local stack, signed with
CONVEYOR_JWT_SECRET or the one in .local/env.

With --env NAME the token is for a deployed environment: a service or admin token,
signed with the environment's HS256 key read from AWS Secrets Manager (the secret the
CDK stack creates, conveyor-NAME/jwt, or the environment's "jwtSecret" in the
environments file), with the usual AWS credentials and region. Its lifetime is at most
12h for admin, 90 days for service (default 1h). Users get their tokens from the
identity provider (docs/identity.md).`,
		Example: `  TOKEN=$(conveyor token --sub u1 --plan pro)
  conveyor token --sub ops --role admin
  conveyor token --env staging --role service --sub uptime-monitor --ttl 720h
  conveyor token --env prod-en --role admin --sub alice --json`,
		Args: args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			deployed := f.env != "" && f.env != localEnv
			if deployed {
				f.deployedDefaults(cmd)
			}
			r, err := f.checkRole(deployed)
			if err != nil {
				return err
			}
			secret, err := c.tokenKey(cmd, f, deployed)
			if err != nil {
				return err
			}
			return c.mintToken(f, r, secret, deployed)
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&f.sub, "sub", "u-local", "subject (user id; for --env, who or what the token is for)")
	fs.StringVar(&f.role, "role", "user", "role: user, admin or service (with --env: service or admin, default service)")
	fs.StringVar(&f.plan, "plan", "free", "plan: free, standard, pro, corporate, enterprise (with --env: none unless given)")
	fs.DurationVar(&f.ttl, "ttl", 24*time.Hour, "lifetime (with --env default 1h; at most 12h for admin, 2160h for service)")
	fs.StringVar(&f.envFile, "env-file", ".local/env", "file written by make run")
	fs.StringVar(&f.env, "env", "", "a deployed environment (staging, prod-ru, prod-en, or one of the environments file); empty or local: the local stack")
	fs.StringVar(&f.cfgPath, "config", "", "environments file (default ~/.config/conveyor/environments.json), for an environment's jwtSecret")
	fs.BoolVar(&f.asJSON, "json", false, `print {"token","sub","role","plan","expiresAt"} (and "env" with --env)`)
	_ = cmd.RegisterFlagCompletionFunc("role", cobra.FixedCompletions([]string{"user", "admin", "service"}, cobra.ShellCompDirectiveNoFileComp))
	_ = cmd.RegisterFlagCompletionFunc("plan", cobra.FixedCompletions([]string{"free", "standard", "pro", "corporate", "enterprise"}, cobra.ShellCompDirectiveNoFileComp))
	_ = cmd.RegisterFlagCompletionFunc("env", cobra.FixedCompletions([]string{string(job.Staging), string(job.ProdRU), string(job.ProdEN), localEnv}, cobra.ShellCompDirectiveNoFileComp))
	return cmd
}

// deployedDefaults sets the defaults of a deployed environment's token on
// the flags not given: a service token, for deployedTTLDefault, with no plan.
func (f *tokenFlags) deployedDefaults(cmd *cobra.Command) {
	if !cmd.Flags().Changed("role") {
		f.role = string(httpapi.RoleService)
	}
	if !cmd.Flags().Changed("ttl") {
		f.ttl = deployedTTLDefault
	}
	if !cmd.Flags().Changed("plan") {
		f.plan = ""
	}
}

// checkRole returns the token's role once the role and lifetime are
// allowed (for a deployed environment, no user token and a shorter admin
// one); else a usage error.
func (f tokenFlags) checkRole(deployed bool) (httpapi.Role, error) {
	r := httpapi.Role(f.role)
	switch {
	case !r.Valid():
		return "", usagef("--role must be user, admin or service (got %q)", f.role)
	case deployed && r == httpapi.RoleUser:
		return "", usagef("--env %s mints service or admin tokens; users get theirs from the identity provider (docs/identity.md)", f.env)
	case f.ttl <= 0:
		return "", usagef("--ttl must be positive (got %s)", f.ttl)
	case f.ttl > maxTokenTTL:
		return "", usagef("--ttl must be at most %s (got %s)", maxTokenTTL, f.ttl)
	case deployed && r == httpapi.RoleAdmin && f.ttl > maxAdminTTL:
		return "", usagef("an admin token for a deployed environment lives at most %s (got --ttl %s)", maxAdminTTL, f.ttl)
	}
	return r, nil
}

// tokenKey returns the signing key: a deployed environment's from Secrets
// Manager, else the local stack's CONVEYOR_JWT_SECRET (from the
// environment, then the env file).
func (c *cli) tokenKey(cmd *cobra.Command, f tokenFlags, deployed bool) (string, error) {
	if deployed {
		return c.deployedKey(cmd, f.env, f.cfgPath)
	}
	secret := c.getenv("CONVEYOR_JWT_SECRET")
	if secret == "" {
		secret = readEnvFile(f.envFile)["CONVEYOR_JWT_SECRET"]
	}
	if secret == "" {
		return "", errors.New("no CONVEYOR_JWT_SECRET: run `make run` (it writes .local/env) or set it")
	}
	return secret, nil
}

// mintToken signs the token with secret and prints it, alone or (--json)
// with its claims.
func (c *cli) mintToken(f tokenFlags, r httpapi.Role, secret string, deployed bool) error {
	exp := c.now().Add(f.ttl)
	tok, err := httpapi.Mint([]byte(secret), httpapi.Claims{Subject: f.sub, Role: r, Plan: f.plan, ExpiresAt: exp})
	if err != nil {
		return fmt.Errorf("minting the token: %w", err)
	}
	if f.asJSON {
		out := map[string]string{"token": tok, "sub": f.sub, "role": string(r), "plan": f.plan, "expiresAt": exp.UTC().Format(time.RFC3339)}
		if deployed {
			out["env"] = f.env
		}
		return c.printJSON(out)
	}
	_, err = fmt.Fprintln(c.stdout, tok)
	return err
}

// deployedKey reads env's HS256 key from Secrets Manager: the secret the
// environments file names for it, else the CDK stack's for a known
// environment.
func (c *cli) deployedKey(cmd *cobra.Command, env, cfgPath string) (string, error) {
	cf, err := c.loadConfig(&common{config: cfgPath})
	if err != nil {
		return "", err
	}
	ec := cf.Environments[env]
	id := ec.JWTSecret
	if id == "" {
		e, err := job.ParseEnv(env)
		if err != nil || e == job.Local {
			return "", usagef("unknown environment %q: name staging, prod-ru or prod-en, or give it a jwtSecret in the environments file", env)
		}
		id = resources.JWTSecretName(e)
	}
	awsCfg, err := c.awsConfig(cmd.Context(), ec.awsOptions()...)
	if err != nil {
		return "", fmt.Errorf("the AWS configuration: %w", err)
	}
	key, err := secretref.JWTKeyAt(id, awsCfg).Get(cmd.Context())
	if err != nil {
		return "", fmt.Errorf("%s: the JWT key: %w", env, err)
	}
	if len(key) < 32 {
		return "", fmt.Errorf("%s: the JWT key in %s is shorter than 32 bytes: not the stack's generated key", env, id)
	}
	return string(key), nil
}
