package publish

import (
	"errors"
	"fmt"
	"strings"

	"github.com/conveyor/conveyor/internal/job"
	"github.com/conveyor/conveyor/internal/retry"
	"github.com/conveyor/conveyor/internal/uploads"
)

// ErrMediaExpired means an item's object is gone from S3 (retention, or the
// bucket lifecycle for a job that outlived its horizon): no retry can bring
// it back, so the job fails with the code "media_expired".
var ErrMediaExpired error = codedError("media_expired")

// ErrMediaChanged means the object under an item's key is no longer the
// one its upload's confirmation checked: someone PUT again with the
// still-valid presigned URL. Unchecked bytes are never published, so the
// job fails with the code "media_changed"; upload and confirm the file
// again to publish it.
var ErrMediaChanged error = codedError("media_changed")

// codedError is an error whose text is the code a failed job keeps
// (JobErrorCode, which the run loop reads).
type codedError string

func (e codedError) Error() string { return string(e) }

// JobErrorCode is the code a job failed by e keeps.
func (e codedError) JobErrorCode() string { return string(e) }

// pinnedGet asks for exactly the object the item's upload pinned: S3
// answers 412 Precondition Failed (If-Match) for any other.
func pinnedGet(it job.Item) uploads.GetOptions {
	return uploads.GetOptions{IfMatch: it.Pin.ETag, VersionID: it.Pin.VersionID}
}

// checkPin checks the answer's ETag against the pin too, so the guarantee
// does not rest on the server honouring If-Match alone.
func checkPin(it job.Item, obj uploads.Object) error {
	if it.Pin.ETag == "" || sameETag(obj.ETag, it.Pin.ETag) {
		return nil
	}
	return mediaChanged(it)
}

func sameETag(a, b string) bool { return strings.Trim(a, `"`) == strings.Trim(b, `"`) }

func mediaChanged(it job.Item) error {
	return retry.Permanent(fmt.Errorf("%w: the object of upload %s was replaced after it was confirmed; upload the file again", ErrMediaChanged, it.UploadID))
}

// downloadError classifies a failed S3 download of an item's object: a
// missing object (or missing pinned version) is permanent, and so is an
// object replaced since its confirmation; anything else keeps its own
// class.
func downloadError(it job.Item, err error) error {
	switch {
	case errors.Is(err, uploads.ErrObjectNotFound): // NoSuchKey, or NoSuchVersion of a pinned version
		return retry.Permanent(fmt.Errorf("%w: the object of upload %s is gone: %v", ErrMediaExpired, it.UploadID, err))
	case errors.Is(err, uploads.ErrPreconditionFailed):
		return mediaChanged(it)
	}
	return fmt.Errorf("downloading %s: %w", it.UploadID, err)
}
