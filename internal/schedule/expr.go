package schedule

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// MinRate is the shortest rate (EventBridge Scheduler's too).
const MinRate = time.Minute

// Expr is a schedule's recurrence: a five-field cron ("*/15 * * * *":
// minute hour day-of-month month day-of-week, Sunday = 0) or a rate, in a
// time zone. It computes the ticks itself (the local runtime, next runs)
// and renders the EventBridge Scheduler expression that fires them in AWS.
type Expr struct {
	// Cron is the five-field expression, or "" for a rate.
	Cron string
	// Rate is the interval of a rate schedule (whole minutes).
	Rate time.Duration
	// Anchor is when a rate schedule's ticks start counting.
	Anchor time.Time
	// Loc is the time zone cron fields are read in.
	Loc *time.Location

	fields [5]field
}

// field is the set of values one cron field allows.
type field struct {
	any  bool
	vals map[int]bool
}

func (f field) has(v int) bool { return f.any || f.vals[v] }

var bounds = [5][2]int{{0, 59}, {0, 23}, {1, 31}, {1, 12}, {0, 7}}
var names = [5]string{"minute", "hour", "day of month", "month", "day of week"}

// ParseCron reads a five-field cron expression in loc.
func ParseCron(s string, loc *time.Location) (Expr, error) {
	parts := strings.Fields(s)
	if len(parts) != 5 {
		return Expr{}, errors.New("must have five fields: minute hour day-of-month month day-of-week")
	}
	e := Expr{Cron: strings.Join(parts, " "), Loc: loc}
	for i, p := range parts {
		f, err := parseField(p, bounds[i][0], bounds[i][1])
		if err != nil {
			return Expr{}, fmt.Errorf("%s field %q: %w", names[i], p, err)
		}
		if i == 4 && f.vals[7] {
			f.vals[0] = true // Sunday is 0 or 7
		}
		e.fields[i] = f
	}
	if !e.fields[2].any && !e.fields[4].any {
		// EventBridge Scheduler cannot restrict both (one must be "?").
		return Expr{}, errors.New("may restrict day-of-month or day-of-week, not both")
	}
	return e, nil
}

func parseField(s string, lo, hi int) (field, error) {
	if s == "*" {
		return field{any: true}, nil
	}
	f := field{vals: map[int]bool{}}
	for _, part := range strings.Split(s, ",") {
		rng, stepS, hasStep := strings.Cut(part, "/")
		step := 1
		if hasStep {
			n, err := strconv.Atoi(stepS)
			if err != nil || n < 1 {
				return field{}, errors.New("bad step")
			}
			step = n
		}
		from, to := lo, hi
		switch {
		case rng == "*":
		case strings.Contains(rng, "-"):
			a, b, _ := strings.Cut(rng, "-")
			x, err1 := strconv.Atoi(a)
			y, err2 := strconv.Atoi(b)
			if err1 != nil || err2 != nil || x > y {
				return field{}, errors.New("bad range")
			}
			from, to = x, y
		default:
			x, err := strconv.Atoi(rng)
			if err != nil {
				return field{}, errors.New("not a number")
			}
			from, to = x, x
			if hasStep {
				to = hi
			}
		}
		if from < lo || to > hi {
			return field{}, fmt.Errorf("out of range %d-%d", lo, hi)
		}
		for v := from; v <= to; v += step {
			f.vals[v] = true
		}
	}
	return f, nil
}

// ParseRate reads a rate as a Go duration ("5m", "1h30m"): whole minutes,
// at least MinRate. Ticks fall at anchor + k·rate (k ≥ 1 for times from
// the anchor on; the anchor itself is the first tick of a time before it).
func ParseRate(s string, anchor time.Time) (Expr, error) {
	d, err := time.ParseDuration(strings.TrimSpace(s))
	if err != nil {
		return Expr{}, errors.New(`must be a duration such as "5m" or "1h"`)
	}
	if d < MinRate || d%time.Minute != 0 {
		return Expr{}, errors.New("must be whole minutes, at least 1m")
	}
	return Expr{Rate: d, Anchor: anchor.UTC().Truncate(time.Second), Loc: time.UTC}, nil
}

// Next returns the first tick strictly after t.
func (e Expr) Next(t time.Time) time.Time {
	if e.Rate > 0 {
		if t.Before(e.Anchor) {
			return e.Anchor
		}
		k := t.Sub(e.Anchor)/e.Rate + 1
		return e.Anchor.Add(k * e.Rate)
	}
	loc := e.Loc
	if loc == nil {
		loc = time.UTC
	}
	c := t.In(loc).Truncate(time.Minute).Add(time.Minute)
	limit := c.AddDate(5, 0, 0)
	for c.Before(limit) {
		switch {
		case !e.fields[3].has(int(c.Month())):
			c = time.Date(c.Year(), c.Month()+1, 1, 0, 0, 0, 0, loc)
		case !e.dayMatches(c):
			c = time.Date(c.Year(), c.Month(), c.Day()+1, 0, 0, 0, 0, loc)
		case !e.fields[1].has(c.Hour()):
			c = time.Date(c.Year(), c.Month(), c.Day(), c.Hour()+1, 0, 0, 0, loc)
		case !e.fields[0].has(c.Minute()):
			c = c.Add(time.Minute)
		default:
			return c.UTC()
		}
	}
	return time.Time{} // never (e.g. 31 February)
}

