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
//
// Context (cdk.json beside this file holds the feature flags, which the app
// reads itself too; -c key=value on the CLI):
//
//	conveyor:<env>:oauthClientSecretArn  the complete ARN of an existing secret
//	                        with the OAuth client credentials for <env>; without
//	                        it the stack creates <prefix>/deviantart-oauth-client
//	alarmSubscription       comma-separated e-mail addresses and https:// URLs
//	                        subscribed to every environment's alarm topic
//	conveyor:<env>:alarmSubscription  the same for one environment (replaces
//	                        alarmSubscription there)
package main

import (
	_ "embed"
	"fmt"
	"os"

	"github.com/aws/jsii-runtime-go"

	"github.com/conveyor/conveyor/infra/stack"
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
		subs, _ := app.Node().TryGetContext(jsii.String(stack.AlarmSubscriptionContextKey)).(string)
		if s, ok := app.Node().TryGetContext(jsii.String(stack.AlarmSubscriptionEnvContextKey(env))).(string); ok {
			subs = s
		}
		if props.AlarmSubscriptions, err = stack.ParseAlarmSubscriptions(subs); err != nil {
			fail(err)
		}
		if os.Getenv("CONVEYOR_CDK_EMULATOR") == "1" {
			props.Synthesizer = stack.EmulatorSynthesizer()
		}
		stack.New(app, stack.StackID(env), props)
	}
	stack.Check(app)
	app.Synth(nil)
}
