package config_test

import (
	"strings"
	"testing"

	"github.com/conveyor/conveyor/internal/config"
	"github.com/conveyor/conveyor/internal/job"
	"github.com/conveyor/conveyor/internal/resources"
)

// allFunctions is what a process running every function (the local stack)
// names.
var allFunctions = resources.For(job.Local).Functions

func TestFromRefusesToStartBadly(t *testing.T) {
	t.Parallel()
	const secret = "s3cr3t-client-secret"
	client := map[string]string{"CONVEYOR_DEVIANTART_CLIENT_ID": "conveyor", "CONVEYOR_DEVIANTART_CLIENT_SECRET": secret}
	withEnv := func(env string, extra ...map[string]string) map[string]string {
		m := map[string]string{}
		if env != "" {
			m["CONVEYOR_ENV"] = env
		}
		for _, e := range extra {
			for k, v := range e {
				m[k] = v
			}
		}
		return m
	}
	tests := []struct {
		name    string
		env     map[string]string
		fns     []string
		wantEnv job.Env
		wantErr []string // each must appear in the error; none means no error
	}{
		{name: "no CONVEYOR_ENV, no function", env: withEnv(""), wantErr: []string{"CONVEYOR_ENV is not set"}},
		{name: "no CONVEYOR_ENV, api", env: withEnv("", client), fns: []string{resources.FuncAPI}, wantErr: []string{"CONVEYOR_ENV is not set"}},
		{name: "no CONVEYOR_ENV, publisher with credentials", env: withEnv("", client), fns: []string{resources.FuncPublisher},
			wantErr: []string{"CONVEYOR_ENV is not set"}},
		{name: "unknown CONVEYOR_ENV", env: withEnv("production"), wantErr: []string{"CONVEYOR_ENV", `unknown environment "production"`}},
		{name: "local, explicitly", env: withEnv("local"), wantEnv: job.Local},
		{name: "staging api without credentials", env: withEnv("staging"), fns: []string{resources.FuncAPI}, wantEnv: job.Staging},
		{name: "the non-refreshing functions need no credentials", env: withEnv("prod-ru"),
			fns:     []string{resources.FuncAPI, resources.FuncConfirm, resources.FuncSystem, resources.FuncRecovery, resources.FuncStream},
			wantEnv: job.ProdRU},
		{name: "staging publisher without credentials", env: withEnv("staging"), fns: []string{resources.FuncPublisher},
			wantErr: []string{"publisher function refreshes tokens", "CONVEYOR_DEVIANTART_CLIENT_ID and CONVEYOR_DEVIANTART_CLIENT_SECRET are empty"}},
		{name: "local publisher without credentials", env: withEnv("local"), fns: []string{resources.FuncPublisher},
			wantErr: []string{"CONVEYOR_DEVIANTART_CLIENT_ID and CONVEYOR_DEVIANTART_CLIENT_SECRET are empty"}},
		{name: "publisher with the id only", env: withEnv("prod-en", map[string]string{"CONVEYOR_DEVIANTART_CLIENT_ID": "conveyor"}),
			fns: []string{resources.FuncPublisher}, wantErr: []string{"CONVEYOR_DEVIANTART_CLIENT_SECRET is empty"}},
		{name: "publisher with the secret only", env: withEnv("prod-en", map[string]string{"CONVEYOR_DEVIANTART_CLIENT_SECRET": secret}),
			fns: []string{resources.FuncPublisher}, wantErr: []string{"CONVEYOR_DEVIANTART_CLIENT_ID is empty"}},
		{name: "publisher with credentials", env: withEnv("prod-en", client), fns: []string{resources.FuncPublisher}, wantEnv: job.ProdEN},
		{name: "publisher with the secret's ARN (read at cold start)",
			env: withEnv("staging", map[string]string{"CONVEYOR_DEVIANTART_CLIENT_SECRET_ARN": "arn:aws:secretsmanager:eu-west-1:1:secret:x"}),
			fns: []string{resources.FuncPublisher}, wantEnv: job.Staging},
		{name: "every function without credentials (the local stack)", env: withEnv("local"), fns: allFunctions,
			wantErr: []string{"publisher function refreshes tokens"}},
		{name: "every function with credentials", env: withEnv("local", client), fns: allFunctions, wantEnv: job.Local},
		{name: "every problem at once, no value", env: withEnv("", map[string]string{"CONVEYOR_DEVIANTART_CLIENT_SECRET": secret, "CONVEYOR_MAX_ATTEMPTS": "0"}),
			fns: []string{resources.FuncPublisher}, wantErr: []string{"CONVEYOR_ENV is not set", "CONVEYOR_MAX_ATTEMPTS", "CONVEYOR_DEVIANTART_CLIENT_ID is empty"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			cfg, err := config.From(func(k string) string { return tt.env[k] }, tt.fns...)
			if len(tt.wantErr) == 0 {
				if err != nil {
					t.Fatalf("From = %v, want no error", err)
				}
				if cfg.Env != tt.wantEnv {
					t.Errorf("Env = %q, want %q", cfg.Env, tt.wantEnv)
				}
				return
			}
			if err == nil {
				t.Fatalf("From accepted %v for %v", keys(tt.env), tt.fns)
			}
			for _, w := range tt.wantErr {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
			if strings.Contains(err.Error(), secret) {
				t.Errorf("error %q carries the client secret", err)
			}
		})
	}
}

func TestComplete(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		cfg     config.Config
		fns     []string
		wantErr string
	}{
		{name: "publisher with both", cfg: config.Config{DeviantArtClientID: "id", DeviantArtClientSecret: "x"}, fns: []string{resources.FuncPublisher}},
		// The secret is read when a token first needs refreshing; until it
		// holds credentials, jobs wait: the publisher starts regardless.
		{name: "an ARN is enough", cfg: config.Config{DeviantArtClientSecretARN: "arn:x"}, fns: []string{resources.FuncPublisher}},
		{name: "api needs none", cfg: config.Config{}, fns: []string{resources.FuncAPI}},
		{name: "the local stack needs them", cfg: config.Config{DeviantArtClientID: "id"}, fns: allFunctions,
			wantErr: "CONVEYOR_DEVIANTART_CLIENT_SECRET is empty"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := tt.cfg.Complete(tt.fns...)
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("Complete = %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("Complete = %v, want one containing %q", err, tt.wantErr)
			}
		})
	}
}

