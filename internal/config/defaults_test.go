package config_test

import (
	"testing"
	"time"

	"github.com/conveyor/conveyor/internal/aws/queue"
	"github.com/conveyor/conveyor/internal/breaker"
	"github.com/conveyor/conveyor/internal/config"
	"github.com/conveyor/conveyor/internal/httpkind"
)

// TestDefaultsAreTheDomainsOwn: the configuration reaches no domain
// package (internal/architecture), so it keeps its own copy of the
// defaults the domain packages fall back to; the two stay equal, and the
// configuration's Fairness converts to the queue's.
func TestDefaultsAreTheDomainsOwn(t *testing.T) {
	t.Parallel()
	for name, c := range map[string][2]any{
		"BreakerHostOwnersDefault":   {config.BreakerHostOwnersDefault, breaker.HostOwnersDefault},
		"HTTPBreakersPerUserDefault": {config.HTTPBreakersPerUserDefault, breaker.MaxPerOwnerDefault},
		"HTTPMaxSnoozesDefault":      {config.HTTPMaxSnoozesDefault, httpkind.MaxSnoozesDefault},
		"HTTPMaxAgeDefault":          {config.HTTPMaxAgeDefault, httpkind.MaxAgeDefault},
		"HTTPTimeoutFloorDefault":    {config.HTTPTimeoutFloorDefault, httpkind.TimeoutFloorDefault},
	} {
		if c[0] != c[1] {
			t.Errorf("config.%s = %v, the domain's %v", name, c[0], c[1])
		}
	}
	lease := 30 * time.Second
	for timeout, ok := range map[time.Duration]bool{breaker.ProbeCallTimeout(lease): true, breaker.ProbeCallTimeout(lease) + time.Millisecond: false} {
		env := map[string]string{config.VarEnv: "local", config.VarBreakerProbeLease: lease.String(), config.VarCallTimeout: timeout.String()}
		if _, err := config.From(func(k string) string { return env[k] }); (err == nil) != ok {
			t.Errorf("a call timeout of %s under a %s probe lease (breaker.ProbeCallTimeout %s): accepted %v, want %v (%v)",
				timeout, lease, breaker.ProbeCallTimeout(lease), err == nil, ok, err)
		}
	}
	f := queue.Fairness(config.Fairness{PerPlan: map[string]int{"free": 2}, Webhooks: 4})
	if f.Slots("u", "free") != 2 {
		t.Errorf("queue.Fairness(config.Fairness): free owner has %d slots, want 2", f.Slots("u", "free"))
	}
}

func TestParseSlots(t *testing.T) {
	t.Parallel()
	got, err := config.ParseSlots(config.FairSlotsDefault)
	if err != nil || got["free"] != 2 || got["enterprise"] != 8 || config.FormatSlots(got) != "corporate=6,enterprise=8,free=2,pro=4,standard=3" {
		t.Fatalf("default: %v %v", got, err)
	}
	if got, err := config.ParseSlots(""); err != nil || len(got) != 0 {
		t.Errorf("empty: %v %v", got, err)
	}
	for _, bad := range []string{"free", "free=-1", "=3", "free=x", "free=1001"} {
		if _, err := config.ParseSlots(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}
