// Package bucket makes a function's S3 client and the uploads service on
// it (the api, confirm and recovery functions, and the publisher's media).
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

// Uploads is the uploads service of env (the api and confirm functions).
func Uploads(env handler.Env, st *store.Store, client *s3.Client) *uploads.Service {
	cfg := env.Config
	return uploads.New(uploads.Config{
		Store: st, S3: client, Presign: s3.NewPresignClient(client), Bucket: cfg.Bucket,
		Prefix: "uploads/", MaxSize: cfg.MaxUploadSize, Expiry: cfg.UploadExpiry, Now: env.Now, Logger: env.Log(),
	})
}
