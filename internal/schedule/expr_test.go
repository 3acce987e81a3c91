package schedule

import (
	"strings"
	"testing"
	"time"
	_ "time/tzdata" // the zones the tests name, on any host (the schedules function links it too)
)

func mustLoc(t *testing.T, name string) *time.Location {
	t.Helper()
	loc, err := time.LoadLocation(name)
	if err != nil {
		t.Fatal(err)
	}
	return loc
}

func TestCronNextAndAWSExpression(t *testing.T) {
	t.Parallel()
	moscow := mustLoc(t, "Europe/Moscow")
	from := time.Date(2026, 11, 23, 12, 7, 30, 0, time.UTC) // a Monday
	for _, tc := range []struct {
		cron string
		loc  *time.Location
		next time.Time
		aws  string
	}{
		{"*/15 * * * *", time.UTC, time.Date(2026, 11, 23, 12, 15, 0, 0, time.UTC), "cron(*/15 * * * ? *)"},
		{"0 9 * * *", moscow, time.Date(2026, 11, 24, 6, 0, 0, 0, time.UTC), "cron(0 9 * * ? *)"},
		{"30 8 * * 1-5", time.UTC, time.Date(2026, 11, 24, 8, 30, 0, 0, time.UTC), "cron(30 8 ? * 2-6 *)"},
		{"0 0 1 * *", time.UTC, time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC), "cron(0 0 1 * ? *)"},
		{"0 12 * * 0", time.UTC, time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC), "cron(0 12 ? * 1 *)"},
	} {
		e, err := ParseCron(tc.cron, tc.loc)
		if err != nil {
			t.Fatalf("%s: %v", tc.cron, err)
		}
		if got := e.Next(from); !got.Equal(tc.next) {
			t.Errorf("%s: next %s, want %s", tc.cron, got, tc.next)
		}
		if got := e.AWS(); got != tc.aws {
			t.Errorf("%s: AWS %s, want %s", tc.cron, got, tc.aws)
		}
		back, err := ParseAWS(e.AWS(), tc.loc, time.Time{})
		if err != nil {
			t.Fatalf("%s: parsing %s back: %v", tc.cron, e.AWS(), err)
		}
		if got := back.Next(from); !got.Equal(tc.next) {
			t.Errorf("%s: back from AWS, next %s, want %s", tc.cron, got, tc.next)
		}
	}
	for _, bad := range []string{"* * * *", "61 * * * *", "* * 1 * 1", "a * * * *", "*/0 * * * *", "5-1 * * * *"} {
		if _, err := ParseCron(bad, time.UTC); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
}

func TestRateTicksKeepTheirPhase(t *testing.T) {
	t.Parallel()
	anchor := time.Date(2026, 11, 23, 12, 0, 10, 0, time.UTC)
	e, err := ParseRate("5m", anchor)
	if err != nil {
		t.Fatal(err)
	}
	if got := e.AWS(); got != "rate(5 minutes)" {
		t.Errorf("AWS = %s", got)
	}
	ticks := e.Ticks(anchor, anchor.Add(16*time.Minute), 10)
	want := []time.Time{anchor.Add(5 * time.Minute), anchor.Add(10 * time.Minute), anchor.Add(15 * time.Minute)}
	if len(ticks) != len(want) {
		t.Fatalf("ticks %v, want %v", ticks, want)
	}
	for i := range want {
		if !ticks[i].Equal(want[i]) {
			t.Errorf("tick %d = %s, want %s", i, ticks[i], want[i])
		}
	}
	for rate, aws := range map[string]string{"1m": "rate(1 minute)", "2h": "rate(2 hours)", "48h": "rate(2 days)", "90m": "rate(90 minutes)"} {
		e, err := ParseRate(rate, anchor)
		if err != nil || e.AWS() != aws {
			t.Errorf("%s: %s, %v; want %s", rate, e.AWS(), err, aws)
		}
	}
	for _, bad := range []string{"30s", "90s", "0m", "-5m", "soon"} {
		if _, err := ParseRate(bad, anchor); err == nil {
			t.Errorf("rate %q parsed", bad)
		}
	}
}

func TestTickJobIDsAreStablePerTickAndSecret(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 11, 23, 12, 5, 0, 0, time.UTC)
	a, b := newSeed(), newSeed()
	if TickJobID(a, at) != TickJobID(a, at.In(mustLoc(t, "Asia/Tokyo"))) {
		t.Error("the same tick gave two ids")
	}
	if TickJobID(a, at) == TickJobID(a, at.Add(time.Minute)) || TickJobID(a, at) == TickJobID(b, at) {
		t.Error("different ticks or seeds share an id")
	}
}

// Scheduler substitutes its context attributes only where the input holds
// them literally: JSON's HTML escaping of < and > would hide them.
func TestTickInputCarriesTheScheduledTimeAttribute(t *testing.T) {
	t.Parallel()
	in := TickInput(Schedule{ID: "sch_x", Owner: "u<1>"})
	if !strings.Contains(in, `"at":"<aws.scheduler.scheduled-time>"`) {
		t.Errorf("input %s lacks the literal context attribute", in)
	}
}