func TestEnvironRoundTrips(t *testing.T) {
	t.Parallel()
	in := map[string]string{"CONVEYOR_ENV": "staging", "CONVEYOR_TABLE": "t", "CONVEYOR_QUEUE_URL_HIGH": "https://q/high"}
	cfg, err := config.From(func(k string) string { return in[k] })
	if err != nil {
		t.Fatal(err)
	}
	out := cfg.Environ()
	again, err := config.From(func(k string) string { return out[k] })
	if err != nil {
		t.Fatalf("From(Environ()) = %v", err)
	}
	if again.Env != job.Staging || again.Table != "t" || again.QueueURLs[job.High] != "https://q/high" {
		t.Errorf("round trip lost something: %+v", again)
	}
}

func keys(m map[string]string) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// TestOIDCSettings: the issuer's settings are read with their defaults,
// and refused, naming the variable, when they cannot work.
func TestOIDCSettings(t *testing.T) {
	t.Parallel()
	from := func(vars map[string]string) (config.Config, error) {
		return config.From(func(k string) string {
			if k == config.VarEnv {
				return "staging"
			}
			return vars[k]
		}, resources.FuncAPI)
	}
	c, err := from(map[string]string{config.VarOIDCIssuer: "https://tenant.auth0.com/", config.VarOIDCAudience: "api-a, api-b,"})
	if err != nil {
		t.Fatal(err)
	}
	if o := c.OIDC; o.Issuer != "https://tenant.auth0.com/" || strings.Join(o.Audiences, "|") != "api-a|api-b" ||
		o.RoleClaim != "role" || o.PlanClaim != "plan" || o.JWKSURL != "" || o.JWKSTTL.String() != "1h0m0s" || o.JWKSMinRefresh.String() != "1m0s" {
		t.Errorf("OIDC settings with defaults: %+v", o)
	}
	if c, err := from(nil); err != nil || c.OIDC.Issuer != "" {
		t.Errorf("no issuer: %+v, %v", c.OIDC, err)
	}
	for name, tt := range map[string]struct {
		vars map[string]string
		want string
	}{
		"audience without issuer": {map[string]string{config.VarOIDCAudience: "a"}, "need CONVEYOR_OIDC_ISSUER"},
		"issuer without audience": {map[string]string{config.VarOIDCIssuer: "https://idp.example"}, "CONVEYOR_OIDC_AUDIENCE is required"},
		"http issuer":             {map[string]string{config.VarOIDCIssuer: "http://idp.example", config.VarOIDCAudience: "a"}, "CONVEYOR_OIDC_ISSUER"},
		"bad JWKS URL":            {map[string]string{config.VarOIDCIssuer: "https://idp.example", config.VarOIDCAudience: "a", config.VarOIDCJWKSURL: "keys"}, "CONVEYOR_OIDC_JWKS_URL"},
		"refresh above the TTL": {map[string]string{config.VarOIDCIssuer: "https://idp.example", config.VarOIDCAudience: "a",
			config.VarOIDCJWKSTTL: "1m", config.VarOIDCJWKSMinRefresh: "2m"}, "CONVEYOR_OIDC_JWKS_MIN_REFRESH"},
	} {
		if _, err := from(tt.vars); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: %v, want an error naming %q", name, err, tt.want)
		}
	}
}
