package handler

import (
	"context"
	"errors"
	"net/url"
	"strings"

	"github.com/aws/aws-lambda-go/events"

	"github.com/conveyor/conveyor/internal/aws/bucket"
	"github.com/conveyor/conveyor/internal/aws/store"
	"github.com/conveyor/conveyor/internal/resources"
	"github.com/conveyor/conveyor/internal/uploads"
)

// ConfirmHandler is the confirm function's handler: it settles the upload
// of every object in an S3 ObjectCreated event. An error makes S3/Lambda
// retry the event.
func ConfirmHandler(svc *uploads.Service) func(context.Context, events.S3Event) error {
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

// Confirm is the function the upload bucket's ObjectCreated notification
// invokes: it checks each new object and confirms or rejects its upload. It
// reads no secret at cold start.
var Confirm = Function[func(context.Context, events.S3Event) error]{Name: resources.FuncConfirm, New: NewConfirm}

// NewConfirm wires the confirm function: the table and the bucket.
func NewConfirm(_ context.Context, env Env) (func(context.Context, events.S3Event) error, error) {
	db := env.DynamoDB()
	return ConfirmHandler(UploadsService(env, env.Store(db), bucket.New(env.AWS, env.Config.Bucket))), nil
}

// UploadsService is the uploads service of env over the table st and the
// upload bucket b. The uploads function and the local stack build theirs
// here too, so an upload is signed and settled under one configuration: no
// queue sender, no sealer, no kind of job.
func UploadsService(env Env, st *store.Store, b *bucket.Bucket) *uploads.Service {
	cfg := env.Config
	return uploads.New(uploads.Config{
		Store: st, Objects: b, Prefix: "uploads/", MaxSize: cfg.MaxUploadSize, Expiry: cfg.UploadExpiry,
		Now: env.Now, Logger: env.Log(),
	})
}
