package publish

import (
	"errors"
	"fmt"

	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/conveyor/conveyor/internal/job"
	"github.com/conveyor/conveyor/internal/retry"
)

// ErrMediaExpired means an item's object is gone from S3 (retention, or the
// bucket lifecycle for a job that outlived its horizon): no retry can bring
// it back, so the job fails with the code "media_expired".
var ErrMediaExpired = errors.New("media_expired")

// downloadError classifies a failed S3 download of an item's object: a
// missing object is permanent, anything else keeps its own class.
func downloadError(it job.Item, err error) error {
	var nsk *s3types.NoSuchKey
	if errors.As(err, &nsk) {
		return retry.Permanent(fmt.Errorf("%w: the object of upload %s is gone: %v", ErrMediaExpired, it.UploadID, err))
	}
	return fmt.Errorf("downloading %s: %w", it.UploadID, err)
}

// failureCode is the error code kept on a failed job: errorCode's, or
// media_expired for a vanished object.
func failureCode(err error, c retry.Class) string {
	if errors.Is(err, ErrMediaExpired) {
		return "media_expired"
	}
	return errorCode(err, c)
}
