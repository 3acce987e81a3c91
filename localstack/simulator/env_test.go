package simulator_test

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/conveyor/conveyor/localstack/simulator"
)

func TestOptionsFromEnv(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		env     map[string]string
		want    simulator.Options
		wantErr []string
	}{
		{name: "nothing set", env: map[string]string{}, want: simulator.Options{}},
		{name: "everything", env: map[string]string{
			"CONVEYOR_DEVIANTART_CLIENT_ID": "id", "CONVEYOR_DEVIANTART_CLIENT_SECRET": "s3cret",
			"CONVEYOR_SIMULATOR_TOKEN_TTL": "5m", "CONVEYOR_SIMULATOR_RATE_LIMIT": "60", "CONVEYOR_SIMULATOR_RATE_WINDOW": "1m",
			"CONVEYOR_SIMULATOR_LATENCY": "120ms", "CONVEYOR_SIMULATOR_LATENCY_JITTER": "80ms",
		}, want: simulator.Options{ClientID: "id", ClientSecret: "s3cret", AccessTokenTTL: 5 * time.Minute, RateLimit: 60,
			RateWindow: time.Minute, Latency: 120 * time.Millisecond, LatencyJitter: 80 * time.Millisecond}},
		{name: "malformed", env: map[string]string{
			"CONVEYOR_DEVIANTART_CLIENT_SECRET": "s3cret", "CONVEYOR_SIMULATOR_TOKEN_TTL": "an hour",
			"CONVEYOR_SIMULATOR_RATE_LIMIT": "-1", "CONVEYOR_SIMULATOR_LATENCY": "-5ms",
		}, wantErr: []string{"CONVEYOR_SIMULATOR_TOKEN_TTL", "CONVEYOR_SIMULATOR_RATE_LIMIT", "CONVEYOR_SIMULATOR_LATENCY "}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := simulator.OptionsFromEnv(func(k string) string { return tt.env[k] })
			if len(tt.wantErr) > 0 {
				if err == nil {
					t.Fatal("no error")
				}
				for _, w := range tt.wantErr {
					if !strings.Contains(err.Error()+" ", w) {
						t.Errorf("error %q does not name %s", err, w)
					}
				}
				if strings.Contains(err.Error(), "s3cret") || strings.Contains(err.Error(), "an hour") {
					t.Errorf("error %q carries a value", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got, cmpopts.IgnoreFields(simulator.Options{}, "Now")); diff != "" {
				t.Errorf("options (-want +got):\n%s", diff)
			}
		})
	}
}
