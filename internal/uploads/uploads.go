// Package uploads hands out presigned S3 PUT slots and confirms what
// arrives in them: on the S3 ObjectCreated event or on demand, the object is
// checked (owner, exact size, declared type, and its first bytes really are
// that image type) and the upload is marked confirmed or rejected.
package uploads

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/conveyor/conveyor/internal/fault"
	"github.com/conveyor/conveyor/internal/ids"
	"github.com/conveyor/conveyor/internal/invalid"
	"github.com/conveyor/conveyor/internal/job"
	"github.com/conveyor/conveyor/internal/resources"
)

// AllowedTypes are the content types an upload may declare.
var AllowedTypes = map[string]bool{"image/png": true, "image/jpeg": true, "image/gif": true, "image/webp": true}

// ErrNotUploaded means the object is not in S3 (yet).
var ErrNotUploaded = errors.New("the object has not been uploaded yet")

// Objects is the upload bucket as uploads uses it (bucket.Bucket).
type Objects interface {
	// Name is the bucket's name, the one its events name.
	Name() string
	// PresignPut signs a PUT of key that must carry exactly h.
	PresignPut(ctx context.Context, key string, h Headers, expires time.Duration) (Presigned, error)
	// Get streams key's object as o narrows it; ErrObjectNotFound when
	// there is none.
	Get(ctx context.Context, key string, o GetOptions) (io.ReadCloser, Object, error)
}

// Config configures a Service; every field is required unless noted.
type Config struct {
	Store Store
	// Objects is the bucket uploads land in.
	Objects Objects
	// Prefix is where uploads land, e.g. "uploads/".
	Prefix string
	// MaxSize is the largest upload in bytes.
	MaxSize int64
	// Expiry is how long a presigned URL is valid.
	Expiry time.Duration
	// Now defaults to time.Now.
	Now func() time.Time
	// Logger defaults to slog.Default().
	Logger *slog.Logger
}

// Service signs and confirms uploads.
type Service struct{ cfg Config }

// New returns a Service.
func New(cfg Config) *Service {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Service{cfg: cfg}
}

// SignRequest asks for an upload slot.
type SignRequest struct {
	Filename    string `json:"filename"`
	ContentType string `json:"contentType"`
	Size        int64  `json:"size"`
}

// Signed is a slot: PUT the bytes to URL with exactly Headers.
type Signed struct {
	UploadID  string            `json:"uploadId"`
	Key       string            `json:"key"`
	URL       string            `json:"url"`
	Method    string            `json:"method"`
	Headers   map[string]string `json:"headers"`
	ExpiresAt time.Time         `json:"expiresAt"`
}

// Sign validates the request, stores a pending upload and presigns a PUT
// bound to the content type, the exact size and the Content-Disposition
// that names the file (ContentDisposition): Headers lists every header the
// PUT must carry as it is.
func (s *Service) Sign(ctx context.Context, owner string, req SignRequest) (Signed, error) {
	switch {
	case strings.TrimSpace(req.Filename) == "":
		return Signed{}, invalid.Field("filename", "is required")
	case len(req.Filename) > 255:
		return Signed{}, invalid.Field("filename", "must be at most 255 bytes")
	case !AllowedTypes[req.ContentType]:
		return Signed{}, invalid.Field("contentType", "must be one of image/png, image/jpeg, image/gif, image/webp")
	case req.Size < 1 || req.Size > s.cfg.MaxSize:
		return Signed{}, invalid.Field("size", fmt.Sprintf("must be between 1 and %d bytes", s.cfg.MaxSize))
	}
	now := s.cfg.Now().UTC()
	u := Upload{
		ID:          ids.New(ids.Upload),
		Owner:       owner,
		Status:      Pending,
		Filename:    SanitizeFilename(req.Filename),
		Size:        req.Size,
		ContentType: req.ContentType,
		CreatedAt:   now,
		// A pending record lives a while past its URL, then expires.
		ExpiresAt: now.Add(s.cfg.Expiry + resources.PendingUploadMargin).Unix(),
	}
	u.Key = s.cfg.Prefix + owner + "/" + u.ID + "/" + u.Filename
	presigned, err := s.cfg.Objects.PresignPut(ctx, u.Key, Headers{
		ContentType:   u.ContentType,
		ContentLength: u.Size,
		// Signed like the type and size: the client sends it as given in
		// Headers, and the object keeps its name in UTF-8.
		ContentDisposition: ContentDisposition(u.Filename),
	}, s.cfg.Expiry)
	if err != nil {
		return Signed{}, fmt.Errorf("presigning upload: %w", err)
	}
	if err := s.cfg.Store.PutUpload(ctx, u); err != nil {
		return Signed{}, err
	}
	headers := map[string]string{"Content-Type": u.ContentType}
	for name, vals := range presigned.SignedHeader {
		if len(vals) > 0 && !strings.EqualFold(name, "host") {
			headers[http.CanonicalHeaderKey(name)] = vals[0]
		}
	}
	headers["Content-Length"] = fmt.Sprint(u.Size)
	return Signed{
		UploadID: u.ID, Key: u.Key, URL: presigned.URL, Method: presigned.Method,
		Headers: headers, ExpiresAt: now.Add(s.cfg.Expiry),
	}, nil
}

