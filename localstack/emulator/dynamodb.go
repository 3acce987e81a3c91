package emulator

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/conveyor/conveyor/internal/aws/awsclient"
)

// DynamoDBLocalMainClass is DynamoDB Local's entry point (3.x; 1.x had it
// under com.amazonaws).
const DynamoDBLocalMainClass = "software.amazon.dynamodb.services.local.main.ServerRunner"

// DynamoDBLocalDir is where the Makefile installs DynamoDB Local, relative
// to the repository root: lib/ holds the jars and the sqlite4java natives,
// java is a link to the Java runtime (17 or newer) chosen to run it.
const DynamoDBLocalDir = ".cache/dynamodb-local"

// DynamoDBJavaOptionsDefault are the JVM options DynamoDB Local runs with
// unless told otherwise. C1 only (no C2 compiler): start-up costs half the
// CPU (≈2.2 s instead of ≈4.8 s of CPU until the first answer, measured on
// a loaded two-core machine), which is what decides the start time when
// test binaries start their own copies side by side; a steady stream of
// transactions runs about as fast (≈230 vs ≈260 two-item transactions/s
// after warm-up, faster before it).
var DynamoDBJavaOptionsDefault = []string{"-XX:TieredStopAtLevel=1"}

// DynamoDBOptions configures StartDynamoDB. Every field is optional.
type DynamoDBOptions struct {
	// Java runs DynamoDB Local. Default: $CONVEYOR_JAVA, then the link the
	// Makefile made (.cache/dynamodb-local/java), then java on PATH.
	Java string
	// JavaOptions are JVM options placed before the class path (default
	// DynamoDBJavaOptionsDefault).
	JavaOptions []string
	// Dir holds DynamoDB Local's lib/. Default: $CONVEYOR_DYNAMODB_LOCAL,
	// then the repository's .cache/dynamodb-local.
	Dir string
	// Port to listen on; 0 picks a free loopback port.
	Port int
	// Log receives DynamoDB Local's output; nil discards it.
	Log io.Writer
	// StartTimeout bounds the wait for readiness (default StartTimeoutDefault).
	StartTimeout time.Duration
	// DataDir, when set, is where DynamoDB Local keeps its database
	// (-dbPath): tables and items outlive the process. Empty: in memory.
	DataDir string
	// Engine is the emulator to run (EngineDynamoDBLocal, EngineDynoxide);
	// default $CONVEYOR_DYNAMODB_ENGINE, then DynamoDB Local.
	Engine string
	// Dynoxide is the dynoxide executable (default FindDynoxide).
	Dynoxide string
}

// StartDynamoDB launches the DynamoDB emulator opts.Engine names and waits
// until it answers a real DynamoDB request (ListTables); dynoxide is
// startDynoxide's. DynamoDB Local runs in memory unless opts.DataDir, with
// -sharedDb: one database whatever the caller's access key and region
// (without it DynamoDB Local keeps one per key and region, and a shell or
// tool with other credentials would see none of our tables); tests isolate
// themselves by table prefix. Telemetry is off: nothing leaves the machine.
func StartDynamoDB(ctx context.Context, opts DynamoDBOptions) (*Process, error) {
	engine, err := Engine(opts.Engine)
	if err != nil {
		return nil, err
	}
	if engine == EngineDynoxide {
		port := opts.Port
		if port == 0 {
			if port, err = FreePort(); err != nil {
				return nil, err
			}
		}
		return startDynoxide(ctx, opts, port)
	}
	java, dir := opts.Java, opts.Dir
	if java == "" || dir == "" {
		fj, fd, err := FindDynamoDBLocal()
		if err != nil {
			return nil, err
		}
		if java == "" {
			java = fj
		}
		if dir == "" {
			dir = fd
		}
	}
	port := opts.Port
	if port == 0 {
		if port, err = FreePort(); err != nil {
			return nil, err
		}
	}
	jvm := opts.JavaOptions
	if jvm == nil {
		jvm = DynamoDBJavaOptionsDefault
	}
	storage := []string{"-inMemory"}
	if opts.DataDir != "" {
		abs, err := filepath.Abs(opts.DataDir)
		if err != nil {
			return nil, err
		}
		if err := os.MkdirAll(abs, 0o700); err != nil {
			return nil, fmt.Errorf("DynamoDB Local's data directory: %w", err)
		}
		storage = []string{"-dbPath", abs}
	}
	args := append(append([]string{}, jvm...), "-Djava.library.path=lib", "-cp", "lib/*", DynamoDBLocalMainClass)
	args = append(append(args, storage...), "-sharedDb", "-disableTelemetry", "-port", strconv.Itoa(port))
	cmd := exec.Command(java, args...)
	cmd.Dir = dir
	return launch(ctx, launchSpec{
		name: "DynamoDB Local", cmd: cmd, port: port, log: opts.Log, timeout: opts.StartTimeout, ready: DynamoDBReady,
		hint: "run `make emulator` to reinstall it (it needs Java 17+; the Makefile installs one into .venv when missing)",
	})
}

// DynamoDBReady returns nil when the DynamoDB endpoint answers ListTables.
func DynamoDBReady(ctx context.Context, endpoint string) error {
	cfg := awsclient.ForEndpoint(awsclient.Endpoints{Default: endpoint, DynamoDB: endpoint}, "")
	cfg.RetryMaxAttempts = 1
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	_, err := dynamodb.NewFromConfig(cfg).ListTables(ctx, &dynamodb.ListTablesInput{Limit: aws.Int32(1)})
	return err
}

// FindDynamoDBLocal locates the Java runtime and the directory holding
// DynamoDB Local's lib/ (see DynamoDBOptions for the order).
func FindDynamoDBLocal() (java, dir string, err error) {
	dir = os.Getenv("CONVEYOR_DYNAMODB_LOCAL")
	if dir == "" {
		root, rerr := RepoRoot()
		if rerr != nil {
			return "", "", fmt.Errorf("finding DynamoDB Local: %w", rerr)
		}
		dir = filepath.Join(root, DynamoDBLocalDir)
	}
	if _, serr := os.Stat(filepath.Join(dir, "lib", "DynamoDBLocal.jar")); serr != nil {
		return "", "", fmt.Errorf("DynamoDB Local not found in %s: run `make emulator` (make test and make run do it), or set CONVEYOR_DYNAMODB_LOCAL", dir)
	}
	java = os.Getenv("CONVEYOR_JAVA")
	if java == "" {
		if _, serr := os.Stat(filepath.Join(dir, "java")); serr == nil {
			java = filepath.Join(dir, "java")
		}
	}
	if java == "" {
		if java, err = exec.LookPath("java"); err != nil {
			return "", "", errors.New("no Java runtime for DynamoDB Local: run `make emulator` (it installs one into .venv when there is no Java 17+), or set CONVEYOR_JAVA")
		}
	}
	return java, dir, nil
}
