package stack

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	smtypes "github.com/aws/aws-sdk-go-v2/service/secretsmanager/types"

	"github.com/conveyor/conveyor/internal/aws/awsenv"
	"github.com/conveyor/conveyor/internal/config"
	"github.com/conveyor/conveyor/internal/handler"
	"github.com/conveyor/conveyor/internal/httpapi"
	"github.com/conveyor/conveyor/internal/job"
	"github.com/conveyor/conveyor/internal/resources"
	"github.com/conveyor/conveyor/localstack/lambdaruntime"
)

// Functions is how the stack invokes each function: in process, or as the
// function's own bootstrap under the local Lambda Runtime API.
type Functions struct {
	// Invokers by function name (resources.Func…).
	Invokers map[string]lambdaruntime.Invoker
	// Stream is the stream function behind its function URL.
	Stream lambdaruntime.StreamInvoker
	// Binaries holds, in binary mode, each function's instances (their
	// cold starts: Function.ColdStarts); nil in process.
	Binaries map[string]*lambdaruntime.Function
}

func (f *Functions) close() {
	for _, fn := range f.Binaries {
		_ = fn.Close()
	}
}

// inProcess invokes in this process each function's handler
// (internal/handler) over the services of a; emf is the metrics emitter of
// each function that emits per invocation.
func inProcess(a *App, emf func(function string) *handler.Emitter) *Functions {
	log := a.Logger
	return &Functions{
		Invokers: map[string]lambdaruntime.Invoker{
			resources.FuncAPI:       lambdaruntime.InProcess(resources.FuncAPI, a.Router.Serve),
			resources.FuncAdmin:     lambdaruntime.InProcess(resources.FuncAdmin, a.AdminRouter.Serve),
			resources.FuncUploads:   lambdaruntime.InProcess(resources.FuncUploads, a.UploadsRouter.Serve),
			resources.FuncSchedules: lambdaruntime.InProcess(resources.FuncSchedules, a.SchedulesRouter.Serve),
			resources.FuncConfirm:   lambdaruntime.InProcess(resources.FuncConfirm, handler.ConfirmHandler(a.Uploads)),
			resources.FuncPublisher: lambdaruntime.InProcess(resources.FuncPublisher, handler.PublisherHandler(a.Publisher, a.Clients.SQS, a.QueueURLs, log)),
			resources.FuncSystem:    lambdaruntime.InProcess(resources.FuncSystem, handler.SystemHandler(a.Webhooks, a.Operations, a.Clients.SQS, a.QueueURLs, log)),
			resources.FuncRecovery:  lambdaruntime.InProcess(resources.FuncRecovery, handler.RecoveryHandler(a.Recoverer, a.Breaker, a.Schedules, a.Resumer, emf(resources.FuncRecovery), log)),
			resources.FuncRelay:     lambdaruntime.InProcess(resources.FuncRelay, handler.RelayHandler(a.Relay, emf(resources.FuncRelay), log)),
		},
		Stream: lambdaruntime.InProcessStream(resources.FuncStream, handler.StreamHandler(handler.OpenStreams(a.Streams), handler.Env{Config: a.Config}.WithDefaults().Verifier(httpapi.StaticKey(a.Config.JWTSecret)).VerifyContext, log)),
	}
}

// binaryConfig is what starting the functions' binaries needs.
type binaryConfig struct {
	def resources.Definition
	// config is every variable the configuration read, with its value: the
	// functions get the same configuration as the stack.
	config map[string]string
	// aws is the emulator's environment (AWS_ENDPOINT_URL*, credentials).
	aws map[string]string
	// awsCfg reaches the emulator, for the secrets.
	awsCfg aws.Config
	dir    string
	built  map[string]string
	output io.Writer
	// outputs, when set, is each function's own output (Options.FunctionOutputs).
	outputs func(function string) io.Writer
	logger  *slog.Logger
	// callLog is Options.CallLog.
	callLog string
}

// functionSecret is a secret a function reads by ARN at cold start: its
// name under the stack's prefix, and the variables of its value and ARN.
type functionSecret struct{ name, valueVar, arnVar string }

// Secrets the CDK stacks create and pass to functions by ARN: the JWT key,
// to the functions of resources.JWTFunctions (infra/stack reads the same
// list). Webhooks are signed with each user's own secret, sealed in the
// table, so no function reads an environment-wide one.
var functionSecrets = func() map[string]functionSecret {
	jwt := functionSecret{"/jwt", config.VarJWTSecret, config.VarJWTSecretARN}
	m := map[string]functionSecret{}
	for _, fn := range resources.JWTFunctions {
		m[fn] = jwt
	}
	return m
}()

