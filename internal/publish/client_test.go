package publish_test

import (
	"context"
	"strings"
	"testing"

	"github.com/conveyor/conveyor/localstack/awstest"
	"github.com/conveyor/conveyor/localstack/stack"
)

// TestRejectedOAuthClientFailsVisibly: when the external API refuses
// Conveyor's OAuth client (here: the secret was regenerated at the provider
// and the deployment still has the old one), the job fails at once with a
// code that names the configuration — no retry loop, no "reconnect the
// account" — and the user's refresh token survives, so once an operator
// fixes the credentials a retry of the job succeeds.
func TestRejectedOAuthClientFailsVisibly(t *testing.T) {
	t.Parallel()
	b := awstest.Setup(t, nil, stack.Options{})
	sim := b.Stack.Simulator
	id := b.Stack.Config.DeviantArtClientID
	sim.SetClient(id, "regenerated-at-the-provider")

	tok := b.Token("u-client", "user", "pro")
	b.Connect(tok)
	job := submit(b, tok, "wrong client", 1)
	r := b.WaitStatus(tok, job, "failed")
	e := r.Body["error"].(map[string]any)
	if e["code"] != "oauth_client_rejected" || e["retryable"] != false {
		t.Errorf("error = %v, want code oauth_client_rejected, not retryable", e)
	}
	msg, _ := e["message"].(string)
	if !strings.Contains(msg, "OAuth client credentials") || strings.Contains(msg, "reconnect") {
		t.Errorf("message = %q, want it to blame the OAuth client, not the account", msg)
	}
	if strings.Contains(string(r.Raw), b.Stack.Config.DeviantArtClientSecret) {
		t.Error("the job shows the client secret")
	}
	if got := r.Body["attempts"].(float64); got != 1 {
		t.Errorf("attempts = %v, want 1 (no retry loop)", got)
	}
	if calls := sim.Stats().Calls["/oauth2/token"]; calls["401"] != 1 || calls["200"] != 0 {
		t.Errorf("token calls = %v, want exactly one 401", calls)
	}

	// The operator puts the right credentials back; the same connection
	// works, nothing for the user to do.
	sim.SetClient(id, b.Stack.Config.DeviantArtClientSecret)
	b.Must(b.Call("POST", "/v1/jobs/"+job+"/retry", tok, nil), 200)
	b.WaitStatus(tok, job, "succeeded")
}

// TestStackWithoutOAuthClientSecretRefusesToStart: a client id without its
// secret is a configuration the stack refuses, naming the variable.
func TestStackWithoutOAuthClientSecretRefusesToStart(t *testing.T) {
	t.Parallel()
	env := map[string]string{"CONVEYOR_DEVIANTART_CLIENT_ID": "conveyor-local"}
	s, err := stack.Start(context.Background(), stack.Options{
		Endpoints: awstest.Endpoints(t), Prefix: awstest.Prefix(t), APIAddr: "127.0.0.1:0", DisablePollers: true,
		Getenv: func(k string) string { return env[k] },
	})
	if err == nil {
		s.Close()
		t.Fatal("the stack started without a client secret")
	}
	if !strings.Contains(err.Error(), "CONVEYOR_DEVIANTART_CLIENT_SECRET is empty") {
		t.Errorf("error = %v, want it to name CONVEYOR_DEVIANTART_CLIENT_SECRET", err)
	}
}
