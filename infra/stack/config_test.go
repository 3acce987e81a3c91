package stack_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/conveyor/conveyor/infra/stack"
	"github.com/conveyor/conveyor/internal/job"
	"github.com/conveyor/conveyor/internal/resources"
)

// alarmSubscriptions are the configured staging stack's alarm subscribers.
var alarmSubscriptions = []string{"ops@conveyor.dev", "https://hooks.conveyor.dev/sns"}

// configuredStaging sets every optional setting, for the by-ARN stack.
var configuredStaging = stack.Config{
	AllowedOrigins:      []string{"https://app.conveyor.dev", "http://localhost:5173"},
	ExternalAPI:         stack.ExternalAPI{URL: "https://sandbox.conveyor.dev/api"},
	Alarms:              stack.Alarms{Subscribers: alarmSubscriptions, AccountConcurrencyPercent: 60},
	ReservedConcurrency: map[string]int{resources.FuncAPI: 10, resources.FuncStream: 5},
	LogRetentionDays:    14,
	Tracing: stack.Tracing{Enabled: false, OTLPEndpoint: "http://localhost:4318", SampleRatio: &quarter,
		CollectorLayer: collectorLayer},
	OIDC: stack.OIDC{Issuer: "https://login.conveyor.dev/", Audience: "conveyor-staging",
		RoleClaim: "https://conveyor.dev/role", PlanClaim: "plan"},
	Fairness:  stack.Fairness{Plans: map[string]int{"free": 1, "enterprise": 12}, Owners: map[string]int{"user-42": 16}},
	Rates:     stack.Rates{Plans: map[string]stack.Rate{"free": {PerSecond: 2, Burst: 50}}, Owners: map[string]stack.Rate{"user-42": {PerSecond: 40, Burst: 400}}},
	BusEvents: string(job.BusAll),
}

var quarter = 0.25

// collectorLayer is the configured staging stack's trace collector.
const collectorLayer = "arn:aws:lambda:eu-west-1:901920570463:layer:aws-otel-collector-arm64-ver-0-117-0:1"

// alarmTopicARN is the existing topic of the by-topic stack.
const alarmTopicARN = "arn:aws:sns:eu-west-1:123456789012:ops-alarms"

func withAlarmTopic(cfg stack.Config) stack.Config {
	cfg.Alarms = stack.Alarms{TopicARN: alarmTopicARN}
	return cfg
}

// reservation is the ReservedConcurrentExecutions a function's template
// should carry: the configured one, or none.
func reservation(cfg stack.Config, fn string) any {
	if n, ok := cfg.ReservedConcurrency[fn]; ok {
		return n
	}
	return absent{}
}

