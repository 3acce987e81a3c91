package awsclient_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/conveyor/conveyor/internal/aws/awsclient"
	"github.com/conveyor/conveyor/internal/aws/awsenv"
)

// recorder is an endpoint that answers every JSON-protocol call with an
// empty list and remembers which operations reached it.
type recorder struct {
	*httptest.Server
	mu  sync.Mutex
	ops []string
}

func newRecorder(t *testing.T) *recorder {
	t.Helper()
	r := &recorder{}
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		_, _ = io.Copy(io.Discard, req.Body)
		target := req.Header.Get("X-Amz-Target")
		r.mu.Lock()
		r.ops = append(r.ops, target)
		r.mu.Unlock()
		w.Header().Set("Content-Type", "application/x-amz-json-1.0")
		switch {
		case strings.HasPrefix(target, "DynamoDB_"):
			_, _ = io.WriteString(w, `{"TableNames":[]}`)
		default:
			_, _ = io.WriteString(w, `{"QueueUrls":[]}`)
		}
	}))
	t.Cleanup(r.Close)
	return r
}

func (r *recorder) seen() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return strings.Join(r.ops, ",")
}

// call makes one DynamoDB and one SQS request through c.
func call(t *testing.T, c awsclient.Clients) {
	t.Helper()
	ctx := context.Background()
	if _, err := c.DynamoDB.ListTables(ctx, &dynamodb.ListTablesInput{}); err != nil {
		t.Fatalf("DynamoDB ListTables: %v", err)
	}
	if _, err := c.SQS.ListQueues(ctx, &sqs.ListQueuesInput{}); err != nil {
		t.Fatalf("SQS ListQueues: %v", err)
	}
}

func TestForEndpointGivesDynamoDBItsOwnEndpoint(t *testing.T) {
	t.Parallel()
	moto, ddb := newRecorder(t), newRecorder(t)
	counter := awsclient.NewCounter()
	cfg := counter.Attach(awsclient.ForEndpoint(awsclient.Endpoints{Default: moto.URL, DynamoDB: ddb.URL}, ""))
	call(t, awsclient.New(cfg))
	// A client made straight from the configuration finds it too (the SDK's
	// per-service endpoint source).
	if _, err := dynamodb.NewFromConfig(cfg).ListTables(context.Background(), &dynamodb.ListTablesInput{}); err != nil {
		t.Fatalf("DynamoDB ListTables: %v", err)
	}
	if got, want := ddb.seen(), "DynamoDB_20120810.ListTables,DynamoDB_20120810.ListTables"; got != want {
		t.Errorf("DynamoDB endpoint saw %q, want %q", got, want)
	}
	if got, want := moto.seen(), "AmazonSQS.ListQueues"; got != want {
		t.Errorf("default endpoint saw %q, want %q", got, want)
	}
	if got := counter.Get("DynamoDB.ListTables"); got != 2 {
		t.Errorf("counted %d DynamoDB.ListTables, want 2", got)
	}
	if got := counter.Get("SQS.ListQueues"); got != 1 {
		t.Errorf("counted %d SQS.ListQueues, want 1", got)
	}
}

func TestForEndpointWithoutDynamoDBUsesDefault(t *testing.T) {
	t.Parallel()
	moto := newRecorder(t)
	call(t, awsclient.New(awsclient.ForEndpoint(awsclient.Endpoints{Default: moto.URL}, "")))
	if got, want := moto.seen(), "DynamoDB_20120810.ListTables,AmazonSQS.ListQueues"; got != want {
		t.Errorf("default endpoint saw %q, want %q", got, want)
	}
}

