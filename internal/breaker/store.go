package breaker

import (
	"context"
	"fmt"
	"time"

	"github.com/conveyor/conveyor/internal/fault"
)

// Store keeps the breakers' records, shared by every instance
// (*store.Store keeps them in the table: internal/aws/store, breakers.go).
// The product's circuits are records under their keys, read all at once;
// an owner's target circuits (Targets) are records in numbered slots of a
// partition of the owner's own, never read with the others. A record is
// kept until the expiry it is written with and is gone once that has
// passed. Every write holds only if the stored record still has the
// version read (prev; 0: none is stored, or only an expired one); else it
// is ErrConflict.
type Store interface {
	// BreakerRecords returns every product circuit's record, but those
	// expired at now.
	BreakerRecords(ctx context.Context, now time.Time) ([]Record, error)
	// BreakerRecord returns key's record; found is false when there is
	// none, or it expired at now.
	BreakerRecord(ctx context.Context, key string, now time.Time) (r Record, found bool, err error)
	// PutBreaker stores next under next.Key until expiresAt, over prev.
	PutBreaker(ctx context.Context, next Record, prev int64, expiresAt, now time.Time) error
	// DeleteBreaker deletes key's record over prev (> 0).
	DeleteBreaker(ctx context.Context, key string, prev int64) error
	// ResetBreaker deletes key's record, whatever it holds.
	ResetBreaker(ctx context.Context, key string) error

	// BreakerTargets returns owner's target slots, but those expired at
	// now.
	BreakerTargets(ctx context.Context, owner string, now time.Time) ([]TargetRecord, error)
	// BreakerTarget returns the record in owner's slot; found is false
	// when there is none, or it expired at now.
	BreakerTarget(ctx context.Context, owner, slot string, now time.Time) (r TargetRecord, found bool, err error)
	// PutBreakerTarget stores next in owner's slot, with the host it
	// guards, until expiresAt, over prev.
	PutBreakerTarget(ctx context.Context, owner, slot, host string, next Record, prev int64, expiresAt, now time.Time) error
	// DeleteBreakerTarget empties owner's slot over prev (> 0).
	DeleteBreakerTarget(ctx context.Context, owner, slot string, prev int64) error
}

// ErrConflict is a Store's answer to a write that lost a race: the record
// changed since it was read.
var ErrConflict = fmt.Errorf("breaker changed meanwhile: %w", fault.ErrConflict)

// TargetRecord is one of an owner's target slots as stored: the record of
// the circuit, the host it guards ("*" for the shared one) and the slot.
type TargetRecord struct {
	Record
	Host string
	Slot string
}
