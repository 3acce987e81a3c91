package config_test

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/conveyor/conveyor/internal/config"
)

func TestRatesParseAndFormat(t *testing.T) {
	t.Parallel()
	got, err := config.ParseRates(config.RateLimitsDefault)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]config.Rate{"free": {5, 60}, "standard": {10, 80}, "pro": {20, 100}, "corporate": {50, 100}, "enterprise": {100, 100}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("the default (-want +got):\n%s", diff)
	}
	for plan, r := range got {
		if r.Burst < 50 {
			t.Errorf("%s's burst %d takes fewer than 50 submissions at once", plan, r.Burst)
		}
		// The API stage's throttle (infra/stack/triggers.go): 1,000 a
		// second, bursts of 500; one owner gets a tenth and a fifth at most.
		if r.PerSecond > 100 || r.Burst > 100 {
			t.Errorf("%s's %d/%d takes more than a tenth of the stage's rate or a fifth of its burst", plan, r.PerSecond, r.Burst)
		}
	}
	if back, _ := config.ParseRates(config.FormatRates(got)); !cmp.Equal(back, got) {
		t.Errorf("FormatRates does not read back: %q", config.FormatRates(got))
	}
	for _, bad := range []string{"free=5", "free=0/10", "free=5/0", "=5/10", "free=x/10", "free=10001/10", "free=5/100001"} {
		if _, err := config.ParseRates(bad); err == nil {
			t.Errorf("ParseRates(%q) accepted", bad)
		}
	}
}

func TestRateLimitsAreRead(t *testing.T) {
	t.Parallel()
	vars := map[string]string{config.VarEnv: "local", config.VarRateLimits: "free=1/2,pro=3/4", config.VarOwnerRateLimits: "user-42=50/500"}
	c, err := config.From(func(k string) string { return vars[k] }, "api")
	if err != nil {
		t.Fatal(err)
	}
	want := config.RateLimits{PerPlan: map[string]config.Rate{"free": {1, 2}, "pro": {3, 4}}, PerOwner: map[string]config.Rate{"user-42": {50, 500}}}
	if diff := cmp.Diff(want, c.RateLimits); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	vars[config.VarRateLimits] = "pro=3/4"
	if _, err := config.From(func(k string) string { return vars[k] }, "api"); err == nil || !strings.Contains(err.Error(), config.VarRateLimits) {
		t.Errorf("a list without free: %v", err)
	}
}
