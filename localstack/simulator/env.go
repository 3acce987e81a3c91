package simulator

import (
	"errors"
	"fmt"
	"strconv"
	"time"
)

// Environment variables OptionsFromEnv reads. The client credentials are
// the very variables the functions read, so one environment configures
// both sides alike.
const (
	EnvClientID      = "CONVEYOR_DEVIANTART_CLIENT_ID"
	EnvClientSecret  = "CONVEYOR_DEVIANTART_CLIENT_SECRET"
	EnvTokenTTL      = "CONVEYOR_SIMULATOR_TOKEN_TTL"
	EnvRateLimit     = "CONVEYOR_SIMULATOR_RATE_LIMIT"
	EnvRateWindow    = "CONVEYOR_SIMULATOR_RATE_WINDOW"
	EnvLatency       = "CONVEYOR_SIMULATOR_LATENCY"
	EnvLatencyJitter = "CONVEYOR_SIMULATOR_LATENCY_JITTER"
)

// OptionsFromEnv reads Options from the environment through getenv:
// the client credentials (EnvClientID, EnvClientSecret), the token lifetime
// (EnvTokenTTL), the rate limit (EnvRateLimit calls per EnvRateWindow) and
// the latency (EnvLatency plus up to EnvLatencyJitter), durations in Go
// syntax. Unset variables keep Options' defaults. The error names every
// variable that is malformed, never a value.
func OptionsFromEnv(getenv func(string) string) (Options, error) {
	o := Options{ClientID: getenv(EnvClientID), ClientSecret: getenv(EnvClientSecret)}
	var errs []error
	dur := func(name string, dst *time.Duration) {
		v := getenv(name)
		if v == "" {
			return
		}
		d, err := time.ParseDuration(v)
		if err != nil || d < 0 {
			errs = append(errs, fmt.Errorf("%s is not a non-negative Go duration (like 250ms or 1h)", name))
			return
		}
		*dst = d
	}
	dur(EnvTokenTTL, &o.AccessTokenTTL)
	dur(EnvRateWindow, &o.RateWindow)
	dur(EnvLatency, &o.Latency)
	dur(EnvLatencyJitter, &o.LatencyJitter)
	if v := getenv(EnvRateLimit); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			errs = append(errs, fmt.Errorf("%s is not a non-negative integer", EnvRateLimit))
		}
		o.RateLimit = n
	}
	if len(errs) > 0 {
		return Options{}, fmt.Errorf("simulator configuration: %w", errors.Join(errs...))
	}
	return o, nil
}
