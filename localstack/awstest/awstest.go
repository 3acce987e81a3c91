// Package awstest gives tests a real AWS emulator: a package's TestMain calls
// Main, which starts its own moto process when AWS_ENDPOINT_URL is not set
// (or uses the one it names), and each test gets an isolated, provisioned
// copy of the resources under a unique name prefix. If the emulator cannot
// start, every test that needs it fails with the reason; none skips.
package awstest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/conveyor/conveyor/internal/awsclient"
	"github.com/conveyor/conveyor/internal/resources"
	"github.com/conveyor/conveyor/localstack/emulator"
	"github.com/conveyor/conveyor/localstack/provision"
)

var (
	mu       sync.Mutex
	proc     *emulator.Process
	endpoint string
	startErr error
	started  bool
)

// Main runs the package's tests against an emulator and exits. Use it as
//
//	func TestMain(m *testing.M) { awstest.Main(m) }
func Main(m *testing.M) {
	if ep := os.Getenv("AWS_ENDPOINT_URL"); ep != "" {
		endpoint = ep
	} else {
		ctx, cancel := context.WithTimeout(context.Background(), emulator.StartTimeoutDefault)
		proc, startErr = emulator.Start(ctx, emulator.Options{})
		cancel()
		if startErr == nil {
			endpoint = proc.Endpoint
		}
	}
	started = true
	code := m.Run()
	if proc != nil {
		_ = proc.Stop()
	}
	os.Exit(code)
}

// Endpoint returns the emulator's URL, failing the test with the reason when
// there is none.
func Endpoint(t testing.TB) string {
	t.Helper()
	mu.Lock()
	defer mu.Unlock()
	switch {
	case !started:
		t.Fatal("awstest: the package's TestMain must call awstest.Main(m)")
	case startErr != nil:
		t.Fatalf("awstest: the AWS emulator could not start: %v", startErr)
	}
	return endpoint
}

// Config returns an SDK configuration for the emulator.
func Config(t testing.TB) aws.Config {
	t.Helper()
	return awsclient.ForEndpoint(Endpoint(t), awsclient.DefaultRegion)
}

// Prefix returns a unique, bucket-safe resource name prefix for one test.
func Prefix(t testing.TB) string {
	t.Helper()
	b := make([]byte, 5)
	_, _ = rand.Read(b)
	return "t" + hex.EncodeToString(b)
}

// Env is one test's isolated, provisioned copy of the resources.
type Env struct {
	Config  aws.Config
	Clients awsclient.Clients
	Res     provision.Result
}

// Provision creates an isolated copy of the local environment's resources
// for this test and returns it.
func Provision(t testing.TB) Env {
	t.Helper()
	cfg := Config(t)
	clients := awsclient.New(cfg)
	def := resources.Named(resources.Local, Prefix(t))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	res, err := provision.Apply(ctx, clients, def)
	if err != nil {
		t.Fatalf("provisioning the emulator: %v", err)
	}
	return Env{Config: cfg, Clients: clients, Res: res}
}

// Name returns a unique name for an ad-hoc resource in a test.
func Name(t testing.TB, kind string) string {
	return fmt.Sprintf("%s-%s", Prefix(t), strings.ToLower(kind))
}

// PauseEmulator freezes the package's own emulator for d (an outage). It
// fails the test when the emulator is not this package's own process.
func PauseEmulator(t testing.TB, d time.Duration) {
	t.Helper()
	if proc == nil {
		t.Fatal("awstest: the emulator is not ours to pause (AWS_ENDPOINT_URL is set)")
	}
	proc.Pause(d)
}
