// Command infra is Conveyor's CDK app: one stack per cloud environment
// (Conveyor-staging, Conveyor-prod-ru, Conveyor-prod-en), all from the
// resource definition in internal/resources, checked by cdk-nag.
//
//	cdk synth --app "go run ./infra"
//
// Environment:
//
//	CONVEYOR_FUNCTIONS_DIR  where <fn>/bootstrap live (default "bin", from `make build`)
//	CONVEYOR_CDK_EMULATOR   "1": templates without the bootstrap-version rule,
//	                        for an emulator that was never `cdk bootstrap`ped
//	CONVEYOR_CONFIG_DIR     where <env>.json live (default "env": infra/env,
//	                        since the CDK CLI runs the app in infra/)
//
// Each environment's settings (browser origins, the external API's URL,
// the alarm subscribers or topic, reserved concurrency, log retention,
// tracing, OIDC) come from its configuration file, checked before any
// construct exists: an invalid file stops the app with a message naming
// the file and every wrong field (docs/deploy.md has the reference).
//
// Context (cdk.json beside this file holds the feature flags, which the app
// reads itself too; -c key=value on the CLI):
//
//	conveyor:<env>:oauthClientSecretArn  the complete ARN of an existing secret
//	                        with the OAuth client credentials for <env>; without
//	                        it the stack creates <prefix>/deviantart-oauth-client
package main

import (
	_ "embed"
	"fmt"
	"os"

	"github.com/aws/jsii-runtime-go"

	"github.com/conveyor/conveyor/infra/stack"
	"github.com/conveyor/conveyor/internal/config"
	"github.com/conveyor/conveyor/internal/job"
	"github.com/conveyor/conveyor/internal/resources"
)

//go:embed cdk.json
var cdkJSON []byte

func main() {
	defer jsii.Close()
	fail := func(err error) {
		fmt.Fprintln(os.Stderr, "infra:", err)
		os.Exit(1)
	}
	context, err := stack.CDKJSONContext(cdkJSON)
	if err != nil {
		fail(err)
	}

	configDir := os.Getenv("CONVEYOR_CONFIG_DIR")
	if configDir == "" {
		configDir = stack.ConfigDirDefault
	}
	configs, err := stack.LoadConfigs(configDir)
	if err != nil {
		fail(err)
	}

	dir := os.Getenv("CONVEYOR_FUNCTIONS_DIR")
	if dir == "" {
		dir = stack.FunctionsDirDefault
	}
	// Fail before any construct exists, with every missing file named.
	for _, env := range job.CloudEnvs {
		if err := stack.CheckAssets(dir, resources.For(env)); err != nil {
			fail(err)
		}
	}

	app := stack.NewApp("", context)
	for _, env := range job.CloudEnvs {
		props := stack.Props{Env: env, FunctionsDir: dir}
		if arn, ok := app.Node().TryGetContext(jsii.String(stack.OAuthClientSecretContextKey(env))).(string); ok {
			props.OAuthClientSecretARN = arn
		}
		switch v, _ := app.Node().TryGetContext(jsii.String(stack.JobItemsContextKey(env))).(string); v {
		case "", config.JobItemsCompact:
		case config.JobItemsAttributes:
			props.WriteJobAttributes = true
		default:
			fail(fmt.Errorf("%s must be %s or %s, got %q", stack.JobItemsContextKey(env), config.JobItemsCompact, config.JobItemsAttributes, v))
		}
		props.Config = configs[env]
		if os.Getenv("CONVEYOR_CDK_EMULATOR") == "1" {
			props.Synthesizer = stack.EmulatorSynthesizer()
		}
		stack.New(app, stack.StackID(env), props)
	}
	stack.Check(app)
	app.Synth(nil)
}