func configFile(t *testing.T, env job.Env) []byte {
	t.Helper()
	b, err := os.ReadFile(stack.ConfigPath(filepath.Join("..", stack.ConfigDirDefault), env))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// The checked-in configurations deploy: each is valid, and together they
// fit one default account and a new account's quota of 10, since they
// reserve nothing.
func TestCheckedInConfigurationsFitOneAccount(t *testing.T) {
	t.Parallel()
	cfgs, err := stack.LoadConfigs(filepath.Join("..", stack.ConfigDirDefault))
	if err != nil {
		t.Fatalf("the checked-in configuration does not load:\n%v", err)
	}
	total := 0
	for _, env := range job.CloudEnvs {
		cfg, ok := cfgs[env]
		if !ok {
			t.Fatalf("no configuration for %s", env)
		}
		total += cfg.ReservedTotal()
	}
	for _, quota := range []int{stack.AccountConcurrencyDefault, stack.AccountConcurrencyNew} {
		if can := stack.Reservable(quota); total > can {
			t.Errorf("the three environments reserve %d executions together; an account with a quota of %d can reserve %d", total, quota, can)
		}
		shared := map[job.Env]stack.Config{}
		for env, cfg := range cfgs {
			cfg.Account, cfg.AccountConcurrency = "123456789012", quota
			shared[env] = cfg
		}
		if err := stack.CheckAccounts(shared); err != nil {
			t.Errorf("in one account of quota %d: %v", quota, err)
		}
	}
}

func TestReservable(t *testing.T) {
	t.Parallel()
	for quota, want := range map[int]int{1000: 900, 10: 0, 100: 0, 150: 50} {
		if got := stack.Reservable(quota); got != want {
			t.Errorf("Reservable(%d) = %d, want %d", quota, got, want)
		}
	}
}

// Reservations that fit one environment's account but not two sharing
// it are refused, naming the environments; separate accounts are judged
// apart.
func TestCheckAccounts(t *testing.T) {
	t.Parallel()
	base, err := stack.ParseConfig(job.Staging, configFile(t, job.Staging))
	if err != nil {
		t.Fatal(err)
	}
	withPublisher := func(env job.Env, account string) stack.Config {
		cfg := base
		cfg.ExternalAPI.Live = true
		cfg.Account = account
		cfg.ReservedConcurrency = map[string]int{resources.FuncPublisher: 600}
		if err := cfg.Validate(env); err != nil {
			t.Fatalf("%s: %v", env, err)
		}
		return cfg
	}
	err = stack.CheckAccounts(map[job.Env]stack.Config{
		job.Staging: withPublisher(job.Staging, ""), job.ProdRU: withPublisher(job.ProdRU, ""),
	})
	if err == nil || !strings.Contains(err.Error(), "[staging prod-ru]") || !strings.Contains(err.Error(), "reserve 1200") ||
		!strings.Contains(err.Error(), "can reserve 900") {
		t.Errorf("two environments reserving 600 each in one account: %v, want a refusal naming both and the figures", err)
	}
	if err := stack.CheckAccounts(map[job.Env]stack.Config{
		job.Staging: withPublisher(job.Staging, "111111111111"), job.ProdRU: withPublisher(job.ProdRU, "222222222222"),
	}); err != nil {
		t.Errorf("two accounts: %v", err)
	}
}

// Every wrong setting gets a message naming the field and what is wanted,
// all of them in one error, never a panic.
func TestConfigErrors(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name string
		env  job.Env
		json string
		want []string
	}{
		{"unknown field", job.Staging, `{"allowedOrigin": []}`, []string{`unknown field "allowedOrigin"`}},
		{"not JSON", job.Staging, `{`, []string{"not a valid configuration"}},
		{"empty", job.ProdRU, `{}`, []string{"externalApi.url: required", "logRetentionDays 0"}},
		{"placeholder origin", job.ProdEN, `{"allowedOrigins":["https://conveyor.example.com"],"externalApi":{"url":"https://www.deviantart.com"},"logRetentionDays":30}`,
			[]string{`allowedOrigins[0] "https://conveyor.example.com": a placeholder domain`}},
		{"origin with a path", job.Staging, `{"allowedOrigins":["https://app.conveyor.dev/"],"externalApi":{"url":"https://api.sandbox.dev","live":false},"logRetentionDays":30}`,
			[]string{"an origin has no path"}},
		{"wildcard origin", job.Staging, `{"allowedOrigins":["*"],"externalApi":{"url":"https://api.sandbox.dev"},"logRetentionDays":30}`,
			[]string{`allowedOrigins[0] "*"`}},
		{"loopback in production", job.ProdRU, `{"allowedOrigins":["http://localhost:5173"],"externalApi":{"url":"https://www.deviantart.com"},"logRetentionDays":30}`,
			[]string{"a loopback origin in production"}},
		{"live API from staging", job.Staging, `{"externalApi":{"url":"https://www.deviantart.com"},"logRetentionDays":30}`,
			[]string{"is the live API", "externalApi.live"}},
		{"http API", job.ProdRU, `{"externalApi":{"url":"http://www.deviantart.com"},"logRetentionDays":30}`,
			[]string{"want an absolute https:// URL"}},
		{"placeholder subscriber", job.ProdRU, `{"externalApi":{"url":"https://www.deviantart.com"},"logRetentionDays":30,"alarms":{"subscribers":["ops@example.com"]}}`,
			[]string{`alarms.subscribers[0] "ops@example.com": a placeholder domain`}},
		{"subscribers and topic", job.ProdRU, `{"externalApi":{"url":"https://www.deviantart.com"},"logRetentionDays":30,"alarms":{"subscribers":["ops@conveyor.dev"],"topicArn":"` + alarmTopicARN + `"}}`,
			[]string{"not both"}},
		{"bad topic", job.ProdRU, `{"externalApi":{"url":"https://www.deviantart.com"},"logRetentionDays":30,"alarms":{"topicArn":"ops-alarms"}}`,
			[]string{`alarms.topicArn "ops-alarms"`}},
		{"retention", job.ProdRU, `{"externalApi":{"url":"https://www.deviantart.com"},"logRetentionDays":31}`,
			[]string{"logRetentionDays 31: want one of CloudWatch Logs' periods"}},
		{"sampling", job.ProdRU, `{"externalApi":{"url":"https://www.deviantart.com"},"logRetentionDays":30,"tracing":{"enabled":true,"samplingRate":0.05}}`,
			[]string{"tracing.samplingRate: remove it: Lambda's active tracing samples at its own fixed rate"}},
		{"otlp endpoint", job.ProdRU, `{"externalApi":{"url":"https://www.deviantart.com"},"logRetentionDays":30,"tracing":{"otlpEndpoint":"http://collector.internal:4318"}}`,
			[]string{`tracing.otlpEndpoint "http://collector.internal:4318": http only to a collector on the loopback host`}},
		{"loopback collector without a layer", job.ProdRU, `{"externalApi":{"url":"https://www.deviantart.com"},"logRetentionDays":30,"tracing":{"otlpEndpoint":"http://localhost:4318"}}`,
			[]string{"a loopback collector needs tracing.collectorLayer"}},
		{"sample ratio", job.ProdRU, `{"externalApi":{"url":"https://www.deviantart.com"},"logRetentionDays":30,"tracing":{"otlpEndpoint":"https://otlp.conveyor.dev","sampleRatio":5}}`,
			[]string{"tracing.sampleRatio 5: want 0 to 1"}},
		{"ratio without endpoint", job.ProdRU, `{"externalApi":{"url":"https://www.deviantart.com"},"logRetentionDays":30,"tracing":{"sampleRatio":0.5}}`,
			[]string{"need tracing.otlpEndpoint"}},
		{"layer in another region", job.ProdRU, `{"externalApi":{"url":"https://www.deviantart.com"},"logRetentionDays":30,"account":"123456789012","region":"eu-central-1","tracing":{"otlpEndpoint":"http://localhost:4318","collectorLayer":"` + collectorLayer + `"}}`,
			[]string{"in eu-west-1, the stack is in eu-central-1"}},
		{"system log level", job.ProdRU, `{"externalApi":{"url":"https://www.deviantart.com"},"logRetentionDays":30,"systemLogLevel":"warn"}`,
			[]string{`systemLogLevel "warn": want one of [WARN INFO DEBUG]`}},
		{"reservations", job.ProdRU, `{"externalApi":{"url":"https://www.deviantart.com"},"logRetentionDays":30,"reservedConcurrency":{"apii":5,"stream":0,"publisher":100,"system":900}}`,
			[]string{"reservedConcurrency.apii: no such function", "reservedConcurrency.stream = 0", "reservedConcurrency.publisher = 100: below the 525",
				"1005 executions reserved; an account with a quota of 1000 can reserve 900"}},
		{"new account", job.ProdRU, `{"externalApi":{"url":"https://www.deviantart.com"},"logRetentionDays":30,"accountConcurrency":10,"reservedConcurrency":{"api":2}}`,
			[]string{"a quota of 10 can reserve 0"}},
		{"oidc without audience", job.ProdRU, `{"externalApi":{"url":"https://www.deviantart.com"},"logRetentionDays":30,"oidc":{"issuer":"https://login.conveyor.dev/"}}`,
			[]string{"oidc.audience: required"}},
		{"fairness", job.ProdRU, `{"externalApi":{"url":"https://www.deviantart.com"},"logRetentionDays":30,"fairness":{"plans":{"gold":3,"free":-1},"owners":{"a,b":2,"u-1":5000}}}`,
			[]string{"fairness.plans.gold: no such plan", "fairness.plans.free -1", `fairness.owners "a,b"`, "fairness.owners.u-1 5000"}},
		{"quotas", job.ProdRU, `{"externalApi":{"url":"https://www.deviantart.com"},"logRetentionDays":30,"quotas":{"plans":{"gold":{"activeJobs":3},"free":{"activeJobs":0}},"owners":{"a/b":{"activeJobs":2},"u-1":{"activeJobs":20000000}}}}`,
			[]string{"quotas.plans.gold: no such plan", "quotas.plans.free.activeJobs 0", `quotas.owners "a/b"`, "quotas.owners.u-1.activeJobs 20000000"}},
		{"rates", job.ProdRU, `{"externalApi":{"url":"https://www.deviantart.com"},"logRetentionDays":30,"rates":{"plans":{"gold":{"perSecond":3,"burst":9},"free":{"perSecond":0,"burst":10}},"owners":{"a/b":{"perSecond":2,"burst":2},"u-1":{"perSecond":5,"burst":200000}}}}`,
			[]string{"rates.plans.gold: no such plan", "rates.plans.free 0/10", `rates.owners "a/b"`, "rates.owners.u-1 5/200000"}},
		{"bus events", job.ProdRU, `{"externalApi":{"url":"https://www.deviantart.com"},"logRetentionDays":30,"busEvents":"progress"}`,
			[]string{`busEvents "progress": want "all"`, `or "lifecycle"`}},
		{"bus events case", job.Staging, `{"externalApi":{"url":"https://sandbox.conveyor.dev"},"logRetentionDays":30,"busEvents":"Lifecycle"}`,
			[]string{`busEvents "Lifecycle"`}},
		{"region alone", job.ProdRU, `{"externalApi":{"url":"https://www.deviantart.com"},"logRetentionDays":30,"region":"eu-central-1"}`,
			[]string{"without account"}},
		{"bad region", job.ProdRU, `{"externalApi":{"url":"https://www.deviantart.com"},"logRetentionDays":30,"account":"123456789012","region":"Frankfurt"}`,
			[]string{`region "Frankfurt"`}},
		{"oidc claims without issuer", job.ProdRU, `{"externalApi":{"url":"https://www.deviantart.com"},"logRetentionDays":30,"oidc":{"roleClaim":"role"}}`,
			[]string{"need oidc.issuer"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			_, err := stack.ParseConfig(c.env, []byte(c.json))
			if err == nil {
				t.Fatalf("accepted %s", c.json)
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
		})
	}
	dir := t.TempDir()
	if _, err := stack.LoadConfig(dir, job.Staging); err == nil || !strings.Contains(err.Error(), filepath.Join(dir, "staging.json")) ||
		!strings.Contains(err.Error(), "docs/deploy.md") {
		t.Errorf("missing file: %v, want its path and where to read", err)
	}
}

func TestConfiguredStagingIsValid(t *testing.T) {
	t.Parallel()
	if err := configuredStaging.Validate(job.Staging); err != nil {
		t.Fatal(err)
	}
	both := configuredStaging
	both.Alarms.TopicARN = alarmTopicARN
	if err := both.Validate(job.Staging); err == nil {
		t.Error("subscribers and a topic were both accepted")
	}
}

// The app itself stops on a bad configuration with the file, the field
// and the remedy on stderr, exit status 1, and no Go panic or stack trace,
// before it synthesizes anything. It builds the app (slow on a cold cache):
// skipped with -short.
func TestAppRefusesABadConfigurationClearly(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds the CDK app")
	}
	dir := t.TempDir()
	for _, env := range job.CloudEnvs {
		b := configFile(t, env)
		if env == job.ProdRU {
			b = []byte(strings.Replace(string(b), `"allowedOrigins": []`, `"allowedOrigins": ["https://conveyor.example.ru"]`, 1))
		}
		if err := os.WriteFile(stack.ConfigPath(dir, env), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	bin := filepath.Join(t.TempDir(), "infra")
	if out, err := exec.Command("go", "build", "-o", bin, "..").CombinedOutput(); err != nil {
		t.Fatalf("building the app: %v\n%s", err, out)
	}
	cmd := exec.Command(bin)
	cmd.Env = append(os.Environ(), "CONVEYOR_CONFIG_DIR="+dir, "CONVEYOR_FUNCTIONS_DIR="+functionsDir)
	out, err := cmd.CombinedOutput()
	if exit, ok := err.(*exec.ExitError); !ok || exit.ExitCode() != 1 {
		t.Fatalf("the app with a placeholder origin: %v, want exit status 1\n%s", err, out)
	}
	msg := string(out)
	for _, want := range []string{"infra: ", stack.ConfigPath(dir, job.ProdRU), "invalid prod-ru configuration", `allowedOrigins[0] "https://conveyor.example.ru": a placeholder domain`} {
		if !strings.Contains(msg, want) {
			t.Errorf("stderr lacks %q:\n%s", want, msg)
		}
	}
	for _, trace := range []string{"panic", "goroutine ", ".go:", "jsii"} {
		if strings.Contains(msg, trace) {
			t.Errorf("stderr has %q, a stack trace rather than a message:\n%s", trace, msg)
		}
	}
}