// TestLoadReadsStandardEndpointVariables proves the product needs nothing but
// the SDK's standard variables: AWS_ENDPOINT_URL_DYNAMODB moves DynamoDB, the
// rest follows AWS_ENDPOINT_URL, and dummy credentials are used. It sets the
// process environment, so it cannot run in parallel.
func TestLoadReadsStandardEndpointVariables(t *testing.T) {
	moto, ddb := newRecorder(t), newRecorder(t)
	t.Setenv("AWS_ENDPOINT_URL", moto.URL)
	t.Setenv("AWS_ENDPOINT_URL_DYNAMODB", ddb.URL)
	t.Setenv("AWS_ACCESS_KEY_ID", "")
	t.Setenv("AWS_PROFILE", "")
	t.Setenv("AWS_REGION", "")
	t.Setenv("AWS_DEFAULT_REGION", "")
	t.Setenv("AWS_CONFIG_FILE", "/nonexistent")
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent")
	if !awsenv.Emulated() {
		t.Fatal("Emulated() = false with AWS_ENDPOINT_URL set")
	}
	cfg, err := awsclient.Load(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	creds, err := cfg.Credentials.Retrieve(context.Background())
	if err != nil || creds.AccessKeyID != "test" {
		t.Fatalf("credentials = %q, %v; want the dummy key", creds.AccessKeyID, err)
	}
	if cfg.Region != awsenv.DefaultRegion {
		t.Errorf("region %q, want %q", cfg.Region, awsenv.DefaultRegion)
	}
	call(t, awsclient.New(cfg))
	if got, want := ddb.seen(), "DynamoDB_20120810.ListTables"; got != want {
		t.Errorf("AWS_ENDPOINT_URL_DYNAMODB saw %q, want %q", got, want)
	}
	if got, want := moto.seen(), "AmazonSQS.ListQueues"; got != want {
		t.Errorf("AWS_ENDPOINT_URL saw %q, want %q", got, want)
	}

	// A hand-built configuration keeps its DynamoDB endpoint even where the
	// environment names only AWS_ENDPOINT_URL (the SDK then ignores
	// per-service sources).
	if err := os.Unsetenv("AWS_ENDPOINT_URL_DYNAMODB"); err != nil { // t.Setenv restores it
		t.Fatal(err)
	}
	other := newRecorder(t)
	call(t, awsclient.New(awsclient.ForEndpoint(awsclient.Endpoints{Default: moto.URL, DynamoDB: other.URL}, "")))
	if got, want := other.seen(), "DynamoDB_20120810.ListTables"; got != want {
		t.Errorf("ForEndpoint's DynamoDB endpoint saw %q, want %q", got, want)
	}
}

// TestLambdaEnvReachesDynamoDBLocal: the clients made from a function's
// settings (LambdaEnv reads them; TestLambdaReadsWhatLambdaSets checks
// that) send DynamoDB to AWS_ENDPOINT_URL_DYNAMODB.
func TestLambdaEnvReachesDynamoDBLocal(t *testing.T) {
	t.Setenv("AWS_ACCESS_KEY_ID", "AKIDEXAMPLE")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "secret")
	t.Setenv("AWS_ENDPOINT_URL", "")
	t.Setenv("AWS_ENDPOINT_URL_DYNAMODB", "http://127.0.0.1:1")
	cfg, err := awsenv.LambdaEnv()
	if err != nil {
		t.Fatal(err)
	}
	if got := awsclient.New(cfg).DynamoDB.Options().BaseEndpoint; got == nil || *got != "http://127.0.0.1:1" {
		t.Errorf("DynamoDB endpoint = %v, want AWS_ENDPOINT_URL_DYNAMODB", got)
	}
}

// TestLoadKeepsAProfilesRegion: with no region variable, the named
// profile's region is used (it was replaced by the default before), and
// the default applies only when nothing names one.
func TestLoadKeepsAProfilesRegion(t *testing.T) {
	dir := t.TempDir()
	cfgFile := filepath.Join(dir, "config")
	if err := os.WriteFile(cfgFile, []byte("[profile ops]\nregion = eu-central-1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("AWS_ENDPOINT_URL", "")
	t.Setenv("AWS_ENDPOINT_URL_DYNAMODB", "")
	t.Setenv("AWS_REGION", "")
	t.Setenv("AWS_DEFAULT_REGION", "")
	t.Setenv("AWS_CONFIG_FILE", cfgFile)
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent")
	t.Setenv("AWS_PROFILE", "ops")
	cfg, err := awsclient.Load(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Region != "eu-central-1" {
		t.Errorf("with the profile ops: region %q, want the profile's eu-central-1", cfg.Region)
	}
	t.Setenv("AWS_PROFILE", "")
	if cfg, err = awsclient.Load(context.Background()); err != nil || cfg.Region != awsenv.DefaultRegion {
		t.Errorf("with no profile: region %q (%v), want the default %q", cfg.Region, err, awsenv.DefaultRegion)
	}
}
