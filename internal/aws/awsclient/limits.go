package awsclient

import (
	"context"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	"github.com/aws/smithy-go"
	"github.com/aws/smithy-go/middleware"
)

// MaxPutEventsBytes is EventBridge's limit on a PutEvents request: 256 KiB
// of entries in all, each entry counted as EventBridge counts it (14 bytes
// for its time, and the UTF-8 bytes of its source, detail type, detail and
// resources).
const MaxPutEventsBytes = 256 * 1024

// PutEventsEntriesSize is the size EventBridge counts for in's entries.
func PutEventsEntriesSize(in *eventbridge.PutEventsInput) int {
	n := 0
	for _, e := range in.Entries {
		if e.Time != nil {
			n += 14
		}
		n += len(aws.ToString(e.Source)) + len(aws.ToString(e.DetailType)) + len(aws.ToString(e.Detail))
		for _, r := range e.Resources {
			n += len(r)
		}
	}
	return n
}

// awsLimits refuses, before it is sent, a request the emulators would take
// but AWS refuses: a PutEvents whose entries exceed MaxPutEventsBytes (moto
// takes any size), answered with the error EventBridge answers it with.
// ForEndpoint adds it, so nothing that runs against the emulators finds
// them kinder than AWS.
func awsLimits(stack *middleware.Stack) error {
	return stack.Initialize.Add(middleware.InitializeMiddlewareFunc("conveyorAWSLimits",
		func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
			if p, ok := in.Parameters.(*eventbridge.PutEventsInput); ok && PutEventsEntriesSize(p) > MaxPutEventsBytes {
				return middleware.InitializeOutput{}, middleware.Metadata{}, &smithy.GenericAPIError{Code: "ValidationException",
					Message: "Total size of the entries in the request is over the limit.", Fault: smithy.FaultClient}
			}
			return next.HandleInitialize(ctx, in)
		}), middleware.After)
}
