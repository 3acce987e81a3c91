// Package bucket is the S3 adapter: the one package that imports the S3
// SDK. A Bucket is one bucket and the operations the domain makes on it —
// presigned PUTs, HEAD, streamed GETs, DELETE — in the domain's terms
// (package uploads, aliased here): a missing object is ErrNotFound, a failed
// If-Match is ErrPreconditionFailed, a range past an empty object's end is
// ErrRangeNotSatisfiable, every other error is the SDK's own. The domain
// packages (uploads, publish, recovery) each declare the few methods they
// call and are given a Bucket at wiring time.
package bucket

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/conveyor/conveyor/internal/aws/awsenv"
	"github.com/conveyor/conveyor/internal/uploads"
)

// The errors of the domain's terms (package uploads).
var (
	// ErrNotFound: S3 answered 404 (uploads.ErrObjectNotFound).
	ErrNotFound = uploads.ErrObjectNotFound
	// ErrPreconditionFailed: S3 answered 412 (uploads.ErrPreconditionFailed).
	ErrPreconditionFailed = uploads.ErrPreconditionFailed
	// ErrRangeNotSatisfiable: S3 answered 416 (uploads.ErrRangeNotSatisfiable).
	ErrRangeNotSatisfiable = uploads.ErrRangeNotSatisfiable
)

// The types of the domain's terms (package uploads).
type (
	// Object describes a stored object (uploads.Object).
	Object = uploads.Object
	// Headers are the headers a PUT sends (uploads.Headers).
	Headers = uploads.Headers
	// Presigned is a signed request (uploads.Presigned).
	Presigned = uploads.Presigned
	// GetOptions narrow a Get (uploads.GetOptions).
	GetOptions = uploads.GetOptions
)

// Bucket is one S3 bucket. Its methods are safe for concurrent use.
type Bucket struct {
	name    string
	client  *s3.Client
	presign *s3.PresignClient
}

// Option adjusts a Bucket.
type Option func(*options)

type options struct{ pathStyle bool }

// PathStyle addresses the bucket by path (https://host/bucket/key) rather
// than by virtual host; the default is by path exactly when cfg names an
// endpoint of its own (the emulators need it: awsenv.PathStyle).
func PathStyle(on bool) Option { return func(o *options) { o.pathStyle = on } }

// New returns the bucket named name, reached with cfg (one S3 client per
// Bucket: make it once per cold start).
func New(cfg aws.Config, name string, opts ...Option) *Bucket {
	o := options{pathStyle: awsenv.PathStyle(cfg)}
	for _, opt := range opts {
		opt(&o)
	}
	client := s3.NewFromConfig(cfg, func(so *s3.Options) { so.UsePathStyle = o.pathStyle })
	return &Bucket{name: name, client: client, presign: s3.NewPresignClient(client)}
}

// Name is the bucket's name.
func (b *Bucket) Name() string { return b.name }

// PresignPut signs a PUT of key that must carry exactly h, valid for
// expires. The signature binds each header of h, so a PUT of another
// type, size or disposition is refused by S3.
func (b *Bucket) PresignPut(ctx context.Context, key string, h Headers, expires time.Duration) (Presigned, error) {
	in := &s3.PutObjectInput{Bucket: aws.String(b.name), Key: aws.String(key)}
	setHeaders(in, h)
	req, err := b.presign.PresignPutObject(ctx, in, s3.WithPresignExpires(expires))
	if err != nil {
		return Presigned{}, err
	}
	return Presigned{Method: req.Method, URL: req.URL, SignedHeader: req.SignedHeader}, nil
}

// Put stores body at key with h and returns the stored object's ETag and
// version. The product's objects arrive by presigned PUT (PresignPut); Put
// serves the tests and tools that place one.
func (b *Bucket) Put(ctx context.Context, key string, body io.Reader, h Headers) (Object, error) {
	in := &s3.PutObjectInput{Bucket: aws.String(b.name), Key: aws.String(key), Body: body}
	setHeaders(in, h)
	out, err := b.client.PutObject(ctx, in)
	if err != nil {
		return Object{}, classify(err)
	}
	return Object{ETag: aws.ToString(out.ETag), VersionID: aws.ToString(out.VersionId)}, nil
}

