package retry

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

var t0 = time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)

// apiErr is shaped like the external API's error type.
type apiErr struct {
	status int
	after  time.Duration
}

func (e apiErr) Error() string             { return fmt.Sprintf("api: HTTP %d", e.status) }
func (e apiErr) Temporary() bool           { return e.status == 429 || e.status >= 500 }
func (e apiErr) RetryAfter() time.Duration { return e.after }
func (e apiErr) StatusCode() int           { return e.status }

// timeoutErr is a net.Error that timed out.
type timeoutErr struct{}

func (timeoutErr) Error() string   { return "i/o timeout" }
func (timeoutErr) Timeout() bool   { return true }
func (timeoutErr) Temporary() bool { return false }

// retryAfterOnly asks for a delay without saying whether it is temporary.
type retryAfterOnly struct{ d time.Duration }

func (e retryAfterOnly) Error() string             { return "slow down" }
func (e retryAfterOnly) RetryAfter() time.Duration { return e.d }

func fixed(f float64) func() float64 { return func() float64 { return f } }

func TestClassify(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		err  error
		want Class
	}{
		{"500", apiErr{status: 500}, ClassTemporary},
		{"503 wrapped", fmt.Errorf("publish: %w", apiErr{status: 503}), ClassTemporary},
		{"429", apiErr{status: 429}, ClassTemporary},
		{"400", apiErr{status: 400}, ClassPermanent},
		{"401 wrapped twice", fmt.Errorf("a: %w", fmt.Errorf("b: %w", apiErr{status: 401})), ClassPermanent},
		{"404", apiErr{status: 404}, ClassPermanent},
		{"deadline", fmt.Errorf("x: %w", context.DeadlineExceeded), ClassTemporary},
		{"canceled", context.Canceled, ClassTemporary},
		{"net timeout", timeoutErr{}, ClassTemporary},
		{"op error refused (its Temporary() is false)", &net.OpError{Op: "dial", Err: syscall.ECONNREFUSED}, ClassTemporary},
		{"reset", fmt.Errorf("read: %w", syscall.ECONNRESET), ClassTemporary},
		{"refused", syscall.ECONNREFUSED, ClassTemporary},
		{"unexpected eof", io.ErrUnexpectedEOF, ClassTemporary},
		{"unknown", errors.New("mystery"), ClassTemporary},
		{"nil", nil, ClassTemporary},
		{"API error under a net error decides", &net.OpError{Op: "read", Err: apiErr{status: 403}}, ClassPermanent},
		{"joined: first API error decides", errors.Join(errors.New("x"), apiErr{status: 400}, apiErr{status: 500}), ClassPermanent},
		{"permanent beats a temporary API error", Permanent(apiErr{status: 500}), ClassPermanent},
		{"permanent beats a deadline", fmt.Errorf("x: %w", Permanent(context.DeadlineExceeded)), ClassPermanent},
		{"temporary beats a permanent API error", Temporary(apiErr{status: 400}, 0), ClassTemporary},
		{"snooze", Snooze(errors.New("circuit open"), t0), ClassSnooze},
		{"snooze wrapped", fmt.Errorf("publish: %w", Snooze(errors.New("circuit open"), t0)), ClassSnooze},
		{"outermost mark wins: permanent over snooze", Permanent(Snooze(errors.New("x"), t0)), ClassPermanent},
		{"outermost mark wins: temporary over permanent", Temporary(fmt.Errorf("y: %w", Permanent(errors.New("x"))), 0), ClassTemporary},
		{"mark below an API error still wins", fmt.Errorf("%w: %w", apiErr{status: 500}, Permanent(errors.New("x"))), ClassPermanent},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if diff := cmp.Diff(tt.want, Classify(tt.err)); diff != "" {
				t.Errorf("Classify(%v) (-want +got):\n%s", tt.err, diff)
			}
		})
	}
}

