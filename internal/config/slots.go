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
	return parsePairs(s, "name=slots with 0 ≤ slots ≤ 1000", func(v string) (int, bool) {
		n, err := strconv.Atoi(v)
		return n, err == nil && n >= 0 && n <= 1000
	})
}

// FormatSlots renders slots as ParseSlots reads them, sorted by name.
func FormatSlots(m map[string]int) string { return formatPairs(m, strconv.Itoa) }

// parsePairs reads "name=value,name=value" (spaces around each part
// trimmed, empty entries skipped) with value parsing each value; an entry
// without a name or with a value it refuses is an error naming the entry
// and what is wanted.
func parsePairs[V any](s, want string, value func(string) (V, bool)) (map[string]V, error) {
	out := map[string]V{}
	for _, pair := range strings.Split(s, ",") {
		pair = strings.TrimSpace(pair)
		if pair == "" {
			continue
		}
		name, v, ok := strings.Cut(pair, "=")
		name = strings.TrimSpace(name)
		val, good := value(strings.TrimSpace(v))
		if !ok || name == "" || !good {
			return nil, fmt.Errorf("%q: want %s", pair, want)
		}
		out[name] = val
	}
	return out, nil
}

// formatPairs renders m as parsePairs reads it, sorted by name.
func formatPairs[V any](m map[string]V, value func(V) string) string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, k+"="+value(m[k]))
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
