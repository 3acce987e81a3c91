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
// Context:
//
//	conveyor:<env>:oauthClientSecretArn  the complete ARN of an existing secret
//	                        with the OAuth client credentials for <env>; without
//	                        it the stack creates <prefix>/deviantart-oauth-client
package main

import (
	"fmt"
	"os"

	"github.com/aws/jsii-runtime-go"

	"github.com/conveyor/conveyor/infra/stack"
	"github.com/conveyor/conveyor/internal/resources"
)

func main() {
	defer jsii.Close()

	dir := os.Getenv("CONVEYOR_FUNCTIONS_DIR")
	if dir == "" {
		dir = stack.FunctionsDirDefault
	}
	// Fail before any construct exists, with every missing file named.
	for _, env := range resources.CloudEnvs {
		if err := stack.CheckAssets(dir, resources.For(env)); err != nil {
			fmt.Fprintln(os.Stderr, "infra:", err)
			os.Exit(1)
		}
	}

	app := stack.NewApp("")
	for _, env := range resources.CloudEnvs {
		props := stack.Props{Env: env, FunctionsDir: dir}
		if arn, ok := app.Node().TryGetContext(jsii.String(stack.OAuthClientSecretContextKey(env))).(string); ok {
			props.OAuthClientSecretARN = arn
		}
		if os.Getenv("CONVEYOR_CDK_EMULATOR") == "1" {
			props.Synthesizer = stack.EmulatorSynthesizer()
		}
		stack.New(app, stack.StackID(env), props)
	}
	stack.Check(app)
	app.Synth(nil)
}
