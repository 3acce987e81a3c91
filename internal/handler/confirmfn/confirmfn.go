// Package confirmfn is the confirm function, invoked by the upload
// bucket's ObjectCreated notification: its handler and its wiring.
package confirmfn

import (
	"context"
	"errors"
	"net/url"
	"strings"

	"github.com/aws/aws-lambda-go/events"

	"github.com/conveyor/conveyor/internal/handler"
	"github.com/conveyor/conveyor/internal/handler/bucket"
	"github.com/conveyor/conveyor/internal/resources"
	"github.com/conveyor/conveyor/internal/uploads"
)

// Handler is the confirm function: it settles the upload of every object
// in an S3 ObjectCreated event. An error makes S3/Lambda retry the event.
func Handler(svc *uploads.Service) func(context.Context, events.S3Event) error {
	return func(ctx context.Context, ev events.S3Event) error {
		var errs []error
		for _, rec := range ev.Records {
			if !strings.HasPrefix(rec.EventName, "ObjectCreated:") && !strings.HasPrefix(rec.EventName, "s3:ObjectCreated:") {
				continue
			}
			key, err := url.QueryUnescape(rec.S3.Object.Key) // S3 event keys are URL-encoded
			if err != nil {
				key = rec.S3.Object.Key
			}
			if _, err := svc.ObjectCreated(ctx, rec.S3.Bucket.Name, key); err != nil {
				errs = append(errs, err)
			}
		}
		return errors.Join(errs...)
	}
}

// Name is the function's name in the resource definition.
const Name = resources.FuncConfirm

// Resolve completes the configuration at cold start: nil, the confirm
// function reads no secret.
var Resolve handler.Resolver

// New wires the confirm function: the table and the bucket.
func New(_ context.Context, env handler.Env) (func(context.Context, events.S3Event) error, error) {
	db := env.DynamoDB()
	return Handler(bucket.Uploads(env, env.Store(db), bucket.S3(env))), nil
}
