package uploads

import (
	"context"
	"time"

	"github.com/conveyor/conveyor/internal/job"
)

// Status is where an upload stands.
type Status string

// Upload statuses.
const (
	Pending   Status = "pending"
	Confirmed Status = "confirmed"
	Rejected  Status = "rejected"
	// Expired: no new job may name the upload; its object is gone, or goes
	// when the last job that may still run and refers to it goes.
	Expired Status = "expired"
)

// Upload is one presigned upload slot and what became of it. The
// dynamodbav tags are the store's attribute names.
type Upload struct {
	ID          string     `json:"id" dynamodbav:"id"`
	Owner       string     `json:"-" dynamodbav:"uploadOwner"`
	Status      Status     `json:"status" dynamodbav:"status"`
	Key         string     `json:"key" dynamodbav:"key"`
	Filename    string     `json:"filename" dynamodbav:"filename"`
	Size        int64      `json:"size" dynamodbav:"size"`
	ContentType string     `json:"contentType" dynamodbav:"contentType"`
	Reason      string     `json:"reason,omitempty" dynamodbav:"reason,omitempty"`
	CreatedAt   time.Time  `json:"createdAt" dynamodbav:"createdAt"`
	ConfirmedAt *time.Time `json:"confirmedAt,omitempty" dynamodbav:"confirmedAt,omitempty"`
	// Pin names the exact object that was checked when the upload was
	// confirmed; the publisher downloads only that object.
	Pin job.Pin `json:"-" dynamodbav:"pin,omitempty"`
	// Refs counts the jobs that may still run and refer to the upload
	// (taken when a job is created, released when it goes stale).
	Refs int `json:"-" dynamodbav:"refs,omitempty"`
	// UsableUntil is when new jobs stop being able to name the upload
	// (a job.SortTime, CreatedAt + resources.UploadUseWindow).
	UsableUntil string `json:"-" dynamodbav:"usableUntil,omitempty"`
	// ExpiresAt is the record's TTL, epoch seconds.
	ExpiresAt int64 `json:"-" dynamodbav:"expiresAt,omitempty"`
}

// StatusAt is the upload's status as readers see it at now: a confirmed
// upload past its use window reads expired.
func (u Upload) StatusAt(now time.Time) Status {
	if u.Status == Confirmed && u.UsableUntil != "" && job.SortTime(now) >= u.UsableUntil {
		return Expired
	}
	return u.Status
}

// Store keeps the uploads (store.Store, on DynamoDB): declared here so
// that this package links no DynamoDB client.
type Store interface {
	// PutUpload stores a new upload; it fails if the id exists.
	PutUpload(ctx context.Context, u Upload) error
	// GetUpload returns the upload, or fault.ErrNotFound.
	GetUpload(ctx context.Context, id string) (Upload, error)
	// SettleUpload moves a pending upload to confirmed or rejected (with
	// the reason of a rejection and the object checked) and returns it;
	// settling it again is a no-op that returns the stored upload.
	SettleUpload(ctx context.Context, id string, status Status, reason string, pin job.Pin, at time.Time) (Upload, error)
}