func setHeaders(in *s3.PutObjectInput, h Headers) {
	if h.ContentType != "" {
		in.ContentType = aws.String(h.ContentType)
	}
	if h.ContentLength != 0 {
		in.ContentLength = aws.Int64(h.ContentLength)
	}
	if h.ContentDisposition != "" {
		in.ContentDisposition = aws.String(h.ContentDisposition)
	}
}

// Head describes key's current object; ErrNotFound when there is none.
func (b *Bucket) Head(ctx context.Context, key string) (Object, error) {
	out, err := b.client.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String(b.name), Key: aws.String(key)})
	if err != nil {
		return Object{}, classify(err)
	}
	size := aws.ToInt64(out.ContentLength)
	return Object{ETag: aws.ToString(out.ETag), VersionID: aws.ToString(out.VersionId), Size: size, Length: size,
		ContentType: aws.ToString(out.ContentType), ContentDisposition: aws.ToString(out.ContentDisposition)}, nil
}

// Get streams key's object as o narrows it: the body is read from S3 as
// the caller reads it, never held whole; the caller closes it. The Object
// describes what S3 answered (its Size is the body's, a range's when o
// names one). A missing object or version is ErrNotFound.
func (b *Bucket) Get(ctx context.Context, key string, o GetOptions) (io.ReadCloser, Object, error) {
	in := &s3.GetObjectInput{Bucket: aws.String(b.name), Key: aws.String(key)}
	if o.IfMatch != "" {
		in.IfMatch = aws.String(o.IfMatch)
	}
	if o.VersionID != "" {
		in.VersionId = aws.String(o.VersionID)
	}
	if o.Range != "" {
		in.Range = aws.String(o.Range)
	}
	out, err := b.client.GetObject(ctx, in)
	if err != nil {
		return nil, Object{}, classify(err)
	}
	size := aws.ToInt64(out.ContentLength)
	length := size
	// "bytes 0-511/1234": the total after the slash ("*": unknown).
	if _, total, ok := strings.Cut(aws.ToString(out.ContentRange), "/"); ok {
		if n, err := strconv.ParseInt(total, 10, 64); err == nil {
			length = n
		}
	}
	return out.Body, Object{ETag: aws.ToString(out.ETag), VersionID: aws.ToString(out.VersionId), Size: size, Length: length,
		ContentType: aws.ToString(out.ContentType), ContentDisposition: aws.ToString(out.ContentDisposition)}, nil
}

// Delete removes key's object; a missing one is no error (S3 answers 204).
func (b *Bucket) Delete(ctx context.Context, key string) error {
	_, err := b.client.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(b.name), Key: aws.String(key)})
	return classify(err)
}

// classify marks a 404 (NoSuchKey, NotFound of a HEAD, a missing version)
// as ErrNotFound and a 412 as ErrPreconditionFailed. The error keeps the
// SDK's text and stays the SDK's error for errors.As.
func classify(err error) error {
	if err == nil {
		return nil
	}
	var nsk *s3types.NoSuchKey
	var nf *s3types.NotFound
	var re *awshttp.ResponseError
	switch {
	case errors.As(err, &nsk), errors.As(err, &nf), errors.As(err, &re) && re.HTTPStatusCode() == http.StatusNotFound:
		return &statusError{kind: ErrNotFound, err: err}
	case errors.As(err, &re) && re.HTTPStatusCode() == http.StatusPreconditionFailed:
		return &statusError{kind: ErrPreconditionFailed, err: err}
	case errors.As(err, &re) && re.HTTPStatusCode() == http.StatusRequestedRangeNotSatisfiable:
		return &statusError{kind: ErrRangeNotSatisfiable, err: err}
	}
	return err
}

// statusError is an SDK error that is also one of ours.
type statusError struct{ kind, err error }

func (e *statusError) Error() string   { return e.err.Error() }
func (e *statusError) Unwrap() []error { return []error{e.kind, e.err} }
