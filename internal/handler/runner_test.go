package handler_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/conveyor/conveyor/internal/accounts"
	"github.com/conveyor/conveyor/internal/aws/bucket"
	"github.com/conveyor/conveyor/internal/aws/sealer"
	"github.com/conveyor/conveyor/internal/breaker"
	"github.com/conveyor/conveyor/internal/config"
	"github.com/conveyor/conveyor/internal/handler"
	"github.com/conveyor/conveyor/internal/publish"
	"github.com/conveyor/conveyor/internal/resources"
	"github.com/conveyor/conveyor/localstack/awstest"
)

// TestAPIHostKeysTheBreaker: the external API's breaker is keyed by host,
// whatever the base URL's path; a value that is no URL keys itself.
func TestAPIHostKeysTheBreaker(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"https://www.deviantart.com/api/v1/oauth2": "www.deviantart.com",
		"http://127.0.0.1:8081":                    "127.0.0.1:8081",
		"deviantart":                               "deviantart",
	} {
		if got := handler.APIHost(in); got != want {
			t.Errorf("APIHost(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestSubmittersAcceptTheKindsThePublisherRuns: the functions that only
// submit (handler.Fronts) accept exactly the kinds the publisher's runner
// runs, and ask for the account of the provider the runner refreshes.
func TestSubmittersAcceptTheKindsThePublisherRuns(t *testing.T) {
	t.Parallel()
	env := awstest.Provision(t).Function(t, resources.FuncPublisher, map[string]string{
		config.VarDeviantArtClientID: "id", config.VarDeviantArtClientSecret: "secret", config.VarDeviantArtURL: "http://127.0.0.1:9"})
	db, emf := env.DynamoDB(), env.Emitter()
	r, err := handler.NewRunner(handler.RunnerConfig{Env: env, Store: env.Store(db), Bucket: bucket.New(env.AWS, env.Config.Bucket),
		Breaker: func(owner string) (*breaker.Breaker, error) { return env.Breaker(db, owner, emf) },
		Sealer:  sealer.For(env.AWS, env.Config.KMSKeyID)})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(r.Kinds.Names(), handler.Fronts(nil, nil).Names()); diff != "" {
		t.Errorf("kinds the submitters accept (-runner +handler.Fronts):\n%s", diff)
	}
	if publish.ProviderDefault != accounts.Provider {
		t.Errorf("a submitted publish job needs an account of %q, the runner refreshes %q", publish.ProviderDefault, accounts.Provider)
	}
	// The runner's kinds, seen as fronts, are what App submits with.
	if diff := cmp.Diff(r.Kinds.Names(), r.Kinds.Fronts().Names()); diff != "" {
		t.Errorf("Registry.Fronts (-kinds +fronts):\n%s", diff)
	}
}
