package config_test

import (
	"strings"
	"testing"
	"time"

	"github.com/conveyor/conveyor/internal/config"
)

// TestStreamAndWebhookSettings: defaults, overrides, and the bounds that
// keep the SSE and webhook promises (a transition within a second, at
// least one stream, an overlap longer than the functions' key cache).
func TestStreamAndWebhookSettings(t *testing.T) {
	t.Parallel()
	get := func(m map[string]string) func(string) string {
		return func(k string) string {
			if k == "CONVEYOR_ENV" {
				return "local"
			}
			return m[k]
		}
	}
	c, err := config.From(get(nil))
	if err != nil {
		t.Fatal(err)
	}
	if c.StreamPoll != time.Second || c.StreamMaxPerUser != 5 || c.WebhookSecretOverlap != 24*time.Hour {
		t.Errorf("defaults: poll %s, max %d, overlap %s", c.StreamPoll, c.StreamMaxPerUser, c.WebhookSecretOverlap)
	}
	c, err = config.From(get(map[string]string{"CONVEYOR_STREAM_POLL": "500ms", "CONVEYOR_STREAM_MAX_PER_USER": "2", "CONVEYOR_WEBHOOK_SECRET_OVERLAP": "1h"}))
	if err != nil || c.StreamPoll != 500*time.Millisecond || c.StreamMaxPerUser != 2 || c.WebhookSecretOverlap != time.Hour {
		t.Errorf("overrides: %+v %v", c, err)
	}
	for v, want := range map[string]string{
		"CONVEYOR_STREAM_POLL=2s":             "CONVEYOR_STREAM_POLL",
		"CONVEYOR_STREAM_MAX_PER_USER=0":      "CONVEYOR_STREAM_MAX_PER_USER",
		"CONVEYOR_WEBHOOK_SECRET_OVERLAP=30s": "CONVEYOR_WEBHOOK_SECRET_OVERLAP",
	} {
		k, val, _ := strings.Cut(v, "=")
		if _, err := config.From(get(map[string]string{k: val})); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want an error naming %s", v, err, want)
		}
	}
}
