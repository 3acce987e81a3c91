package stream

import (
	"context"
	"errors"
	"math/rand/v2"
	"time"

	"github.com/conveyor/conveyor/internal/fault"
	"github.com/conveyor/conveyor/internal/ids"
)

// ErrLeaseLost is returned by Renew when the slot expired and was taken.
var ErrLeaseLost = errors.New("stream slot lost")

// Slots keeps each user's stream slots (*store.Store, in the table): a
// slot is held by one holder until its lease ends; taking a held slot and
// renewing one another holder took are fault.ErrConflict.
type Slots interface {
	// TakeStreamSlot gives slot n of user to holder until until, if it is
	// free at now (never taken, or its lease ended).
	TakeStreamSlot(ctx context.Context, user string, n int, holder string, now, until time.Time) error
	// RenewStreamSlot extends holder's lease of the slot to until.
	RenewStreamSlot(ctx context.Context, user string, n int, holder string, until time.Time) error
	// ReleaseStreamSlot frees the slot if holder still has it.
	ReleaseStreamSlot(ctx context.Context, user string, n int, holder string) error
}

// Leases caps each user's open streams across every instance: a user has
// Max slots; a stream holds one by a conditional write (free, or its lease
// ended) and renews it while it runs, so the count holds across Lambda
// instances, and the slots of a crashed instance free themselves after
// TTL. Opening costs one to Max conditional writes; a running stream
// renews every TTL/3 (a write, no read).
type Leases struct {
	// Slots keeps the slots (required).
	Slots Slots
	// Max is the number of slots per user.
	Max int
	// TTL is how long a slot is held without renewal.
	TTL time.Duration
	Now func() time.Time
}

// Lease is one held slot.
type Lease struct {
	l      *Leases
	user   string
	slot   int
	holder string
}

// Acquire takes a free slot of user's, trying each slot once: ErrTooMany
// when every one is held. It never waits for a slot to free, so a refused
// open answers at once and holds no execution of the function.
func (l *Leases) Acquire(ctx context.Context, user string) (*Lease, error) {
	return l.acquireOnce(ctx, user, ids.New("sse"))
}

// acquireOnce tries each slot once.
func (l *Leases) acquireOnce(ctx context.Context, user, holder string) (*Lease, error) {
	now := l.Now()
	start := rand.IntN(l.Max) // spread concurrent opens over the slots
	for i := range l.Max {
		n := (start + i) % l.Max
		err := l.Slots.TakeStreamSlot(ctx, user, n, holder, now, now.Add(l.TTL))
		if errors.Is(err, fault.ErrConflict) {
			continue
		}
		if err != nil {
			return nil, err
		}
		return &Lease{l: l, user: user, slot: n, holder: holder}, nil
	}
	return nil, ErrTooMany
}

// Renew extends the lease; ErrLeaseLost when another stream took the slot.
func (x *Lease) Renew(ctx context.Context) error {
	err := x.l.Slots.RenewStreamSlot(ctx, x.user, x.slot, x.holder, x.l.Now().Add(x.l.TTL))
	if errors.Is(err, fault.ErrConflict) {
		return ErrLeaseLost
	}
	return err
}

// Release frees the slot if this lease still holds it.
func (x *Lease) Release(ctx context.Context) error {
	return x.l.Slots.ReleaseStreamSlot(ctx, x.user, x.slot, x.holder)
}
