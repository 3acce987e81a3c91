package resources_test

import (
	"testing"
	"time"

	"github.com/conveyor/conveyor/internal/job"
	"github.com/conveyor/conveyor/internal/resources"
)

func TestUploadLifecycleArithmetic(t *testing.T) {
	t.Parallel()
	const day = 24 * time.Hour
	if got, want := resources.UploadObjectHorizon, resources.UploadUseWindow+resources.MaxScheduleAhead+resources.RunMargin+resources.MaxStaleAfter; got != want {
		t.Errorf("horizon = %v, want use window + scheduleAt horizon + run margin + stale stage = %v", got, want)
	}
	if resources.MaxStaleAfter < resources.StaleAfterDefault {
		t.Errorf("the default stale stage %v exceeds what the lifecycle allows for (%v)", resources.StaleAfterDefault, resources.MaxStaleAfter)
	}
	days := resources.UploadObjectExpiryDays()
	if exp := time.Duration(days) * day; exp < resources.UploadObjectHorizon || exp >= resources.UploadObjectHorizon+day {
		t.Errorf("lifecycle %d days for a %v horizon: want the horizon rounded up to whole days", days, resources.UploadObjectHorizon)
	}
	if days != 409 { // 7 + 365 + 30 + 7
		t.Errorf("lifecycle = %d days, want 409", days)
	}
	for _, env := range job.Envs {
		if got := resources.For(env).Bucket.UploadObjectExpiry; got != time.Duration(days)*day {
			t.Errorf("%s: bucket expiry %v, want %d days", env, got, days)
		}
	}
}
