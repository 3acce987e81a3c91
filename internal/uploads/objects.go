package uploads

import (
	"errors"
	"net/http"
)

// The upload bucket's objects as the domain sees them: what the bucket
// adapter (internal/aws/bucket, which names them by alias) takes and
// answers, so that the packages that read or write the bucket (uploads,
// publish, recovery) declare the few methods they call in these terms and
// link no S3 client.

// ErrObjectNotFound means the object (or the version asked for) is not in
// the bucket: S3 answered 404. A caller without s3:ListBucket is answered
// 403 instead, which is not ErrObjectNotFound.
var ErrObjectNotFound = errors.New("no such object")

// ErrPreconditionFailed means the object is not the one If-Match named: S3
// answered 412.
var ErrPreconditionFailed = errors.New("precondition failed")

// ErrRangeNotSatisfiable means a ranged GET asked for bytes the object does
// not have (an empty object): S3 answered 416.
var ErrRangeNotSatisfiable = errors.New("range not satisfiable")

// Object describes a stored object, as a HEAD or GET answered it; a field
// S3 did not send is empty.
type Object struct {
	// ETag is the object's entity tag, quoted as S3 sends it.
	ETag string
	// VersionID is the object's version in a versioned bucket.
	VersionID string
	// Size is the length of the object (of the body a GET answered: a
	// range's), in bytes.
	Size int64
	// Length is the whole object's length, in bytes: a ranged GET's
	// Content-Range total, else Size.
	Length int64
	// ContentType and ContentDisposition are the headers stored with it.
	ContentType        string
	ContentDisposition string
}

// Headers are the headers a PUT sends with its body (each when set).
type Headers struct {
	ContentType        string
	ContentDisposition string
	// ContentLength is the body's exact size (0: not set).
	ContentLength int64
}

// Presigned is a signed request: send Method to URL with every header of
// SignedHeader as it is (Host is among them: the URL carries it).
type Presigned struct {
	Method       string
	URL          string
	SignedHeader http.Header
}

// GetOptions narrow a Get; each applies when set.
type GetOptions struct {
	// IfMatch is the ETag the object must have (ErrPreconditionFailed if
	// not).
	IfMatch string
	// VersionID is the version to read (ErrObjectNotFound if it is gone).
	VersionID string
	// Range is an HTTP byte range ("bytes=0-511").
	Range string
}
