// Package stack defines Conveyor's CDK stack for one cloud environment, built
// entirely from the resource definition in internal/resources: the tier FIFO
// queues and their DLQs, the DynamoDB table, the upload bucket, the KMS key,
// the event bus, the secrets, the functions with their triggers and
// least-privilege roles, the schedules, the alarms and the dashboard.
//
// The stack is environment-agnostic (no account or region lookups), so every
// environment synthesizes without AWS credentials.
package stack

import (
	"fmt"
	"net/mail"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"

	"github.com/conveyor/conveyor/internal/job"
	"github.com/conveyor/conveyor/internal/resources"
)

// FunctionsDirDefault is where `make build` writes bin/<fn>/bootstrap.
const FunctionsDirDefault = "bin"

// Props configures one environment's stack.
type Props struct {
	// Env is the cloud environment (one of job.CloudEnvs).
	Env job.Env
	// FunctionsDir holds <fn>/bootstrap for every function of the
	// definition (default FunctionsDirDefault, relative to the working
	// directory).
	FunctionsDir string
	// Synthesizer overrides the stack synthesizer (default: CDK's default
	// synthesizer). The emulator uses one without the bootstrap-version
	// rule; see EmulatorSynthesizer.
	Synthesizer awscdk.IStackSynthesizer
	// OAuthClientSecretARN is the complete ARN of an existing Secrets
	// Manager secret holding the external API's OAuth client credentials
	// ({"clientId":"…","clientSecret":"…"}). Default "": the stack creates
	// the secret, OAuthClientSecretName(env), with an empty clientId that
	// an operator replaces (the publisher refuses to start until then).
	OAuthClientSecretARN string
	// WriteJobAttributes makes the functions write job items with every
	// attribute (CONVEYOR_JOB_ITEMS=attributes): the first deploy of the
	// change to compact job items, before which code reads only those
	// (docs/migrations.md#compact-job-items). Default false: compact.
	WriteJobAttributes bool
	// Config is the environment's deploy-time configuration
	// (LoadConfig: infra/env/<env>.json), validated again by New.
	Config Config
}

// ParseAlarmSubscriptions splits a comma-separated list of e-mail
// addresses and https:// URLs, refusing anything else (plain http, other
// schemes, malformed addresses) with an error naming it.
func ParseAlarmSubscriptions(list string) ([]string, error) {
	var out []string
	for _, s := range strings.Split(list, ",") {
		s = strings.TrimSpace(s)
		if s == "" {
			continue
		}
		if strings.Contains(s, "://") {
			u, err := url.Parse(s)
			if err != nil || u.Scheme != "https" || u.Host == "" || u.User != nil {
				return nil, fmt.Errorf("alarm subscription %q: want an e-mail address or an https:// URL", s)
			}
			out = append(out, s)
			continue
		}
		a, err := mail.ParseAddress(s)
		if err != nil || a.Address != s {
			return nil, fmt.Errorf("alarm subscription %q: want an e-mail address (name@example.com) or an https:// URL", s)
		}
		out = append(out, s)
	}
	return out, nil
}

// OAuthClientSecretName is the name of the OAuth client secret the stack
// of env creates when Props.OAuthClientSecretARN is empty.
func OAuthClientSecretName(env job.Env) string {
	return resources.For(env).Prefix + "/deviantart-oauth-client"
}

// OAuthClientSecretContextKey is the CDK context key (cdk deploy -c
// key=arn) the app reads Props.OAuthClientSecretARN of env from.
func OAuthClientSecretContextKey(env job.Env) string {
	return "conveyor:" + string(env) + ":oauthClientSecretArn"
}

// JobItemsContextKey is the CDK context key (cdk deploy -c
// key=attributes) the app reads Props.WriteJobAttributes of env from.
func JobItemsContextKey(env job.Env) string { return "conveyor:" + string(env) + ":jobItems" }

// StackID is the construct id (and CloudFormation stack name) of env's stack.
func StackID(env job.Env) string { return "Conveyor-" + string(env) }

