// Package awstest gives tests real AWS emulators: a package's TestMain calls
// Main, and each test gets an isolated, provisioned copy of the resources
// under a unique name prefix. With AWS_ENDPOINT_URL set (make test sets it:
// one moto and one DynamoDB Local serve every package of the run) it uses
// the emulators AWS_ENDPOINT_URL and AWS_ENDPOINT_URL_DYNAMODB name;
// without it (`go test ./internal/foo`) the package starts its own pair
// when its first test asks for them, and stops it after the last. If an
// emulator cannot start, every test that needs it fails with the reason;
// none skips.
//
// A test that needs the whole product gets a local stack of its own on
// those emulators (Setup, stack.go) and talks to it the way a client does
// (Bundle); ServeAdmin (admin.go) adds the admin routes and tier pollers
// that honour the pause flags. The functions' tests build a function's
// handler as its binary does (Handler, Env.Function) and call an HTTP one
// as API Gateway does (HTTPFunction).
package awstest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/conveyor/conveyor/internal/aws/awsclient"
	"github.com/conveyor/conveyor/internal/aws/awsenv"
	"github.com/conveyor/conveyor/internal/config"
	"github.com/conveyor/conveyor/internal/handler"
	"github.com/conveyor/conveyor/internal/job"
	"github.com/conveyor/conveyor/internal/resources"
	"github.com/conveyor/conveyor/localstack/emulator"
)

var (
	mu        sync.Mutex
	running   bool // inside Main's Run
	resolved  bool // endpoints (or startErr) decided
	emulators *emulator.Emulators
	endpoints awsclient.Endpoints
	startErr  error

	// transport (the SDK's default one) carries the SDK calls of every
	// configuration Config gives. Run closes its idle connections once the
	// tests end: emulators that outlive the package (make test's shared
	// pair) would otherwise keep them, and their goroutines, open past a
	// goleak check.
	transport = awshttp.NewBuildableClient().GetTransport()
)

// Main runs the package's tests against the emulators and exits. Use it as
//
//	func TestMain(m *testing.M) { awstest.Main(m) }
//
// With AWS_ENDPOINT_URL set it starts nothing: DynamoDB is served at
// AWS_ENDPOINT_URL_DYNAMODB, or at AWS_ENDPOINT_URL when that is unset (an
// emulator that serves everything, such as LocalStack). Otherwise the
// package's own emulators start on the first call of Endpoints (a package
// or a -run selection whose tests need none starts none) and stop when the
// tests end.
func Main(m *testing.M) { os.Exit(Wrap(m).Run()) }

// Wrap returns m with the emulators around its Run: available to the
// tests, stopped after them. It serves a TestMain that runs the tests
// through something else, such as goleak.VerifyTestMain(awstest.Wrap(m)).
func Wrap(m *testing.M) interface{ Run() int } { return wrapped{m} }

type wrapped struct{ m *testing.M }

func (w wrapped) Run() int {
	mu.Lock()
	running = true
	mu.Unlock()
	code := w.m.Run()
	mu.Lock()
	defer mu.Unlock()
	transport.CloseIdleConnections()
	_ = emulators.Stop()
	emulators, running = nil, false
	return code
}

// resolve decides the endpoints once: the environment's, or those of
// emulators started now. The caller holds mu.
func resolve() {
	if resolved {
		return
	}
	resolved = true
	if ep := os.Getenv("AWS_ENDPOINT_URL"); ep != "" {
		endpoints = awsclient.Endpoints{Default: ep, DynamoDB: os.Getenv("AWS_ENDPOINT_URL_DYNAMODB")}
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), emulator.StartTimeoutDefault)
	defer cancel()
	emulators, startErr = emulator.StartAll(ctx, emulator.AllOptions{})
	if startErr == nil {
		endpoints = emulators.Endpoints()
	}
}

