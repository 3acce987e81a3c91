package awsenv

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsmiddleware "github.com/aws/aws-sdk-go-v2/aws/middleware"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/aws/smithy-go/middleware"
	smithyhttp "github.com/aws/smithy-go/transport/http"
)

// VarLog names the file a function appends its recorded accesses to, one
// JSON Call per line (FromEnv). The local stack sets it per function in
// binary mode; unset, nothing is recorded.
const VarLog = "CONVEYOR_AWS_CALL_LOG"

// VarAccount is the SDK's standard variable for the account id, which the
// recorder needs to complete ARNs that requests name by name (a table).
const VarAccount = "AWS_ACCOUNT_ID"

// Call is one recorded access, as a line of the log.
type Call struct {
	// Function is the function that made the request (resources.Func…).
	Function string `json:"function"`
	// Service and Operation are the SDK's names of the request.
	Service   string `json:"service"`
	Operation string `json:"operation"`
	Access
	// Presigned is set for a request signed to be sent by someone else
	// (a presigned upload URL): S3 authorises it as the signer.
	Presigned bool `json:"presigned,omitempty"`
}

// Recorder writes every distinct access the requests made through the
// configurations it is attached to need, tagged with one function. It is
// safe for concurrent use, and for several processes appending to one
// file (each line is one write).
type Recorder struct {
	function, account string
	mu                sync.Mutex
	w                 io.Writer
	seen              map[string]bool
}

// NewRecorder records the requests of function into w; account completes
// ARNs of resources named by name.
func NewRecorder(function, account string, w io.Writer) *Recorder {
	return &Recorder{function: function, account: account, w: w, seen: map[string]bool{}}
}

// FromEnv attaches to cfg a Recorder of function appending to the file
// VarLog names (no recorder when it is unset). The account is VarAccount's.
func FromEnv(cfg aws.Config, function string) (aws.Config, error) {
	path := os.Getenv(VarLog)
	if path == "" {
		return cfg, nil
	}
	account := os.Getenv(VarAccount)
	if account == "" {
		return cfg, fmt.Errorf("%s is set but %s is not: the recorder needs the account to complete ARNs", VarLog, VarAccount)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return cfg, fmt.Errorf("opening the AWS call log: %w", err)
	}
	return NewRecorder(function, account, f).Attach(cfg), nil
}

// Attach adds the recording middleware to cfg and returns it.
func (r *Recorder) Attach(cfg aws.Config) aws.Config {
	region := cfg.Region
	cfg.APIOptions = append(append([]func(*middleware.Stack) error{}, cfg.APIOptions...), func(stack *middleware.Stack) error {
		return stack.Initialize.Add(middleware.InitializeMiddlewareFunc("conveyorRecordAccess",
			func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
				out, md, err := next.HandleInitialize(ctx, in)
				svc, op := awsmiddleware.GetServiceID(ctx), awsmiddleware.GetOperationName(ctx)
				if svc != "" && op != "" {
					_, presigned := out.Result.(*v4.PresignedHTTPRequest)
					var resp *smithyhttp.ResponseError
					notFound := errors.As(err, &resp) && resp.HTTPStatusCode() == http.StatusNotFound
					output := out.Result
					if presigned {
						output = nil
					}
					r.record(svc, op, presigned, Accesses(Request{Service: svc, Operation: op, Input: in.Parameters, Output: output,
						NotFound: notFound, Region: region, Account: r.account}))
				}
				return out, md, err
			}), middleware.After)
	})
	return cfg
}

func (r *Recorder) record(svc, op string, presigned bool, acc []Access) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, a := range acc {
		k := svc + " " + op + " " + a.key()
		if r.seen[k] {
			continue
		}
		r.seen[k] = true
		line, err := json.Marshal(Call{Function: r.function, Service: svc, Operation: op, Access: a, Presigned: presigned})
		if err != nil {
			continue
		}
		_, _ = r.w.Write(append(line, '\n'))
	}
}

// Read parses a log written by Recorders.
func Read(rd io.Reader) ([]Call, error) {
	var calls []Call
	dec := json.NewDecoder(rd)
	for {
		var c Call
		if err := dec.Decode(&c); err == io.EOF {
			return calls, nil
		} else if err != nil {
			return calls, fmt.Errorf("reading the AWS call log: %w", err)
		}
		calls = append(calls, c)
	}
}
