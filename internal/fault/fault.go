// Package fault is the classes of error the domain packages return and the
// API answers by class, not by each package's own error: a resource that is
// not there (404), a count at its limit (422), a caller over a rate (429),
// an update that lost a race (409 or a retry). A domain error joins a class by being one of its types
// or matching its sentinel (errors.Is), and keeps its own text; the API's
// answer takes its code and message from the error. The package is part of
// the vocabulary: it does no I/O and reaches nothing else.
package fault

import (
	"errors"
	"time"
)

// The classes' sentinels: errors.Is(err, ErrNotFound) holds for every
// not-found error of the domain, ErrConflict for every lost race.
var (
	ErrNotFound = errors.New("not found")
	ErrConflict = errors.New("conflicting update")
)

// ErrBadCursor is returned for a list's cursor that does not continue the
// list asked for: one from another filter, index, user or updatedSince,
// or one forged, altered or garbled (the API answers 422 invalid_cursor).
var ErrBadCursor = errors.New("invalid cursor")

// NotFound is an error of class ErrNotFound naming what was not found.
// Code and Detail are the API's answer (404); empty, the answer is the
// generic not_found.
type NotFound struct {
	// Msg is the error's text.
	Msg string
	// Code is the answer's error code (default not_found).
	Code string
	// Detail is the answer's message (default the generic one).
	Detail string
}

func (e *NotFound) Error() string { return e.Msg }

// Is makes errors.Is(err, ErrNotFound) true.
func (e *NotFound) Is(target error) bool { return target == ErrNotFound }

// Limit is a caller who has as many of something as allowed: the request
// is well-formed and the state refuses it until the caller deletes one
// (422). Code names the limit in the answer; Max is its value.
type Limit struct {
	Code string
	Max  int
	// Msg is the error's text and the answer's message.
	Msg string
}

func (e *Limit) Error() string { return e.Msg }

// Throttled is a caller over a rate: the request is refused now and would
// be accepted after RetryAfter (429 with Retry-After). Code names the limit
// in the answer; Limit units per Period is its sustained value, Burst the
// most taken at once.
type Throttled struct {
	Code string
	// Name names a quota's limit (activeJobs), with Limit its value and
	// no Period; "" for a rate.
	Name   string
	Limit  int
	Period time.Duration
	Burst  int
	// RetryAfter is how long until the caller's next request is accepted
	// (at least a second in the answer's Retry-After).
	RetryAfter time.Duration
	// Msg is the error's text and the answer's message.
	Msg string
}

func (e *Throttled) Error() string { return e.Msg }
