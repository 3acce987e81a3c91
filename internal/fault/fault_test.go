package fault_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/conveyor/conveyor/internal/fault"
)

func TestClassesMatchThroughWrapping(t *testing.T) {
	t.Parallel()
	own := &fault.NotFound{Msg: "schedule not found"}
	err := fmt.Errorf("getting it: %w", own)
	if !errors.Is(err, fault.ErrNotFound) || !errors.Is(err, own) || errors.Is(err, fault.ErrConflict) {
		t.Errorf("a wrapped NotFound: Is(ErrNotFound) %v, Is(itself) %v, Is(ErrConflict) %v", errors.Is(err, fault.ErrNotFound), errors.Is(err, own), errors.Is(err, fault.ErrConflict))
	}
	if errors.Is(err, &fault.NotFound{Msg: "schedule not found"}) {
		t.Error("another NotFound of the same text matches: a package's sentinel must be its own")
	}
	var l *fault.Limit
	if !errors.As(fmt.Errorf("creating: %w", &fault.Limit{Code: "schedule_limit", Max: 100, Msg: "at most 100"}), &l) || l.Code != "schedule_limit" || l.Max != 100 {
		t.Errorf("a wrapped Limit: %+v", l)
	}
	var th *fault.Throttled
	if !errors.As(fmt.Errorf("admitting: %w", &fault.Throttled{Code: "throttled", Limit: 5, Period: time.Second, Burst: 60, RetryAfter: time.Second, Msg: "too many"}), &th) || th.Limit != 5 || th.Error() != "too many" {
		t.Errorf("a wrapped Throttled: %+v", th)
	}
}