// Endpoints returns the emulators' URLs, failing the test with the reason
// when there are none.
func Endpoints(t testing.TB) awsclient.Endpoints {
	t.Helper()
	mu.Lock()
	defer mu.Unlock()
	if !running {
		t.Fatal("awstest: the package's TestMain must call awstest.Main(m)")
	}
	resolve()
	if startErr != nil {
		t.Fatalf("awstest: the AWS emulators could not start: %v", startErr)
	}
	return endpoints
}

// Config returns an SDK configuration for the emulators.
func Config(t testing.TB) aws.Config {
	t.Helper()
	cfg := awsclient.ForEndpoint(Endpoints(t), awsenv.DefaultRegion)
	// As the SDK's own client: redirects are answers, not followed.
	cfg.HTTPClient = &http.Client{Transport: transport, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	return cfg
}

// Prefix returns a unique, bucket-safe resource name prefix for one test.
// When the test ends (after what it started later has stopped), its table
// is deleted: one DynamoDB Local serves the whole suite, and every table
// it keeps makes each later request dearer.
func Prefix(t testing.TB) string {
	t.Helper()
	b := make([]byte, 5)
	_, _ = rand.Read(b)
	prefix := "t" + hex.EncodeToString(b)
	t.Cleanup(func() { dropTable(resources.Named(job.Local, prefix).Table.Name) })
	return prefix
}

// dropTable deletes a test's table from the shared DynamoDB Local, if the
// test made one there; it is best effort (a test on emulators of its own
// made none there).
func dropTable(name string) {
	mu.Lock()
	ep, ok := endpoints, running && startErr == nil && endpoints.DynamoDB != ""
	mu.Unlock()
	if !ok {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cfg := awsclient.ForEndpoint(ep, awsenv.DefaultRegion)
	cfg.HTTPClient = &http.Client{Transport: transport}
	c := dynamodb.NewFromConfig(cfg)
	_, _ = c.DeleteTable(ctx, &dynamodb.DeleteTableInput{TableName: aws.String(name)})
}

// Env is one test's isolated, provisioned copy of the resources.
type Env struct {
	Config  aws.Config
	Clients awsclient.Clients
	Res     emulator.Provisioned
}

// Provision creates an isolated copy of the local environment's resources
// for this test and returns it.
func Provision(t testing.TB) Env {
	t.Helper()
	cfg := Config(t)
	clients := awsclient.New(cfg)
	def := resources.Named(job.Local, Prefix(t))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	res, err := emulator.Provision(ctx, clients, def)
	if err != nil {
		t.Fatalf("provisioning the emulator: %v", err)
	}
	return Env{Config: cfg, Clients: clients, Res: res}
}

// Name returns a unique name for an ad-hoc resource in a test.
func Name(t testing.TB, kind string) string {
	return fmt.Sprintf("%s-%s", Prefix(t), strings.ToLower(kind))
}

// Function is the environment a function of e gets at cold start: the
// configuration the CDK stacks give it, naming e's resources, with extra
// variables on top (secrets, timings), and the emulator's AWS settings.
func (e Env) Function(t testing.TB, fn string, extra map[string]string) handler.Env {
	t.Helper()
	vars := e.Res.Environ()
	maps.Copy(vars, extra)
	cfg, err := config.From(func(k string) string { return vars[k] }, fn)
	if err != nil {
		t.Fatalf("the %s function's configuration: %v", fn, err)
	}
	return handler.Env{Config: cfg, AWS: e.Config, Logger: slog.New(slog.DiscardHandler), Metrics: io.Discard}.WithDefaults()
}

// Handler builds the function fn's handler as its binary does: build (its
// package's New) from the configuration its stack gives it (extra added),
// on a freshly provisioned, private set of resources. A failure ends the
// test.
func Handler[H any](t testing.TB, fn string, extra map[string]string, build func(context.Context, handler.Env) (H, error)) H {
	t.Helper()
	h, err := build(context.Background(), Provision(t).Function(t, fn, extra))
	if err != nil {
		t.Fatalf("building the %s function: %v", fn, err)
	}
	return h
}