func TestDecide(t *testing.T) {
	t.Parallel()
	p := Policy{Base: 2 * time.Second, Max: time.Minute, MaxAttempts: 7, Rand: fixed(0.5)}
	tests := []struct {
		name    string
		policy  Policy
		err     error
		attempt int
		want    Decision
	}{
		{"first 500", p, apiErr{status: 500}, 1, Decision{Class: ClassTemporary, Retry: true, Spent: true, Delay: time.Second}},
		{"attempt 0 counts as 1", p, apiErr{status: 500}, 0, Decision{Class: ClassTemporary, Retry: true, Spent: true, Delay: time.Second}},
		{"third 500", p, apiErr{status: 500}, 3, Decision{Class: ClassTemporary, Retry: true, Spent: true, Delay: 4 * time.Second}},
		{"capped at max", p, apiErr{status: 500}, 6, Decision{Class: ClassTemporary, Retry: true, Spent: true, Delay: 30 * time.Second}},
		{"last attempt left", p, apiErr{status: 500}, 6, Decision{Class: ClassTemporary, Retry: true, Spent: true, Delay: 30 * time.Second}},
		{"exhausted", p, apiErr{status: 500}, 7, Decision{Class: ClassTemporary, Exhausted: true, Spent: true}},
		{"beyond the budget", p, apiErr{status: 500}, 99, Decision{Class: ClassTemporary, Exhausted: true, Spent: true}},
		{"one-attempt policy", Policy{Base: time.Second, Max: time.Second, MaxAttempts: 1}, errors.New("x"), 1, Decision{Class: ClassTemporary, Exhausted: true, Spent: true}},
		{"400 fails at once", p, apiErr{status: 400}, 1, Decision{Class: ClassPermanent, Spent: true}},
		{"permanent on the last attempt is not exhausted", p, Permanent(errors.New("x")), 7, Decision{Class: ClassPermanent, Spent: true}},
		{"retry-after above backoff wins", p, apiErr{status: 429, after: 10 * time.Second}, 1, Decision{Class: ClassTemporary, Retry: true, Delay: 10 * time.Second}},
		{"retry-after below backoff loses", p, apiErr{status: 429, after: time.Second}, 4, Decision{Class: ClassTemporary, Retry: true, Delay: 8 * time.Second}},
		{"retry-after beyond max is honoured", p, apiErr{status: 429, after: 5 * time.Minute}, 1, Decision{Class: ClassTemporary, Retry: true, Delay: 5 * time.Minute}},
		{"retry-after capped at 12h", p, apiErr{status: 503, after: 100 * time.Hour}, 1, Decision{Class: ClassTemporary, Retry: true, Spent: true, Delay: MaxVisibility}},
		{"retry-after on an unknown error", p, retryAfterOnly{20 * time.Second}, 1, Decision{Class: ClassTemporary, Retry: true, Spent: true, Delay: 20 * time.Second}},
		{"temporary after", p, Temporary(errors.New("busy"), 45*time.Second), 1, Decision{Class: ClassTemporary, Retry: true, Spent: true, Delay: 45 * time.Second}},
		{"temporary after beyond max", p, Temporary(errors.New("busy"), 2*time.Hour), 1, Decision{Class: ClassTemporary, Retry: true, Spent: true, Delay: 2 * time.Hour}},
		{"negative after is backoff only", p, Temporary(errors.New("busy"), -time.Hour), 1, Decision{Class: ClassTemporary, Retry: true, Spent: true, Delay: time.Second}},
		{"longer of after and retry-after", p, Temporary(apiErr{status: 503, after: 40 * time.Second}, 15*time.Second), 1, Decision{Class: ClassTemporary, Retry: true, Spent: true, Delay: 40 * time.Second}},
		{"a 429 spends nothing and never exhausts", p, apiErr{status: 429, after: time.Minute}, 7, Decision{Class: ClassTemporary, Retry: true, Delay: time.Minute}},
		{"exhausted despite retry-after", p, apiErr{status: 503, after: time.Minute}, 7, Decision{Class: ClassTemporary, Exhausted: true, Spent: true}},
		{"snooze spends nothing, even when exhausted", p, Snooze(errors.New("open"), t0.Add(90*time.Second)), 7, Decision{Class: ClassSnooze, Retry: true, Delay: 90 * time.Second}},
		{"snooze beyond max", p, Snooze(errors.New("open"), t0.Add(time.Hour)), 1, Decision{Class: ClassSnooze, Retry: true, Delay: time.Hour}},
		{"snooze due now waits 1s", p, Snooze(errors.New("open"), t0), 1, Decision{Class: ClassSnooze, Retry: true, Delay: time.Second}},
		{"snooze in the past waits 1s", p, Snooze(errors.New("open"), t0.Add(-time.Hour)), 1, Decision{Class: ClassSnooze, Retry: true, Delay: time.Second}},
		{"snooze capped at 12h", p, Snooze(errors.New("open"), t0.Add(48*time.Hour)), 1, Decision{Class: ClassSnooze, Retry: true, Delay: MaxVisibility}},
		{"nil is an unknown temporary error", p, nil, 1, Decision{Class: ClassTemporary, Retry: true, Spent: true, Delay: time.Second}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := tt.policy.Decide(tt.err, tt.attempt, t0)
			if diff := cmp.Diff(tt.want, got, cmpopts.IgnoreFields(Decision{}, "Reason")); diff != "" {
				t.Errorf("Decide (-want +got):\n%s", diff)
			}
			if got.Reason == "" {
				t.Error("empty Reason")
			}
		})
	}
}