func (e Expr) dayMatches(c time.Time) bool {
	return e.fields[2].has(c.Day()) && e.fields[4].has(int(c.Weekday()))
}

// Ticks returns every tick in (from, to], at most max of them.
func (e Expr) Ticks(from, to time.Time, max int) []time.Time {
	var out []time.Time
	for t := e.Next(from); !t.IsZero() && !t.After(to) && len(out) < max; t = e.Next(t) {
		out = append(out, t)
	}
	return out
}

// AWS renders the EventBridge Scheduler expression: rate(n minutes|hours|
// days) or cron(minute hour day-of-month month day-of-week year), where
// one day field is "?" and days of the week count from 1 (Sunday).
func (e Expr) AWS() string {
	if e.Rate > 0 {
		m := int(e.Rate / time.Minute)
		unit, n := "minute", m
		switch {
		case m%(24*60) == 0:
			unit, n = "day", m/(24*60)
		case m%60 == 0:
			unit, n = "hour", m/60
		}
		if n != 1 {
			unit += "s"
		}
		return fmt.Sprintf("rate(%d %s)", n, unit)
	}
	p := strings.Fields(e.Cron)
	dom, dow := p[2], p[4]
	switch {
	case dow == "*":
		dow = "?"
	default:
		dom = "?"
		dow = awsWeekdays(dow)
	}
	return fmt.Sprintf("cron(%s %s %s %s %s *)", p[0], p[1], dom, p[3], dow)
}

// awsWeekdays renumbers a day-of-week field from 0–7 (Sunday 0 or 7) to
// EventBridge's 1–7 (Sunday 1), leaving steps as they are.
func awsWeekdays(s string) string {
	var parts []string
	for _, part := range strings.Split(s, ",") {
		rng, step, hasStep := strings.Cut(part, "/")
		conv := func(v string) string {
			n, err := strconv.Atoi(v)
			if err != nil {
				return v
			}
			return strconv.Itoa(n%7 + 1)
		}
		if a, b, ok := strings.Cut(rng, "-"); ok {
			x, _ := strconv.Atoi(a)
			y, _ := strconv.Atoi(b)
			if y == 7 && x > 0 {
				// x-7 wraps to Sunday: x..6 and Sunday.
				rng = conv(a) + "-7,1"
				if x == 6 {
					rng = "7,1"
				}
			} else {
				rng = conv(a) + "-" + conv(b)
			}
		} else {
			rng = conv(rng)
		}
		if hasStep {
			rng += "/" + step
		}
		parts = append(parts, rng)
	}
	return strings.Join(parts, ",")
}

// ParseAWS reads an EventBridge Scheduler expression as AWS renders it
// (rate(n unit) anchored at start, or cron(… year) in loc) back into an
// Expr: the local runtime fires the emulator's schedules with it.
func ParseAWS(s string, loc *time.Location, start time.Time) (Expr, error) {
	s = strings.TrimSpace(s)
	switch {
	case strings.HasPrefix(s, "rate(") && strings.HasSuffix(s, ")"):
		parts := strings.Fields(s[len("rate(") : len(s)-1])
		if len(parts) != 2 {
			return Expr{}, fmt.Errorf("bad rate expression %q", s)
		}
		n, err := strconv.Atoi(parts[0])
		if err != nil || n < 1 {
			return Expr{}, fmt.Errorf("bad rate expression %q", s)
		}
		unit := map[string]time.Duration{"minute": time.Minute, "minutes": time.Minute, "hour": time.Hour, "hours": time.Hour, "day": 24 * time.Hour, "days": 24 * time.Hour}[parts[1]]
		if unit == 0 {
			return Expr{}, fmt.Errorf("bad rate unit in %q", s)
		}
		return Expr{Rate: time.Duration(n) * unit, Anchor: start.UTC().Truncate(time.Second), Loc: time.UTC}, nil
	case strings.HasPrefix(s, "cron(") && strings.HasSuffix(s, ")"):
		p := strings.Fields(s[len("cron(") : len(s)-1])
		if len(p) != 6 {
			return Expr{}, fmt.Errorf("bad cron expression %q", s)
		}
		dom, dow := p[2], p[4]
		if dom == "?" {
			dom = "*"
		}
		if dow == "?" {
			dow = "*"
		} else {
			dow = stdWeekdays(dow)
		}
		return ParseCron(strings.Join([]string{p[0], p[1], dom, p[3], dow}, " "), loc)
	}
	return Expr{}, fmt.Errorf("unsupported schedule expression %q", s)
}

// stdWeekdays renumbers EventBridge's 1–7 (Sunday 1) to 0–6.
func stdWeekdays(s string) string {
	var parts []string
	for _, part := range strings.Split(s, ",") {
		rng, step, hasStep := strings.Cut(part, "/")
		conv := func(v string) string {
			n, err := strconv.Atoi(v)
			if err != nil {
				return v
			}
			return strconv.Itoa(n - 1)
		}
		if a, b, ok := strings.Cut(rng, "-"); ok {
			rng = conv(a) + "-" + conv(b)
		} else {
			rng = conv(rng)
		}
		if hasStep {
			rng += "/" + step
		}
		parts = append(parts, rng)
	}
	return strings.Join(parts, ",")
}
