package webhook

import (
	"errors"
	"time"

	"github.com/conveyor/conveyor/internal/envelope"
)

// The records the store keeps for webhooks, as it keeps them (the
// dynamodbav tags are the table's attribute names): internal/aws/store reads
// and writes them by these types.

// ErrExists is what the store returns when an endpoint that must be new
// (its id) already exists.
var ErrExists = errors.New("already exists")

// SecretRecord is a user's webhook signing secret as stored: sealed, with
// the one it replaced while that one still signs.
type SecretRecord struct {
	Owner           string             `dynamodbav:"hooksOwner"`
	Current         envelope.Envelope  `dynamodbav:"current"`
	Previous        *envelope.Envelope `dynamodbav:"previous,omitempty"`
	PreviousUntilMs int64              `dynamodbav:"previousUntilMs,omitempty"`
	// Version increases by one with every change, for conditional writes.
	Version   int64      `dynamodbav:"version"`
	CreatedAt time.Time  `dynamodbav:"createdAt"`
	RotatedAt *time.Time `dynamodbav:"rotatedAt,omitempty"`
}

// EndpointRecord is one of a user's webhook endpoints as stored.
type EndpointRecord struct {
	ID        string    `dynamodbav:"endpointId"`
	URL       string    `dynamodbav:"url"`
	Events    []string  `dynamodbav:"events"`
	CreatedAt time.Time `dynamodbav:"createdAt"`
	// Circuit is the state of the endpoint's circuit, kept on the
	// endpoint's own item (FailWebhookEndpoint, ClearWebhookEndpoint);
	// the summary's copies of it are not read.
	Circuit CircuitRecord `dynamodbav:"-"`
}

// CircuitRecord is an endpoint's record of failed deliveries: its
// consecutive failures, since when it has failed without a success between,
// and until when its circuit is open (unix milliseconds; 0: none).
type CircuitRecord struct {
	Failures       int   `dynamodbav:"circuitFailures,omitempty"`
	FailingSinceMs int64 `dynamodbav:"failingSinceMs,omitempty"`
	OpenUntilMs    int64 `dynamodbav:"circuitOpenUntilMs,omitempty"`
	// DisabledAtMs is when the endpoint was disabled (after failing too
	// long, or by its owner); 0: enabled.
	DisabledAtMs int64 `dynamodbav:"disabledAtMs,omitempty"`
}

// Summary lists a user's endpoints in one item beside them, so that
// many users' endpoints are read with one BatchGetItem (GetWebhookSummaries).
// Every creation and deletion of an endpoint changes it in the same
// transaction (AddWebhookEndpoint, RemoveWebhookEndpoint).
type Summary struct {
	Owner     string           `dynamodbav:"hooksOwner"`
	Endpoints []EndpointRecord `dynamodbav:"endpoints"`
	// Version increases by one with every change, for conditional writes.
	Version int64 `dynamodbav:"version"`
	// BuiltAt is when the list was last read from the endpoint items.
	BuiltAt time.Time `dynamodbav:"builtAt"`
}

// DeliveryRecord is the kept state of one webhook delivery, stored beside
// its job's events and kept as long as they are (EventTTLDefault after
// UpdatedAt).
type DeliveryRecord struct {
	ID       string `dynamodbav:"deliveryId"`
	JobID    string `dynamodbav:"jobId"`
	Endpoint string `dynamodbav:"endpoint,omitempty"`
	// Owner and Seq are the event's owner and sequence number (not
	// "owner": that attribute keys the owners' job indexes; records
	// written before they were kept have neither).
	Owner string `dynamodbav:"deliveryOwner,omitempty"`
	Seq   int64  `dynamodbav:"deliverySeq,omitempty"`
	Event string `dynamodbav:"event"`
	URL   string `dynamodbav:"url"`
	// Status is DeliveryDelivered, DeliveryRetrying or DeliveryFailed.
	Status     string    `dynamodbav:"status"`
	Attempts   int       `dynamodbav:"attempts"`
	LastStatus int       `dynamodbav:"lastStatus"`
	LastError  string    `dynamodbav:"lastError,omitempty"`
	UpdatedAt  time.Time `dynamodbav:"updatedAt"`
	// Disabled is set on the failure that disabled its endpoint.
	Disabled bool `dynamodbav:"endpointDisabled,omitempty"`
}

// A delivery's states.
const (
	DeliveryDelivered = "delivered"
	DeliveryRetrying  = "retrying"
	DeliveryFailed    = "failed"
)

// FailureRecord is one entry of an endpoint's failures' log: a delivery
// that ended failed, and when.
type FailureRecord struct {
	DeliveryID string    `dynamodbav:"deliveryId"`
	JobID      string    `dynamodbav:"jobId"`
	Seq        int64     `dynamodbav:"seq"`
	FailedAt   time.Time `dynamodbav:"failedAt"`
}

// DeliveryRef names a delivery's record: its job and its id.
type DeliveryRef struct{ JobID, ID string }