// Get returns owner's upload, or fault.ErrNotFound (also for someone else's).
func (s *Service) Get(ctx context.Context, owner, id string) (Upload, error) {
	if !ids.Valid(ids.Upload, id) {
		return Upload{}, fault.ErrNotFound
	}
	u, err := s.cfg.Store.GetUpload(ctx, id)
	if err != nil {
		return Upload{}, err
	}
	if u.Owner != owner {
		return Upload{}, fault.ErrNotFound
	}
	return u, nil
}

// Confirm checks owner's upload in S3 and settles it; idempotent. It returns
// ErrNotUploaded when the object is not there yet.
func (s *Service) Confirm(ctx context.Context, owner, id string) (Upload, error) {
	u, err := s.Get(ctx, owner, id)
	if err != nil {
		return Upload{}, err
	}
	return s.settle(ctx, u)
}

// ObjectCreated handles the S3 ObjectCreated event of one object: the key
// must be an upload slot of the user it names. Objects that are no upload
// slot are ignored (logged), never an error, so the event is not retried.
func (s *Service) ObjectCreated(ctx context.Context, bucketName, key string) (Upload, error) {
	log := s.cfg.Logger.With("bucket", bucketName, "key", key)
	if bucketName != s.cfg.Objects.Name() {
		log.WarnContext(ctx, "ignoring object of another bucket")
		return Upload{}, nil
	}
	rest, ok := strings.CutPrefix(key, s.cfg.Prefix)
	parts := strings.Split(rest, "/")
	if !ok || len(parts) != 3 || !ids.Valid(ids.Upload, parts[1]) {
		log.WarnContext(ctx, "ignoring object outside the upload slots")
		return Upload{}, nil
	}
	u, err := s.cfg.Store.GetUpload(ctx, parts[1])
	if errors.Is(err, fault.ErrNotFound) {
		log.WarnContext(ctx, "ignoring object of an unknown upload", "upload_id", parts[1])
		return Upload{}, nil
	}
	if err != nil {
		return Upload{}, err
	}
	if u.Owner != parts[0] || u.Key != key {
		// Someone wrote into a slot path that is not theirs.
		return s.cfg.Store.SettleUpload(ctx, u.ID, Rejected, "object key does not belong to the upload's owner", job.Pin{}, s.cfg.Now())
	}
	return s.settle(ctx, u)
}

// sniffBytes is how much of an object settle reads to check its type
// (http.DetectContentType looks at no more).
const sniffBytes = 512

// settle checks the object and records the outcome, with one ranged GET:
// its answer describes the whole object (its length in Content-Range, its
// type, ETag and version) and brings the first bytes, which must be the
// declared image type. A confirmed upload is pinned to the object that was
// checked (its ETag, and its version in a versioned bucket): a presigned
// URL stays valid after confirmation, and the publisher refuses any other
// object under the key.
func (s *Service) settle(ctx context.Context, u Upload) (Upload, error) {
	if u.Status != Pending {
		return u, nil
	}
	var first []byte
	body, obj, err := s.cfg.Objects.Get(ctx, u.Key, GetOptions{Range: fmt.Sprintf("bytes=0-%d", sniffBytes-1)})
	switch {
	case errors.Is(err, ErrObjectNotFound):
		return u, ErrNotUploaded
	case errors.Is(err, ErrRangeNotSatisfiable):
		// An empty object: no byte to range over. Its ETag is not read;
		// the rejection pins nothing.
		obj = Object{}
	case err != nil:
		return u, fmt.Errorf("checking upload %s: %w", u.ID, err)
	default:
		first, err = io.ReadAll(io.LimitReader(body, sniffBytes))
		body.Close()
		if err != nil {
			return u, fmt.Errorf("reading upload %s: %w", u.ID, err)
		}
	}
	pin := job.Pin{ETag: obj.ETag, VersionID: obj.VersionID}
	reason := ""
	switch size := obj.Length; {
	case size != u.Size:
		reason = fmt.Sprintf("size is %d bytes, %d were declared", size, u.Size)
	case !strings.EqualFold(strings.TrimSpace(strings.Split(obj.ContentType, ";")[0]), u.ContentType):
		reason = fmt.Sprintf("content type is %q, %q was declared", obj.ContentType, u.ContentType)
	default:
		if got := http.DetectContentType(first); got != u.ContentType {
			reason = fmt.Sprintf("content is %s, not the declared %s", got, u.ContentType)
		}
	}
	status := Confirmed
	if reason != "" {
		status = Rejected
	}
	settled, err := s.cfg.Store.SettleUpload(ctx, u.ID, status, reason, pin, s.cfg.Now())
	if err == nil {
		s.cfg.Logger.InfoContext(ctx, "upload settled", "upload_id", u.ID, "status", settled.Status, "reason", settled.Reason)
	}
	return settled, err
}
