package config

import (
	"fmt"
	"strconv"
	"strings"
)

// Rate is one owner's request rate on the API: PerSecond requests a
// second sustained, Burst at once (a token bucket; docs/limits.md).
type Rate struct {
	PerSecond int
	Burst     int
}

// RateLimits is the owners' request rates, as the API function reads them
// (ratelimit.Config's limits: handler converts them).
type RateLimits struct {
	// PerPlan is the rate of an owner on each plan (CONVEYOR_RATE_LIMITS).
	PerPlan map[string]Rate
	// PerOwner overrides PerPlan for named owners
	// (CONVEYOR_OWNER_RATE_LIMITS).
	PerOwner map[string]Rate
}

// RateLimitsDefault is CONVEYOR_RATE_LIMITS's default: rate a second /
// burst, per plan. Every burst takes 50 submissions at once; no sustained
// rate is more than a tenth of the API stage's 1,000 requests a second, no
// burst more than a fifth of its 500 at once.
const RateLimitsDefault = "free=5/60,standard=10/80,pro=20/100,corporate=50/100,enterprise=100/100"

// Bounds of a Rate.
const (
	RateMaxPerSecond = 10000
	RateMaxBurst     = 100000
)

// ParseRates reads "name=rate/burst,…" (CONVEYOR_RATE_LIMITS,
// CONVEYOR_OWNER_RATE_LIMITS): 1 ≤ rate ≤ RateMaxPerSecond, 1 ≤ burst ≤
// RateMaxBurst.
func ParseRates(s string) (map[string]Rate, error) {
	want := fmt.Sprintf("name=rate/burst with 1 ≤ rate ≤ %d a second and 1 ≤ burst ≤ %d", RateMaxPerSecond, RateMaxBurst)
	return parsePairs(s, want, func(v string) (Rate, bool) {
		rs, bs, ok := strings.Cut(v, "/")
		r, err1 := strconv.Atoi(strings.TrimSpace(rs))
		b, err2 := strconv.Atoi(strings.TrimSpace(bs))
		return Rate{PerSecond: r, Burst: b}, ok && err1 == nil && err2 == nil && r >= 1 && r <= RateMaxPerSecond && b >= 1 && b <= RateMaxBurst
	})
}

// FormatRates renders rates as ParseRates reads them, sorted by name.
func FormatRates(m map[string]Rate) string {
	return formatPairs(m, func(r Rate) string { return fmt.Sprintf("%d/%d", r.PerSecond, r.Burst) })
}
