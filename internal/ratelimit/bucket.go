// Package ratelimit is the per-owner request rate of the HTTP API: a token
// bucket per owner (a sustained rate and a burst, by plan, with per-owner
// overrides), shared by every instance of the API function through one
// item per owner in the table, and cheap: an instance leases units in
// blocks, one conditional write per block, and serves a block's requests
// from memory. The arithmetic is GCRA (the generic cell rate algorithm):
// the bucket is one number, its theoretical arrival time (TAT), which a
// lease advances by a block's worth on the condition that it is still what
// the instance last saw. The package declares the store it needs (Store)
// and does no I/O of its own.
//
// The bound: the units an owner is served in any window of length W are at
// most Burst + Rate×(W + LeaseFor). The bucket never hands out more than
// Burst + Rate×W in a window W (GCRA's guarantee, across every instance,
// since every lease is a conditional write on the one item); a leased unit
// is served at most LeaseFor after its lease or not at all, so serving
// lags leasing by at most LeaseFor. Unused units are dropped, never given
// back (that would cost a write): they only make the owner's allowance
// smaller.
package ratelimit

import (
	"time"
)

// Limit is a bucket's size: Rate units a second sustained, Burst at once.
type Limit struct {
	// Rate is the sustained rate, units (requests) a second, ≥ 1.
	Rate int
	// Burst is the most units taken at once from a full bucket, ≥ 1.
	Burst int
}

// interval is the time one unit takes to come back (GCRA's emission
// interval T).
func (l Limit) interval() time.Duration { return time.Second / time.Duration(l.Rate) }

// tolerance is how far ahead of now a bucket's TAT may be: Burst units'
// worth.
func (l Limit) tolerance() time.Duration { return time.Duration(l.Burst) * l.interval() }

// Available is how many units a bucket whose theoretical arrival time is
// tat (zero: a bucket never used, or expired) may give at now: Burst from
// a full bucket, 0 when the next unit is still to come.
func (l Limit) Available(tat, now time.Time) int {
	if tat.Before(now) {
		tat = now
	}
	n := now.Add(l.tolerance()).Sub(tat) / l.interval()
	return int(max(n, 0))
}

// Take is the bucket's TAT after n units are taken at now from a bucket
// at tat. The caller checks that n ≤ Available(tat, now).
func (l Limit) Take(tat, now time.Time, n int) time.Time {
	if tat.Before(now) {
		tat = now
	}
	return tat.Add(time.Duration(n) * l.interval())
}

// Wait is how long after now the bucket at tat gives its next unit: 0 when
// it has one now.
func (l Limit) Wait(tat, now time.Time) time.Duration {
	if tat.Before(now) {
		tat = now
	}
	return max(tat.Add(l.interval()-l.tolerance()).Sub(now), 0)
}

// RetryAfter renders a wait as the Retry-After header's whole seconds,
// rounded up, at least 1: a client that waits that long is served.
func RetryAfter(wait time.Duration) int {
	s := int((wait + time.Second - 1) / time.Second)
	return max(s, 1)
}

// blocks sizes the leases of one owner on one instance: a block starts at
// one unit, doubles while the instance uses up its blocks before they
// lapse, and falls back to what was used when a block lapses with units
// left, so a quiet owner costs one unit a lease and a busy one a write per
// up to max units.
type blocks struct {
	next int
}

// size is the next block's size, between 1 and most.
func (b *blocks) size(most int) int {
	return min(max(b.next, 1), max(most, 1))
}

// used records how the last block went: used units of size, lapsed with
// units left or not.
func (b *blocks) used(used, size int, lapsed bool) {
	switch {
	case lapsed:
		b.next = max(used, 1)
	case used >= size:
		b.next = size * 2
	}
}

// MaxBlock is the largest block an instance leases under l: a quarter of
// the burst (so that a few instances share a burst without one holding
// it), and no more than a second's rate, but at least one unit.
func MaxBlock(l Limit) int {
	return max(min(l.Burst/4, l.Rate), 1)
}
