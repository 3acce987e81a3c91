package config

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Fairness is the owners' slots, as the functions read them: the value of
// queue.Fairness (the same fields: queue.Fairness(c.Fairness) converts),
// kept here so that the configuration reaches no adapter.
type Fairness struct {
	// PerPlan is the number of slots of an owner on each plan
	// (CONVEYOR_FAIR_SLOTS).
	PerPlan map[string]int
	// PerOwner overrides PerPlan for named owners (CONVEYOR_OWNER_SLOTS).
	PerOwner map[string]int
	// Webhooks is the number of slots each owner's webhook deliveries
	// share on the system tier (CONVEYOR_WEBHOOK_SLOTS).
	Webhooks int
}

// Defaults of the slots' variables.
const (
	// FairSlotsDefault is CONVEYOR_FAIR_SLOTS's default: slots per plan.
	FairSlotsDefault = "free=2,standard=3,pro=4,corporate=6,enterprise=8"
	// WebhookSlotsDefault is CONVEYOR_WEBHOOK_SLOTS's default: the slots
	// each owner's webhook deliveries share on the system tier.
	WebhookSlotsDefault = 4
)

// ParseSlots reads "name=n,name=n" (CONVEYOR_FAIR_SLOTS,
// CONVEYOR_OWNER_SLOTS); n ≥ 0.
func ParseSlots(s string) (map[string]int, error) {
	out := map[string]int{}
	for _, pair := range strings.Split(s, ",") {
		pair = strings.TrimSpace(pair)
		if pair == "" {
			continue
		}
		name, v, ok := strings.Cut(pair, "=")
		n, err := strconv.Atoi(strings.TrimSpace(v))
		name = strings.TrimSpace(name)
		if !ok || name == "" || err != nil || n < 0 || n > 1000 {
			return nil, fmt.Errorf("%q: want name=slots with 0 ≤ slots ≤ 1000", pair)
		}
		out[name] = n
	}
	return out, nil
}

// FormatSlots renders slots as ParseSlots reads them, sorted by name.
func FormatSlots(m map[string]int) string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, k+"="+strconv.Itoa(m[k]))
	}
	return strings.Join(parts, ",")
}

// Defaults the domain packages keep as well (each their own fallback for a
// zero setting); config_test keeps the two equal.
const (
	// BreakerHostOwnersDefault is breaker.HostOwnersDefault.
	BreakerHostOwnersDefault = 3
	// HTTPBreakersPerUserDefault is breaker.MaxPerOwnerDefault.
	HTTPBreakersPerUserDefault = 20
	// HTTPMaxSnoozesDefault is httpkind.MaxSnoozesDefault.
	HTTPMaxSnoozesDefault = 30
	// HTTPMaxAgeDefault is httpkind.MaxAgeDefault.
	HTTPMaxAgeDefault = 24 * time.Hour
	// HTTPTimeoutFloorDefault is httpkind.TimeoutFloorDefault.
	HTTPTimeoutFloorDefault = 2 * time.Second
)

// probeCallTimeout is breaker.ProbeCallTimeout: the bound a half-open
// probe's call gets out of its lease (four fifths of it).
func probeCallTimeout(lease time.Duration) time.Duration { return lease - lease/5 }
