package config_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/conveyor/conveyor/internal/config"
)

const (
	tableBegin = "<!-- config table: generated from internal/config/vars.go (CONVEYOR_UPDATE_DOCS=1 go test ./internal/config -run TestConfigurationPage) -->\n"
	tableEnd   = "<!-- end of config table -->\n"
)

// docs/configuration.md's table is the table in vars.go, rendered: a
// variable added, renamed or given another default there changes the
// page, or this test fails. CONVEYOR_UPDATE_DOCS=1 rewrites it.
func TestConfigurationPageIsTheVarsTable(t *testing.T) {
	path := filepath.Join("..", "..", "docs", "configuration.md")
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	page := string(raw)
	i, j := strings.Index(page, tableBegin), strings.Index(page, tableEnd)
	if i < 0 || j < i {
		t.Fatalf("docs/configuration.md lacks the markers of the configuration table:\n%s%s", tableBegin, tableEnd)
	}
	got, want := page[i+len(tableBegin):j], config.Markdown()
	if got == want {
		return
	}
	if os.Getenv("CONVEYOR_UPDATE_DOCS") == "1" {
		if err := os.WriteFile(path, []byte(page[:i+len(tableBegin)]+want+page[j:]), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	t.Errorf("docs/configuration.md's table differs from internal/config's (run CONVEYOR_UPDATE_DOCS=1 go test ./internal/config -run TestConfigurationPage):\n--- page\n%s\n--- table\n%s", got, want)
}

// From reads every row of the table that has a typed default: a malformed
// value of each is refused, naming the variable, and an unset one takes
// the table's default.
func TestFromReadsEveryVariableOfTheTable(t *testing.T) {
	t.Parallel()
	for _, v := range config.Vars {
		switch v.Default.(type) {
		case time.Duration, int, int64:
		default:
			continue
		}
		_, err := config.From(func(k string) string {
			switch k {
			case config.VarEnv:
				return "local"
			case v.Name:
				return "bogus"
			}
			return ""
		})
		if err == nil || !strings.Contains(err.Error(), v.Name+`="bogus"`) {
			t.Errorf("%s=bogus: err = %v, want it named", v.Name, err)
		}
	}
	c, err := config.From(func(k string) string {
		if k == config.VarEnv {
			return "local"
		}
		return ""
	})
	if err != nil {
		t.Fatal(err)
	}
	for name, got := range map[string]any{
		config.VarStreamPing: c.StreamPing, config.VarCallTimeout: c.CallTimeout, config.VarUploadRateMin: c.UploadRateMin,
		config.VarBreakerProbeLease: c.BreakerProbeLease, config.VarRetryBase: c.RetryBase, config.VarMaxAttempts: c.MaxAttempts,
		config.VarMaxUploadSize: c.MaxUploadSize, config.VarAPIAddr: c.APIAddr, config.VarDeviantArtURL: c.DeviantArtURL,
	} {
		if want := config.Lookup(name).Default; got != want {
			t.Errorf("%s = %v, want the table's default %v", name, got, want)
		}
	}
}

// The external calls' deadlines come from the environment, and a call
// timeout a half-open probe could outlive its lease with is refused, with
// the reason.
func TestCallTimeoutAndUploadRate(t *testing.T) {
	t.Parallel()
	read := func(env map[string]string) (config.Config, error) {
		return config.From(func(k string) string {
			if k == config.VarEnv {
				return "local"
			}
			return env[k]
		})
	}
	c, err := read(map[string]string{config.VarCallTimeout: "10s", config.VarUploadRateMin: "262144"})
	if err != nil {
		t.Fatal(err)
	}
	if c.BreakerHostOwners != 3 {
		t.Errorf("BreakerHostOwners = %d, want the default 3", c.BreakerHostOwners)
	}
	if c.CallTimeout != 10*time.Second || c.UploadRateMin != 256<<10 {
		t.Errorf("CallTimeout %s UploadRateMin %d, want 10s and 262144", c.CallTimeout, c.UploadRateMin)
	}
	for _, tc := range []struct {
		env  map[string]string
		want []string
	}{
		{map[string]string{config.VarCallTimeout: "25s"}, []string{"CONVEYOR_CALL_TIMEOUT (25s) must be shorter than the breaker's probe lease", "24s", "CONVEYOR_BREAKER_PROBE_LEASE (30s)"}},
		{map[string]string{config.VarCallTimeout: "5s", config.VarBreakerProbeLease: "5s"}, []string{"CONVEYOR_CALL_TIMEOUT (5s) must be shorter than the breaker's probe lease", "4s"}},
		{map[string]string{config.VarCallTimeout: "0s"}, []string{"CONVEYOR_CALL_TIMEOUT must be positive"}},
		{map[string]string{config.VarUploadRateMin: "0"}, []string{"CONVEYOR_UPLOAD_RATE_MIN must be at least 1"}},
		{map[string]string{config.VarBreakerHostOwners: "1"}, []string{"CONVEYOR_BREAKER_HOST_OWNERS must be at least 2"}},
		{map[string]string{config.VarStreamPing: "0s"}, []string{"CONVEYOR_STREAM_PING must be positive"}},
		{map[string]string{config.VarDeviantArtURL: "www.deviantart.com"}, []string{"CONVEYOR_DEVIANTART_URL", "not an absolute http(s) URL"}},
	} {
		_, err := read(tc.env)
		for _, w := range tc.want {
			if err == nil || !strings.Contains(err.Error(), w) {
				t.Errorf("%v: err = %v, want it to say %q", tc.env, err, w)
			}
		}
	}
	if _, err := read(map[string]string{config.VarCallTimeout: "4s", config.VarBreakerProbeLease: "5s"}); err != nil {
		t.Errorf("a call timeout of 4/5 of the lease: %v", err)
	}
	// A short cooldown (tests, chaos) shortens the unset lease; the
	// defaulted call timeout is then not held against it (breaker.Do cuts
	// the probe's call at 4/5 of the lease), an explicit one is.
	c, err = read(map[string]string{config.VarBreakerCooldown: "2s"})
	if err != nil || c.BreakerProbeLease != 2*time.Second {
		t.Errorf("cooldown 2s: lease %s, %v; want 2s and no error", c.BreakerProbeLease, err)
	}
	if _, err := read(map[string]string{config.VarBreakerCooldown: "2s", config.VarCallTimeout: "20s"}); err == nil || !strings.Contains(err.Error(), "CONVEYOR_CALL_TIMEOUT (20s) must be shorter") {
		t.Errorf("cooldown 2s, call timeout 20s: err = %v, want the call timeout refused", err)
	}
}