// startBinaries builds every function of the definition for this host and
// prepares each to run under the local Runtime API with the environment the
// CDK stacks give it: the configuration, with the JWT secret stored in
// Secrets Manager and named by ARN, read by the function at cold start.
func startBinaries(ctx context.Context, c binaryConfig) (*Functions, error) {
	paths := c.built
	if paths == nil {
		var err error
		if paths, err = BuildFunctions(ctx, c.dir, c.def.Functions); err != nil {
			return nil, err
		}
	}
	arns, err := storeSecrets(ctx, secretsmanager.NewFromConfig(c.awsCfg), c.def.Prefix, c.config)
	if err != nil {
		return nil, err
	}
	fs := &Functions{Invokers: map[string]lambdaruntime.Invoker{}, Binaries: map[string]*lambdaruntime.Function{}}
	for _, name := range c.def.Functions {
		env := map[string]string{}
		for k, v := range c.config {
			env[k] = v
		}
		for k, v := range c.aws {
			env[k] = v
		}
		// No function gets a secret's value; the ones that read a secret
		// get its ARN, as in AWS.
		delete(env, config.VarJWTSecret)
		if s, ok := functionSecrets[name]; ok {
			env[s.arnVar] = arns[s.name]
		}
		if c.callLog != "" {
			env[awsenv.VarLog] = filepath.Join(c.callLog, name+".jsonl")
			env[awsenv.VarAccount] = lambdaruntime.AccountID
		}
		size, ok := resources.FunctionSizes[name]
		if !ok {
			fs.close()
			return nil, fmt.Errorf("function %s has no size in resources.FunctionSizes", name)
		}
		fn, err := lambdaruntime.NewFunction(lambdaruntime.FunctionConfig{
			Name: c.def.Prefix + "-" + name, Bootstrap: paths[name], Env: env,
			MemoryMB: size.MemoryMB, Timeout: size.Timeout, Region: awsenv.DefaultRegion,
			Output: c.outputOf(name), Logger: c.logger,
		})
		if err != nil {
			fs.close()
			return nil, err
		}
		fs.Binaries[name] = fn
		if name == resources.FuncStream {
			fs.Stream = fn
		} else {
			fs.Invokers[name] = fn
		}
	}
	if fs.Stream == nil {
		fs.close()
		return nil, errors.New("the definition has no stream function")
	}
	return fs, nil
}

// BuildFunctions builds the named functions (default: every function) for
// this host into dir (default .local/bin/functions under the module root)
// and returns their bootstraps by name.
func BuildFunctions(ctx context.Context, dir string, names []string) (map[string]string, error) {
	root, err := lambdaruntime.ModuleRoot()
	if err != nil {
		return nil, err
	}
	if dir == "" {
		dir = filepath.Join(root, ".local", "bin", "functions")
	}
	if names == nil {
		names = resources.For(job.Local).Functions
	}
	return lambdaruntime.Build(ctx, root, dir, names)
}

// storeSecrets puts the stack's secrets into Secrets Manager under the
// names the CDK stacks use, and returns their ARNs by name suffix.
func storeSecrets(ctx context.Context, sm *secretsmanager.Client, prefix string, config map[string]string) (map[string]string, error) {
	arns := map[string]string{}
	for _, s := range functionSecrets {
		if _, done := arns[s.name]; done {
			continue
		}
		name, value := prefix+s.name, config[s.valueVar]
		out, err := sm.CreateSecret(ctx, &secretsmanager.CreateSecretInput{Name: aws.String(name), SecretString: aws.String(value)})
		var exists *smtypes.ResourceExistsException
		switch {
		case errors.As(err, &exists):
			put, err := sm.PutSecretValue(ctx, &secretsmanager.PutSecretValueInput{SecretId: aws.String(name), SecretString: aws.String(value)})
			if err != nil {
				return nil, fmt.Errorf("updating secret %s: %w", name, err)
			}
			arns[s.name] = aws.ToString(put.ARN)
		case err != nil:
			return nil, fmt.Errorf("creating secret %s: %w", name, err)
		default:
			arns[s.name] = aws.ToString(out.ARN)
		}
	}
	return arns, nil
}

// recordingGetenv wraps getenv and remembers every variable read that has
// a value.
func recordingGetenv(getenv func(string) string, into map[string]string) func(string) string {
	return func(k string) string {
		v := getenv(k)
		if v != "" {
			into[k] = v
		}
		return v
	}
}

// awsEnviron is the emulator part of env: its endpoints and credentials.
func awsEnviron(env map[string]string) map[string]string {
	m := map[string]string{}
	for k, v := range env {
		if strings.HasPrefix(k, "AWS_") {
			m[k] = v
		}
	}
	return m
}

// streamCORS is the stream function URL's CORS configuration, as the CDK
// stacks set it (resources.StreamCORS; infra/stack: streamURL).
func streamCORS(def resources.Definition) *lambdaruntime.CORS {
	return lambdaruntime.CORSOf(resources.StreamCORS, def.Bucket.CORSOrigins)
}

// apiCORS is the HTTP API's CORS configuration, as the CDK stacks set it
// (resources.APICORS; infra/stack: apiCORS), for the local origins.
func apiCORS(def resources.Definition) *lambdaruntime.CORS {
	return lambdaruntime.CORSOf(resources.APICORS, def.Bucket.CORSOrigins)
}

// defaultOutput is where the functions' processes write (their
// CloudWatch Logs).
// outputOf is where function name's output goes.
func (c *binaryConfig) outputOf(name string) io.Writer {
	if c.outputs != nil {
		return c.outputs(name)
	}
	return c.output
}

func defaultOutput(w io.Writer) io.Writer {
	if w == nil {
		return os.Stderr
	}
	return w
}
