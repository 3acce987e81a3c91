package lambdaruntime_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-lambda-go/lambdacontext"
	"go.uber.org/goleak"

	"github.com/conveyor/conveyor/localstack/awstest"
)

// The test binary doubles as a function's bootstrap: run with HELPER set,
// it is a Lambda function (lambda.Start against AWS_LAMBDA_RUNTIME_API)
// whose behaviour each invocation's payload chooses.
func TestMain(m *testing.M) {
	switch os.Getenv("HELPER") {
	case "":
		goleak.VerifyTestMain(awstest.Wrap(m))
	case "echo":
		lambda.Start(echo)
	case "stream":
		lambda.Start(stream)
	case "init-exit":
		log.Fatalf("helper: configuration: CONVEYOR_TABLE is not set")
	case "init-post":
		body := `{"errorMessage":"no secrets for you","errorType":"Runtime.ConfigError"}`
		resp, err := http.Post("http://"+os.Getenv("AWS_LAMBDA_RUNTIME_API")+"/2018-06-01/runtime/init/error", "application/json", strings.NewReader(body))
		if err == nil {
			resp.Body.Close()
		}
		os.Exit(1)
	}
	os.Exit(2)
}

// action is what a helper invocation does.
type action struct {
	// Do: "echo" (default), "fail", "panic", "crash", "hang".
	Do string `json:"do"`
	// Barrier, if set, is a URL to GET before answering.
	Barrier string `json:"barrier,omitempty"`
}

// answer is what an echo invocation returns.
type answer struct {
	PID        int               `json:"pid"`
	RequestID  string            `json:"requestId"`
	ARN        string            `json:"arn"`
	Function   string            `json:"function"`
	Memory     int               `json:"memory"`
	DeadlineIn time.Duration     `json:"deadlineIn"`
	Env        map[string]string `json:"env"`
}

func echo(ctx context.Context, a action) (answer, error) {
	if a.Barrier != "" {
		resp, err := http.Get(a.Barrier)
		if err != nil {
			return answer{}, err
		}
		resp.Body.Close()
	}
	switch a.Do {
	case "fail":
		return answer{}, errors.New("boom")
	case "panic":
		panic("kaboom")
	case "crash":
		os.Exit(3)
	case "hang":
		select {} // ignores its context: only a kill ends it
	}
	lc, _ := lambdacontext.FromContext(ctx)
	dl, _ := ctx.Deadline()
	env := map[string]string{}
	for _, k := range []string{"AWS_LAMBDA_RUNTIME_API", "AWS_LAMBDA_FUNCTION_VERSION", "AWS_REGION", "_HANDLER", "LAMBDA_TASK_ROOT", "CONVEYOR_SAMPLE", "HOME"} {
		env[k] = os.Getenv(k)
	}
	return answer{PID: os.Getpid(), RequestID: lc.AwsRequestID, ARN: lc.InvokedFunctionArn, Function: lambdacontext.FunctionName,
		Memory: lambdacontext.MemoryLimitInMB, DeadlineIn: time.Until(dl), Env: env}, nil
}

// streamReq is what a stream invocation does, from its query string:
// first=<text> is written at once; then, after GET gate=<url>, last=<text>,
// or a mid-stream failure with fail=1.
func stream(ctx context.Context, req events.LambdaFunctionURLRequest) (*events.LambdaFunctionURLStreamingResponse, error) {
	q := req.QueryStringParameters
	if q["refuse"] != "" {
		return nil, errors.New("refused")
	}
	pr, pw := io.Pipe()
	go func() {
		if _, err := io.WriteString(pw, q["first"]); err != nil {
			return
		}
		if q["gate"] != "" {
			resp, err := http.Get(q["gate"])
			if err != nil {
				pw.CloseWithError(err)
				return
			}
			resp.Body.Close()
		}
		if q["hold"] != "" {
			// Write until the runtime stops reading.
			tick := time.NewTicker(20 * time.Millisecond)
			defer tick.Stop()
			for {
				select {
				case <-ctx.Done():
					pw.CloseWithError(ctx.Err())
					return
				case <-tick.C:
					if _, err := io.WriteString(pw, "."); err != nil {
						return
					}
				}
			}
		}
		if q["fail"] != "" {
			pw.CloseWithError(errors.New("the stream broke"))
			return
		}
		_, _ = io.WriteString(pw, q["last"])
		pw.Close()
	}()
	return &events.LambdaFunctionURLStreamingResponse{StatusCode: http.StatusTeapot, Body: pr,
		Headers: map[string]string{"Content-Type": "text/plain", "X-Pid": fmt.Sprint(os.Getpid())},
		Cookies: []string{"a=b"}}, nil
}

// payload encodes v.
func payload(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func decode(t *testing.T, b []byte) answer {
	t.Helper()
	var a answer
	if err := json.NewDecoder(bytes.NewReader(b)).Decode(&a); err != nil {
		t.Fatalf("decoding %s: %v", b, err)
	}
	return a
}
