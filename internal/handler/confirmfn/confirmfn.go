// Package confirmfn is the confirm function, invoked by the upload
// bucket's ObjectCreated notification: its handler and its wiring.
package confirmfn

import (
	"context"
	"errors"
	"net/url"
	"strings"

	"github.com/aws/aws-lambda-go/events"

	"github.com/conveyor/conveyor/internal/aws/bucket"
	"github.com/conveyor/conveyor/internal/handler"
	"github.com/conveyor/conveyor/internal/resources"
	"github.com/conveyor/conveyor/internal/store"
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
	return Handler(Uploads(env, env.Store(db), bucket.New(env.AWS, env.Config.Bucket))), nil
}

// Uploads is the uploads service of env over the table st and the upload
// bucket b. The uploads function (uploadsfn) and the local stack build
// theirs here too, so an upload is signed and settled under one
// configuration; it links S3 and nothing else with it: no queue sender, no
// sealer, no kind of job.
func Uploads(env handler.Env, st *store.Store, b *bucket.Bucket) *uploads.Service {
	cfg := env.Config
	return uploads.New(uploads.Config{
		Store: st, Objects: b, Prefix: "uploads/", MaxSize: cfg.MaxUploadSize, Expiry: cfg.UploadExpiry,
		Now: env.Now, Logger: env.Log(),
	})
}
