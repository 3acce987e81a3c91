package retry

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"syscall"
	"testing"
	"time"
)

type apiErr struct {
	status int
	after  time.Duration
}

func (e apiErr) Error() string             { return fmt.Sprintf("api %d", e.status) }
func (e apiErr) Temporary() bool           { return e.status == 429 || e.status >= 500 }
func (e apiErr) RetryAfter() time.Duration { return e.after }

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
		{"401", apiErr{status: 401}, ClassPermanent},
		{"404", apiErr{status: 404}, ClassPermanent},
		{"deadline", fmt.Errorf("x: %w", context.DeadlineExceeded), ClassTemporary},
		{"canceled", context.Canceled, ClassTemporary},
		{"op error", &net.OpError{Op: "dial", Err: syscall.ECONNREFUSED}, ClassTemporary},
		{"reset", fmt.Errorf("read: %w", syscall.ECONNRESET), ClassTemporary},
		{"eof", io.ErrUnexpectedEOF, ClassTemporary},
		{"unknown", errors.New("mystery"), ClassTemporary},
		{"explicit permanent beats temporary", Permanent(apiErr{status: 500}), ClassPermanent},
		{"explicit temporary beats permanent", Temporary(apiErr{status: 400}, 0), ClassTemporary},
		{"snooze", Snooze(errors.New("circuit open"), time.Now()), ClassSnooze},
	}
	for _, tt := range tests {
		if got := Classify(tt.err); got != tt.want {
			t.Errorf("%s: Classify = %v, want %v", tt.name, got, tt.want)
		}
	}
}

func TestDecide(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	p := Policy{Base: 2 * time.Second, Max: time.Minute, MaxAttempts: 7, Rand: func() float64 { return 0.5 }}
	tests := []struct {
		name    string
		err     error
		attempt int
		want    Decision
	}{
		{"first 500", apiErr{status: 500}, 1, Decision{Class: ClassTemporary, Retry: true, Delay: time.Second}},
		{"third 500", apiErr{status: 500}, 3, Decision{Class: ClassTemporary, Retry: true, Delay: 4 * time.Second}},
		{"capped", apiErr{status: 500}, 6, Decision{Class: ClassTemporary, Retry: true, Delay: 30 * time.Second}},
		{"exhausted", apiErr{status: 500}, 7, Decision{Class: ClassTemporary, Exhausted: true}},
		{"400 fails at once", apiErr{status: 400}, 1, Decision{Class: ClassPermanent}},
		{"retry-after wins", apiErr{status: 429, after: 10 * time.Second}, 1, Decision{Class: ClassTemporary, Retry: true, Delay: 10 * time.Second}},
		{"retry-after beyond max is honoured", apiErr{status: 429, after: 5 * time.Minute}, 1, Decision{Class: ClassTemporary, Retry: true, Delay: 5 * time.Minute}},
		{"snooze spends nothing", Snooze(errors.New("open"), now.Add(90*time.Second)), 7, Decision{Class: ClassSnooze, Retry: true, Delay: 90 * time.Second}},
		{"snooze at least 1s", Snooze(errors.New("open"), now), 1, Decision{Class: ClassSnooze, Retry: true, Delay: time.Second}},
	}
	for _, tt := range tests {
		got := p.Decide(tt.err, tt.attempt, now)
		got.Reason = ""
		if got != tt.want {
			t.Errorf("%s: Decide = %+v, want %+v", tt.name, got, tt.want)
		}
	}
}

func TestBackoffBoundsAndOverflow(t *testing.T) {
	t.Parallel()
	p := Policy{Base: 2 * time.Second, Max: 15 * time.Minute, MaxAttempts: 7, Rand: func() float64 { return 0.999999 }}
	prev := time.Duration(0)
	for a := 1; a <= 12; a++ {
		d := p.Backoff(a)
		if d < prev || d > p.Max {
			t.Errorf("Backoff(%d) = %v (prev %v, max %v)", a, d, prev, p.Max)
		}
		prev = d
	}
	if d := p.Backoff(1 << 30); d > p.Max || d < 0 {
		t.Errorf("Backoff(huge) = %v", d)
	}
	p.Rand = func() float64 { return 0 }
	if d := p.Backoff(3); d != 0 {
		t.Errorf("full jitter must reach 0, got %v", d)
	}
}

func TestVisibilityFor(t *testing.T) {
	t.Parallel()
	for d, want := range map[time.Duration]int32{0: 0, -time.Second: 0, 100 * time.Millisecond: 1, 2 * time.Second: 2, 2500 * time.Millisecond: 3, 24 * time.Hour: 43200} {
		if got := VisibilityFor(d); got != want {
			t.Errorf("VisibilityFor(%v) = %d, want %d", d, got, want)
		}
	}
}

func TestPolicyValidate(t *testing.T) {
	t.Parallel()
	if err := DefaultPolicy().Validate(); err != nil {
		t.Error(err)
	}
	for _, p := range []Policy{{}, {Base: time.Second, Max: time.Millisecond, MaxAttempts: 1}, {Base: time.Second, Max: time.Second}} {
		if p.Validate() == nil {
			t.Errorf("%+v validated", p)
		}
	}
}

func BenchmarkDecide(b *testing.B) {
	p := DefaultPolicy()
	err := apiErr{status: 503}
	now := time.Now()
	for b.Loop() {
		_ = p.Decide(err, 3, now)
	}
}