// EmulatorSynthesizer returns a synthesizer whose templates carry no
// bootstrap-version rule, so they deploy to an emulator that was never
// `cdk bootstrap`ped.
func EmulatorSynthesizer() awscdk.IStackSynthesizer {
	return awscdk.NewDefaultStackSynthesizer(&awscdk.DefaultStackSynthesizerProps{
		GenerateBootstrapVersionRule: jsii.Bool(false),
	})
}

// CheckAssets reports, in one error naming every missing file, the functions
// of def that have no bootstrap under dir. The stack never packages a
// placeholder: build the functions first (`make build`).
func CheckAssets(dir string, def resources.Definition) error {
	var missing []string
	for _, fn := range def.Functions {
		p := filepath.Join(dir, fn, "bootstrap")
		if st, err := os.Stat(p); err != nil || st.IsDir() {
			missing = append(missing, p)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("function build output missing: %s; run `make build` first (or set CONVEYOR_FUNCTIONS_DIR)",
			strings.Join(missing, ", "))
	}
	return nil
}

// New adds env's stack to scope. It panics, naming what is wrong, when the
// environment is not a cloud environment, a function's bootstrap is missing
// or the configuration is invalid (CDK constructs report configuration
// errors by panicking; call CheckAssets and LoadConfigs first for an error
// value, as the app does).
func New(scope constructs.Construct, id string, props Props) awscdk.Stack {
	if !isCloudEnv(props.Env) {
		panic(fmt.Sprintf("infra: %q is not a cloud environment (want one of %v)", props.Env, job.CloudEnvs))
	}
	if props.FunctionsDir == "" {
		props.FunctionsDir = FunctionsDirDefault
	}
	def := resources.For(props.Env)
	if err := CheckAssets(props.FunctionsDir, def); err != nil {
		panic("infra: " + err.Error())
	}
	if err := props.Config.Validate(props.Env); err != nil {
		panic("infra: " + err.Error())
	}
	sp := &awscdk.StackProps{
		Description: jsii.String(fmt.Sprintf("Conveyor job pipeline, %s environment", props.Env)),
		Synthesizer: props.Synthesizer,
	}
	if acct := props.Config.Account; acct != "" {
		// Bound to its account (and region): the CLI refuses to deploy it
		// with another account's credentials ("Need to perform AWS calls
		// for account …"), so one environment's `make deploy` cannot land
		// in another's account.
		sp.Env = &awscdk.Environment{Account: jsii.String(acct)}
		if r := props.Config.Region; r != "" {
			sp.Env.Region = jsii.String(r)
		}
	}
	st := awscdk.NewStack(scope, jsii.String(id), sp)
	awscdk.Tags_Of(st).Add(jsii.String("project"), jsii.String("conveyor"), nil)
	awscdk.Tags_Of(st).Add(jsii.String("environment"), jsii.String(string(props.Env)), nil)

	stage := indexStage(st, def)
	def.Table.Indexes = stage.Indexes
	b := &builder{stack: st, def: def, props: props, readRetired: stage.ReadRetired}
	b.data()
	b.functions()
	b.triggers()
	b.permissions()
	b.userSchedules()
	b.monitoring()
	b.suppressions()
	return st
}

func isCloudEnv(env job.Env) bool {
	for _, e := range job.CloudEnvs {
		if e == env {
			return true
		}
	}
	return false
}

// IndexStageContextKey is the CDK context key (cdk deploy -c key=n) that
// deploys env's table at stage n of the index migration
// (resources.IndexMigration, docs/migrations.md): one GSI change per
// deploy, as CloudFormation allows. Unset: the definition's indexes.
func IndexStageContextKey(env job.Env) string { return "conveyor:" + string(env) + ":indexStage" }

// indexStage is the stage of the index migration the context asks for.
func indexStage(st awscdk.Stack, def resources.Definition) resources.IndexStage {
	v, ok := st.Node().TryGetContext(jsii.String(IndexStageContextKey(def.Env))).(string)
	if !ok || v == "" {
		return resources.IndexStage{Indexes: def.Table.Indexes}
	}
	stages := resources.IndexMigration(def.Table)
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 || n >= len(stages) {
		panic(fmt.Sprintf("infra: %s must be a stage from 0 to %d, got %s", IndexStageContextKey(def.Env), len(stages)-1, v))
	}
	return stages[n]
}
