// Package bucket wires the upload bucket's side of a function: the S3
// client and the uploads service of its environment. The uploads and
// confirm functions (and the recovery function's retention, and the local
// stack) build them here, so that a function reaching the bucket links S3
// and nothing else with it: no queue sender, no sealer, no kind of job.
package bucket

import (
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/conveyor/conveyor/internal/awsenv"
	"github.com/conveyor/conveyor/internal/handler"
	"github.com/conveyor/conveyor/internal/store"
	"github.com/conveyor/conveyor/internal/uploads"
)

// S3 is an S3 client for env, addressing buckets by path when an endpoint
// of our own is set (the emulators need it).
func S3(env handler.Env) *s3.Client {
	return s3.NewFromConfig(env.AWS, func(o *s3.Options) { o.UsePathStyle = awsenv.PathStyle(env.AWS) })
}

// Uploads is the uploads service of env (the uploads and confirm
// functions).
func Uploads(env handler.Env, st *store.Store, client *s3.Client) *uploads.Service {
	cfg := env.Config
	return uploads.New(uploads.Config{
		Store: st, S3: client, Presign: s3.NewPresignClient(client), Bucket: cfg.Bucket,
		Prefix: "uploads/", MaxSize: cfg.MaxUploadSize, Expiry: cfg.UploadExpiry, Now: env.Now, Logger: env.Log(),
	})
}
