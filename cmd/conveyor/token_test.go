package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	smtypes "github.com/aws/aws-sdk-go-v2/service/secretsmanager/types"

	"github.com/conveyor/conveyor/internal/admin"
	"github.com/conveyor/conveyor/internal/httpapi"
	"github.com/conveyor/conveyor/internal/job"
	"github.com/conveyor/conveyor/internal/resources"
	"github.com/conveyor/conveyor/localstack/awstest"
)

// TestTokenForADeployedEnvironment mints service and admin tokens for a
// deployed environment from its JWT key in the emulator's Secrets Manager
// — under the stack's name for staging, under the name the environments
// file gives for another — that the environment's verifier accepts; user
// roles, unknown environments and lifetimes out of bounds are usage errors.
func TestTokenForADeployedEnvironment(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	awsCfg := awstest.Config(t)
	sm := secretsmanager.NewFromConfig(awsCfg)
	put := func(name, value string) {
		t.Helper()
		_, err := sm.CreateSecret(ctx, &secretsmanager.CreateSecretInput{Name: aws.String(name), SecretString: aws.String(value)})
		var exists *smtypes.ResourceExistsException
		if errors.As(err, &exists) {
			_, err = sm.PutSecretValue(ctx, &secretsmanager.PutSecretValueInput{SecretId: aws.String(name), SecretString: aws.String(value)})
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	stagingKey := "staging-key-" + strings.Repeat("s", 40)
	put(resources.JWTSecretName(job.Staging), stagingKey)
	otherName, otherKey := awstest.Name(t, "jwt"), "other-key-"+strings.Repeat("o", 40)
	put(otherName, otherKey)
	dir := t.TempDir()
	cfgFile := filepath.Join(dir, "environments.json")
	if err := os.WriteFile(cfgFile, []byte(`{"environments":{"eu-canary":{"url":"https://canary.example","token":"x","jwtSecret":"`+otherName+`","region":"eu-central-1","profile":"canary-ops"}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	var asked config.LoadOptions // what the last token --env asked the SDK for
	run := func(args ...string) (string, string, error) {
		var out, errOut bytes.Buffer
		c := testCLI(map[string]string{"HOME": dir}, &out, &errOut, false)
		c.awsConfig = func(_ context.Context, opts ...func(*config.LoadOptions) error) (aws.Config, error) {
			asked = config.LoadOptions{}
			for _, o := range opts {
				if err := o(&asked); err != nil {
					return aws.Config{}, err
				}
			}
			return awsCfg, nil
		}
		err := c.run(ctx, args)
		return out.String(), errOut.String(), err
	}
	verify := func(key, tok string) httpapi.Claims {
		t.Helper()
		c, err := httpapi.NewVerifier([]byte(key), time.Now).Verify("Bearer " + strings.TrimSpace(tok))
		if err != nil {
			t.Fatalf("the environment refuses the minted token: %v", err)
		}
		return c
	}

	out, _, err := run("token", "--env", "staging", "--sub", "uptime-monitor", "--ttl", "720h")
	if err != nil {
		t.Fatal(err)
	}
	if c := verify(stagingKey, out); c.Role != httpapi.RoleService || c.Subject != "uptime-monitor" || c.Plan != "" ||
		c.ExpiresAt.Before(time.Now().Add(719*time.Hour)) {
		t.Errorf("default role service, no plan, 720h: %+v", c)
	}
	out, _, err = run("token", "--env", "eu-canary", "--config", cfgFile, "--role", "admin", "--sub", "alice", "--json")
	if err != nil {
		t.Fatal(err)
	}
	var js struct{ Token, Sub, Role, Env, ExpiresAt string }
	if err := json.Unmarshal([]byte(out), &js); err != nil {
		t.Fatalf("--json: %v: %s", err, out)
	}
	exp, _ := time.Parse(time.RFC3339, js.ExpiresAt)
	if c := verify(otherKey, js.Token); c.Role != httpapi.RoleAdmin || js.Env != "eu-canary" || js.Role != "admin" ||
		exp.After(time.Now().Add(time.Hour+time.Minute)) {
		t.Errorf("admin token of the default hour: %+v %+v", c, js)
	}
	if asked.Region != "eu-central-1" || asked.SharedConfigProfile != "canary-ops" {
		t.Errorf("the environment's AWS configuration: region %q, profile %q; want the file's eu-central-1 and canary-ops", asked.Region, asked.SharedConfigProfile)
	}
	if _, err := httpapi.NewVerifier([]byte(stagingKey), time.Now).Verify("Bearer " + js.Token); err == nil {
		t.Error("a token of one environment is accepted by another")
	}

	for _, args := range [][]string{
		{"token", "--env", "staging", "--role", "user"},
		{"token", "--env", "staging", "--role", "admin", "--ttl", "13h"},
		{"token", "--env", "staging", "--ttl", "2161h"},
		{"token", "--env", "staging", "--ttl", "-1h"},
		{"token", "--env", "nowhere"},
	} {
		if _, _, err := run(args...); exitCode(err) != exitUsage {
			t.Errorf("%v: %v, want a usage error", args, err)
		}
	}
	// An environment whose secret does not exist: a failure naming it.
	missing := awstest.Name(t, "missing")
	if err := os.WriteFile(cfgFile, []byte(`{"environments":{"gone":{"url":"https://x","token":"x","jwtSecret":"`+missing+`"}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, _, err := run("token", "--env", "gone", "--config", cfgFile); err == nil || exitCode(err) != exitFailure || !strings.Contains(err.Error(), missing) {
		t.Errorf("a missing secret: %v", err)
	}
}

// TestOverviewSaysWhatIsBlocked: work that waits for an operator is a line
// of its own under the tables, naming the environment, the count and what
// to do.
func TestOverviewSaysWhatIsBlocked(t *testing.T) {
	t.Parallel()
	var b bytes.Buffer
	renderOverview(&b, map[string]envOverview{
		"staging": {Overview: &admin.Overview{Parked: map[string]int{admin.CodeOAuthClientNotSet: 3},
			Blocked: []admin.Blocked{{Reason: admin.CodeOAuthClientNotSet, Jobs: 3, Message: "the OAuth client secret is not set: put …"}}}},
		"prod-en": {Overview: &admin.Overview{}},
	})
	want := "staging: blocked: 3 job(s) wait (oauth_client_not_set): the OAuth client secret is not set: put …\n"
	if !strings.Contains(b.String(), want) || strings.Contains(b.String(), "prod-en: blocked") {
		t.Errorf("overview:\n%s\nwant the line %q for staging only", b.String(), want)
	}
}