func TestDecideReason(t *testing.T) {
	t.Parallel()
	p := Policy{Base: 2 * time.Second, Max: time.Minute, MaxAttempts: 7, Rand: fixed(0.5)}
	tests := []struct {
		name    string
		err     error
		attempt int
		want    string
	}{
		{"temporary", apiErr{status: 503}, 3, "temporary (the error says it is temporary): attempt 3 of 7, retry in 4s"},
		{"exhausted", errors.New("secret-free mystery"), 7, "temporary (unknown error, assumed temporary), but 7 of 7 attempts spent"},
		{"permanent", apiErr{status: 400}, 1, "permanent: the error says it is not temporary"},
		{"marked", Permanent(errors.New("x")), 1, "permanent: marked permanent"},
		{"snooze", Snooze(errors.New("open"), t0.Add(time.Minute)), 1, "snoozed for 1m0s, no attempt spent: marked snooze"},
		{"network", &net.OpError{Op: "dial", Err: errors.New("no route")}, 1, "temporary (network error): attempt 1 of 7, retry in 1s"},
		{"timeout", timeoutErr{}, 1, "temporary (timeout): attempt 1 of 7, retry in 1s"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if diff := cmp.Diff(tt.want, p.Decide(tt.err, tt.attempt, t0).Reason); diff != "" {
				t.Errorf("Reason (-want +got):\n%s", diff)
			}
		})
	}
}

func TestWrappersKeepTheError(t *testing.T) {
	t.Parallel()
	base := fmt.Errorf("publish: %w", io.ErrUnexpectedEOF)
	tests := []struct {
		name string
		err  error
	}{
		{"permanent", Permanent(base)},
		{"temporary", Temporary(base, time.Second)},
		{"snooze", Snooze(base, t0)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if diff := cmp.Diff(base.Error(), tt.err.Error()); diff != "" {
				t.Errorf("message changed (-want +got):\n%s", diff)
			}
			if !errors.Is(tt.err, io.ErrUnexpectedEOF) || errors.Unwrap(tt.err) != base {
				t.Error("the wrapped error is not reachable")
			}
		})
	}
}

func TestWrappersAreTyped(t *testing.T) {
	t.Parallel()
	err := fmt.Errorf("x: %w", Temporary(errors.New("busy"), 3*time.Second))
	var te *TemporaryError
	if !errors.As(err, &te) || te.After() != 3*time.Second {
		t.Errorf("TemporaryError not found or After wrong: %v", te)
	}
	err = fmt.Errorf("x: %w", Snooze(errors.New("open"), t0))
	var se *SnoozeError
	if !errors.As(err, &se) || !se.Until().Equal(t0) {
		t.Errorf("SnoozeError not found or Until wrong: %v", se)
	}
	var pe *PermanentError
	if !errors.As(Permanent(errors.New("no")), &pe) {
		t.Error("PermanentError not found")
	}
}

