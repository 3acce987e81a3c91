package config_test

import (
	"strings"
	"testing"

	"github.com/conveyor/conveyor/internal/config"
)

// The bucket lifecycle is derived from the largest allowed stale stage, so
// a longer one is refused at start rather than losing media in use.
func TestStaleAfterBeyondTheLifecycleHorizonIsRefused(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		staleAfter string
		ok         bool
	}{{"", true}, {"1h", true}, {"168h", true}, {"169h", false}} {
		env := map[string]string{"CONVEYOR_ENV": "local", "CONVEYOR_STALE_AFTER": tc.staleAfter}
		_, err := config.From(func(k string) string { return env[k] })
		if tc.ok && err != nil {
			t.Errorf("STALE_AFTER=%q: %v", tc.staleAfter, err)
		}
		if !tc.ok && (err == nil || !strings.Contains(err.Error(), "CONVEYOR_STALE_AFTER")) {
			t.Errorf("STALE_AFTER=%q: err = %v, want it refused", tc.staleAfter, err)
		}
	}
}
