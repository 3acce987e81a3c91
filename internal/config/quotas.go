package config

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
)

// Quotas is how many active jobs (scheduled, queued or running) one owner
// may have at once, by plan and for named owners (docs/limits.md,
// "Quotas"). A submission over it is refused with 429 quota_exceeded.
type Quotas struct {
	// ActiveJobs is the active-jobs quota of an owner on each plan
	// (CONVEYOR_ACTIVE_JOB_QUOTAS).
	ActiveJobs map[string]int
	// OwnerActiveJobs overrides ActiveJobs for named owners
	// (CONVEYOR_OWNER_ACTIVE_JOB_QUOTAS).
	OwnerActiveJobs map[string]int
}

// ActiveJobsOf is owner's active-jobs quota on plan: its own, else its
// plan's, else free's (0: none configured, not counted).
func (q Quotas) ActiveJobsOf(owner, plan string) int {
	if n, ok := q.OwnerActiveJobs[owner]; ok {
		return n
	}
	if n, ok := q.ActiveJobs[plan]; ok {
		return n
	}
	return q.ActiveJobs["free"]
}

// ActiveJobQuotasDefault is CONVEYOR_ACTIVE_JOB_QUOTAS's default: active
// jobs at once per plan, each far over what a burst of submissions, the
// bench (1,000 jobs of one owner) or the tests hold at once.
const ActiveJobQuotasDefault = "free=10000,standard=20000,pro=50000,corporate=100000,enterprise=100000"

// QuotaMax is the largest quota.
const QuotaMax = 10000000

// ParseQuotas reads "name=n,…" (CONVEYOR_ACTIVE_JOB_QUOTAS,
// CONVEYOR_OWNER_ACTIVE_JOB_QUOTAS): 1 ≤ n ≤ QuotaMax.
func ParseQuotas(s string) (map[string]int, error) {
	out := map[string]int{}
	for _, pair := range strings.Split(s, ",") {
		pair = strings.TrimSpace(pair)
		if pair == "" {
			continue
		}
		name, v, ok := strings.Cut(pair, "=")
		name = strings.TrimSpace(name)
		n, err := strconv.Atoi(strings.TrimSpace(v))
		if !ok || name == "" || err != nil || n < 1 || n > QuotaMax {
			return nil, fmt.Errorf("%q: want name=n with 1 ≤ n ≤ %d", pair, QuotaMax)
		}
		out[name] = n
	}
	return out, nil
}

// FormatQuotas renders quotas as ParseQuotas reads them, sorted by name.
func FormatQuotas(m map[string]int) string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, k+"="+strconv.Itoa(m[k]))
	}
	return strings.Join(parts, ",")
}