func TestWrappersOfNilAreNil(t *testing.T) {
	t.Parallel()
	for name, err := range map[string]error{
		"permanent": Permanent(nil),
		"temporary": Temporary(nil, time.Second),
		"snooze":    Snooze(nil, t0),
	} {
		if err != nil {
			t.Errorf("%s(nil) = %v, want nil", name, err)
		}
	}
}

func TestBackoff(t *testing.T) {
	t.Parallel()
	p := Policy{Base: 2 * time.Second, Max: 15 * time.Minute, MaxAttempts: 7}
	top := math.Nextafter(1, 0)
	huge := Policy{Base: time.Duration(math.MaxInt64 / 3), Max: time.Duration(math.MaxInt64)}
	tests := []struct {
		name    string
		policy  Policy
		rand    float64
		attempt int
		want    time.Duration
	}{
		{"zero jitter", p, 0, 3, 0},
		{"attempt 1 half", p, 0.5, 1, time.Second},
		{"attempt 0 is attempt 1", p, 0.5, 0, time.Second},
		{"negative attempt is attempt 1", p, 0.5, -5, time.Second},
		{"attempt 2 half", p, 0.5, 2, 2 * time.Second},
		{"attempt 5 half", p, 0.5, 5, 16 * time.Second},
		{"attempt 9 below max", p, 0.5, 9, 256 * time.Second},
		{"attempt 10 at max", p, 0.5, 10, 7*time.Minute + 30*time.Second},
		{"attempt 63 at max", p, 0.5, 63, 7*time.Minute + 30*time.Second},
		{"attempt 64 at max", p, 0.5, 64, 7*time.Minute + 30*time.Second},
		{"huge attempt at max", p, 0.5, math.MaxInt, 7*time.Minute + 30*time.Second},
		{"top of the range stays below the ceiling", p, top, 3, 8*time.Second - 1},
		{"rand 1 is clamped below the ceiling", p, 1, 3, 8*time.Second - 1},
		{"rand above 1 clamped", p, 7, 1, 2*time.Second - 1},
		{"negative rand clamped", p, -1, 5, 0},
		{"NaN rand clamped", p, math.NaN(), 5, 0},
		{"overflowing base doubles to max", huge, 0.5, 3, 1 << 62},
		{"overflowing base at the top", huge, top, 100, time.Duration(float64(math.MaxInt64) * top)},
		{"zero policy", Policy{}, 0.5, 3, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tt.policy.Rand = fixed(tt.rand)
			got := tt.policy.Backoff(tt.attempt)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Backoff(%d) (-want +got):\n%s", tt.attempt, diff)
			}
			if got < 0 || (tt.policy.Max > 0 && got > tt.policy.Max) {
				t.Errorf("Backoff(%d) = %v out of [0, %v]", tt.attempt, got, tt.policy.Max)
			}
		})
	}
}

func TestBackoffDefaultRandStaysInRange(t *testing.T) {
	t.Parallel()
	p := testPolicy()
	for attempt := 1; attempt <= 12; attempt++ {
		ceil := min(p.Max, p.Base<<(attempt-1))
		var sum time.Duration
		const n = 2000
		for range n {
			d := p.Backoff(attempt)
			if d < 0 || d >= ceil {
				t.Fatalf("Backoff(%d) = %v, want in [0, %v)", attempt, d, ceil)
			}
			sum += d
		}
		// Full jitter: the mean is half the ceiling (loose bounds, no flakes).
		if mean := sum / n; mean < ceil*4/10 || mean > ceil*6/10 {
			t.Errorf("attempt %d: mean %v, want about %v", attempt, mean, ceil/2)
		}
	}
}

func TestVisibilityFor(t *testing.T) {
	t.Parallel()
	tests := []struct {
		d    time.Duration
		want int32
	}{
		{0, 0},
		{-time.Second, 0},
		{math.MinInt64, 0},
		{time.Nanosecond, 1},
		{100 * time.Millisecond, 1},
		{time.Second, 1},
		{time.Second + time.Nanosecond, 2},
		{2 * time.Second, 2},
		{2500 * time.Millisecond, 3},
		{15 * time.Minute, 900},
		{12*time.Hour - time.Nanosecond, 43200},
		{12 * time.Hour, 43200},
		{24 * time.Hour, 43200},
		{math.MaxInt64, 43200},
	}
	for _, tt := range tests {
		t.Run(tt.d.String(), func(t *testing.T) {
			t.Parallel()
			if diff := cmp.Diff(tt.want, VisibilityFor(tt.d)); diff != "" {
				t.Errorf("VisibilityFor(%v) (-want +got):\n%s", tt.d, diff)
			}
		})
	}
}

func TestPolicyValidate(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		p       Policy
		wantErr string // "" = valid
	}{
		{"default", testPolicy(), ""},
		{"base equals max", Policy{Base: time.Second, Max: time.Second, MaxAttempts: 1}, ""},
		{"max at the SQS limit", Policy{Base: time.Second, Max: MaxVisibility, MaxAttempts: 3}, ""},
		{"zero", Policy{}, "retry base must be positive"},
		{"negative base", Policy{Base: -time.Second, Max: time.Second, MaxAttempts: 1}, "retry base must be positive"},
		{"max below base", Policy{Base: time.Second, Max: time.Millisecond, MaxAttempts: 1}, "must not be below retry base"},
		{"max beyond SQS", Policy{Base: time.Second, Max: 13 * time.Hour, MaxAttempts: 1}, "must not exceed 12h0m0s"},
		{"no attempts", Policy{Base: time.Second, Max: time.Second}, "max attempts must be at least 1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := tt.p.Validate()
			got := ""
			if err != nil {
				got = err.Error()
			}
			if (tt.wantErr == "") != (got == "") || !strings.Contains(got, tt.wantErr) {
				t.Errorf("Validate() = %q, want an error containing %q", got, tt.wantErr)
			}
		})
	}
}

func TestPark(t *testing.T) {
	t.Parallel()
	p := testPolicy()
	tests := []struct {
		name                  string
		policy                Policy
		wait                  time.Duration
		receives, maxReceives int
		want                  bool
	}{
		{"a short backoff stays in the queue", p, 4 * time.Second, 1, 10, false},
		{"a cooldown leaves the queue", p, 5 * time.Minute, 1, 10, true},
		{"exactly ParkAfter leaves", p, time.Minute, 1, 10, true},
		{"near the DLQ even a short wait leaves", p, time.Second, 8, 10, true},
		{"one receive before that stays", p, time.Second, 7, 10, false},
		{"no redrive policy: only by length", p, time.Second, 50, 0, false},
		{"zero ParkAfter means the default", Policy{}, 59 * time.Second, 1, 10, false},
		{"a custom ParkAfter", Policy{ParkAfter: 5 * time.Second}, 5 * time.Second, 1, 10, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := tt.policy.Park(tt.wait, tt.receives, tt.maxReceives); got != tt.want {
				t.Errorf("Park(%s, %d, %d) = %v, want %v", tt.wait, tt.receives, tt.maxReceives, got, tt.want)
			}
		})
	}
}

func TestClassString(t *testing.T) {
	t.Parallel()
	got := []string{ClassTemporary.String(), ClassPermanent.String(), ClassSnooze.String(), Class(9).String()}
	if diff := cmp.Diff([]string{"temporary", "permanent", "snooze", "Class(9)"}, got); diff != "" {
		t.Errorf("String (-want +got):\n%s", diff)
	}
}

func BenchmarkDecide(b *testing.B) {
	p := testPolicy()
	err := fmt.Errorf("stash publish: %w", apiErr{status: 503})
	for b.Loop() {
		_ = p.Decide(err, 3, t0)
	}
}

func BenchmarkClassify(b *testing.B) {
	err := fmt.Errorf("stash publish: %w", apiErr{status: 503})
	for b.Loop() {
		_ = Classify(err)
	}
}

func BenchmarkBackoff(b *testing.B) {
	p := testPolicy()
	for b.Loop() {
		_ = p.Backoff(5)
	}
}

// testPolicy is the publisher's policy with the configuration's defaults.
func testPolicy() Policy {
	return Policy{Base: 2 * time.Second, Max: 15 * time.Minute, MaxAttempts: 7, ParkAfter: time.Minute}
}
