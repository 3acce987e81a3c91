package stack

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/mail"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/aws/aws-cdk-go/awscdk/v2/awslogs"

	"github.com/conveyor/conveyor/internal/config"
	"github.com/conveyor/conveyor/internal/job"
	"github.com/conveyor/conveyor/internal/resources"
)

// ConfigDirDefault is where the per-environment configuration files live,
// relative to infra/ (where the CDK CLI runs the app): infra/env/<env>.json.
const ConfigDirDefault = "env"

// The OIDC variables the HTTP-serving functions read (httpapi.OIDCConfig).
// The stack sets each one only when the environment's configuration does.
const (
	VarOIDCIssuer    = config.VarOIDCIssuer
	VarOIDCAudience  = config.VarOIDCAudience
	VarOIDCRoleClaim = config.VarOIDCRoleClaim
	VarOIDCPlanClaim = config.VarOIDCPlanClaim
)

// LiveExternalAPIHost is the external API's production host. A
// non-production environment may call it only when its configuration says
// so (externalApi.live), so staging never talks to the live API by accident.
const LiveExternalAPIHost = "www.deviantart.com"

// Account concurrency: a default account's regional quota, and what AWS
// keeps unreserved (every reservation comes out of the rest). A new account
// may start with a quota of 10, and then nothing can be reserved.
const (
	AccountConcurrencyDefault = resources.AccountConcurrencyDefault
	UnreservedConcurrencyMin  = resources.UnreservedConcurrencyMin
	AccountConcurrencyNew     = 10
)

// Reservable is how many executions an account whose concurrency quota is
// quota can reserve for its functions: AWS keeps UnreservedConcurrencyMin
// unreserved (all of a quota below it).
func Reservable(quota int) int { return quota - min(quota, UnreservedConcurrencyMin) }

// Config is one environment's deploy-time settings: what differs between
// deployments of the same code. It is read from infra/env/<env>.json
// (LoadConfig), every field checked (Validate) before any construct exists.
type Config struct {
	// AllowedOrigins are the browser origins (scheme://host[:port]) that
	// may call the HTTP API, PUT to presigned upload URLs and open the
	// event stream. The dashboard's own origin (the HTTP API's) is always
	// allowed on the stream. Empty: no other browser origin.
	AllowedOrigins []string `json:"allowedOrigins"`
	// ExternalAPI is the publishing API the publisher calls.
	ExternalAPI ExternalAPI `json:"externalApi"`
	// Alarms says who hears the alarms.
	Alarms Alarms `json:"alarms"`
	// ReservedConcurrency reserves executions per function (by the
	// definition's function name). Unset functions reserve nothing: they
	// share the account's unreserved pool (the tier mappings' maximum
	// concurrency still bounds the queue consumers).
	ReservedConcurrency map[string]int `json:"reservedConcurrency,omitempty"`
	// Account is the 12-digit account the environment deploys to.
	// Environments whose Account is the same (or all left empty) are
	// checked together: their reservations must fit one account.
	// When set, the stack is bound to it (and to Region, when set): `cdk
	// deploy` with credentials of another account, or into another
	// region, refuses before it changes anything.
	Account string `json:"account,omitempty"`
	// Region is the region the environment deploys to (with Account);
	// empty: the deploying credentials' region.
	Region string `json:"region,omitempty"`
	// AccountConcurrency is that account's regional concurrency quota
	// (default AccountConcurrencyDefault).
	AccountConcurrency int `json:"accountConcurrency,omitempty"`
	// LogRetentionDays keeps the functions' and the API's logs this long
	// (one of CloudWatch Logs' retention periods).
	LogRetentionDays int `json:"logRetentionDays"`
	// Tracing turns Lambda's active X-Ray tracing on for every function.
	Tracing Tracing `json:"tracing"`
	// SystemLogLevel is the level of the log lines Lambda itself writes
	// to the functions' log groups (the functions log JSON; Lambda's own
	// lines are JSON too): WARN, the default, drops the start and report
	// lines of every invocation that succeeds; INFO keeps them (each
	// invocation's duration, memory and cold start); DEBUG adds the rest.
	SystemLogLevel string `json:"systemLogLevel,omitempty"`
	// TableDeletionProtection turns on DynamoDB deletion protection. Leave
	// it off for the first deploy of an environment: a protected table
	// survives the rollback of a failed create, and the retried create then
	// fails on its name.
	TableDeletionProtection bool `json:"tableDeletionProtection"`
	// OIDC lets the HTTP-serving functions accept an identity provider's
	// tokens. Empty issuer: off.
	OIDC OIDC `json:"oidc"`
	// Fairness sets how many jobs of one owner are in flight at once per
	// tier (docs/fairness.md). Unset: the functions' defaults.
	Fairness Fairness `json:"fairness,omitempty"`
	// Rates sets each owner's request rate on the api function's routes
	// (docs/limits.md). Unset: the functions' defaults.
	Rates Rates `json:"rates,omitempty"`
	// Quotas sets each owner's quotas (active jobs) by plan and for named
	// owners (docs/limits.md#quotas). Unset: the functions' defaults.
	Quotas Quotas `json:"quotas,omitempty"`
	// BusEvents is which job events the relay puts on the event bus:
	// "lifecycle" keeps job.progress and job.phase.completed in the table,
	// the event log and SSE only; "all" puts every event (docs/events.md).
	// It becomes the relay function's CONVEYOR_BUS_EVENTS. Unset: the
	// functions' default (lifecycle).
	BusEvents string `json:"busEvents,omitempty"`
	// Adopt names an existing table and token key the stack uses instead
	// of creating its own: a restore's (adopt.go). Unset: it creates both.
	Adopt Adopt `json:"adopt,omitempty"`
}

// Bus is the BusEvents the relay function gets: the configured one, or
// the functions' default.
func (cfg Config) Bus() job.BusEvents {
	if cfg.BusEvents == "" {
		return job.BusEvents(config.Lookup(config.VarBusEvents).Default.(string))
	}
	return job.BusEvents(cfg.BusEvents)
}

// Fairness is the owners' slots: by plan, and for named owners over their
// plan's. Each becomes the functions' CONVEYOR_FAIR_SLOTS and
// CONVEYOR_OWNER_SLOTS.
type Fairness struct {
	// Plans overrides the default slots of the plans named (free,
	// standard, pro, corporate, enterprise); 0: a group per job, no cap.
	Plans map[string]int `json:"plans,omitempty"`
	// Owners gives named owners (user ids) slots of their own.
	Owners map[string]int `json:"owners,omitempty"`
}

// env is the functions' environment for f: only what it sets.
func (f Fairness) env() map[string]string {
	env := map[string]string{}
	if len(f.Plans) > 0 {
		slots, _ := config.ParseSlots(config.FairSlotsDefault)
		maps.Copy(slots, f.Plans)
		env[config.VarFairSlots] = config.FormatSlots(slots)
	}
	if len(f.Owners) > 0 {
		env[config.VarOwnerSlots] = config.FormatSlots(f.Owners)
	}
	return env
}

// check reports the settings of f the functions would refuse.
func (f Fairness) check() []string {
	var bad []string
	plans, _ := config.ParseSlots(config.FairSlotsDefault)
	for _, p := range sortedKeys(f.Plans) {
		if _, ok := plans[p]; !ok {
			bad = append(bad, fmt.Sprintf("fairness.plans.%s: no such plan (want one of %v)", p, sortedKeys(plans)))
		}
		if n := f.Plans[p]; n < 0 || n > 1000 {
			bad = append(bad, fmt.Sprintf("fairness.plans.%s %d: want 0 to 1000 slots", p, n))
		}
	}
	for _, o := range sortedKeys(f.Owners) {
		if strings.TrimSpace(o) == "" || strings.ContainsAny(o, ",= \t") {
			bad = append(bad, fmt.Sprintf("fairness.owners %q: want a user id (no comma, equals sign or space)", o))
		}
		if n := f.Owners[o]; n < 0 || n > 1000 {
			bad = append(bad, fmt.Sprintf("fairness.owners.%s %d: want 0 to 1000 slots", o, n))
		}
	}
	return bad
}

// Rates is the owners' request rates on the API: by plan, and for named
// owners over their plan's, each a sustained rate a second and a burst.
// They become the api function's CONVEYOR_RATE_LIMITS (the defaults with
// the configured plans over them) and CONVEYOR_OWNER_RATE_LIMITS.
type Rates struct {
	// Plans overrides the default rates of the plans named (free,
	// standard, pro, corporate, enterprise).
	Plans map[string]Rate `json:"plans,omitempty"`
	// Owners gives named owners (user ids) rates of their own.
	Owners map[string]Rate `json:"owners,omitempty"`
}

// Rate is one rate: PerSecond requests a second sustained, Burst at once.
type Rate struct {
	PerSecond int `json:"perSecond"`
	Burst     int `json:"burst"`
}

func (r Rate) config() config.Rate { return config.Rate{PerSecond: r.PerSecond, Burst: r.Burst} }

// env is the api function's environment for r: only what it sets.
func (r Rates) env() map[string]string {
	env := map[string]string{}
	if len(r.Plans) > 0 {
		rates, _ := config.ParseRates(config.RateLimitsDefault)
		for p, v := range r.Plans {
			rates[p] = v.config()
		}
		env[config.VarRateLimits] = config.FormatRates(rates)
	}
	if len(r.Owners) > 0 {
		owners := map[string]config.Rate{}
		for o, v := range r.Owners {
			owners[o] = v.config()
		}
		env[config.VarOwnerRateLimits] = config.FormatRates(owners)
	}
	return env
}

// check reports the settings of r the api function would refuse.
func (r Rates) check() []string {
	var bad []string
	plans, _ := config.ParseRates(config.RateLimitsDefault)
	checkRate := func(where string, v Rate) {
		if v.PerSecond < 1 || v.PerSecond > config.RateMaxPerSecond || v.Burst < 1 || v.Burst > config.RateMaxBurst {
			bad = append(bad, fmt.Sprintf("%s %d/%d: want 1 to %d a second and a burst of 1 to %d", where, v.PerSecond, v.Burst, config.RateMaxPerSecond, config.RateMaxBurst))
		}
	}
	for _, p := range sortedKeys(r.Plans) {
		if _, ok := plans[p]; !ok {
			bad = append(bad, fmt.Sprintf("rates.plans.%s: no such plan (want one of %v)", p, sortedKeys(plans)))
		}
		checkRate("rates.plans."+p, r.Plans[p])
	}
	for _, o := range sortedKeys(r.Owners) {
		if strings.TrimSpace(o) == "" || strings.ContainsAny(o, ",= \t/") {
			bad = append(bad, fmt.Sprintf("rates.owners %q: want a user id (no comma, equals sign, slash or space)", o))
		}
		checkRate("rates.owners."+o, r.Owners[o])
	}
	return bad
}

// Quotas is the owners' quotas: by plan, and for named owners over their
// plan's. They become every function's CONVEYOR_ACTIVE_JOB_QUOTAS (the
// defaults with the configured plans over them) and
// CONVEYOR_OWNER_ACTIVE_JOB_QUOTAS: every function that writes a job
// counts it with the same quotas.
type Quotas struct {
	// Plans overrides the default quotas of the plans named (free,
	// standard, pro, corporate, enterprise).
	Plans map[string]Quota `json:"plans,omitempty"`
	// Owners gives named owners (user ids) quotas of their own.
	Owners map[string]Quota `json:"owners,omitempty"`
}

// Quota is one plan's or owner's quotas.
type Quota struct {
	// ActiveJobs is the most jobs scheduled, queued or running at once.
	ActiveJobs int `json:"activeJobs"`
}

// env is the functions' environment for q: only what it sets.
func (q Quotas) env() map[string]string {
	env := map[string]string{}
	if len(q.Plans) > 0 {
		plans, _ := config.ParseQuotas(config.ActiveJobQuotasDefault)
		for p, v := range q.Plans {
			plans[p] = v.ActiveJobs
		}
		env[config.VarActiveJobQuotas] = config.FormatQuotas(plans)
	}
	if len(q.Owners) > 0 {
		owners := map[string]int{}
		for o, v := range q.Owners {
			owners[o] = v.ActiveJobs
		}
		env[config.VarOwnerActiveJobQuotas] = config.FormatQuotas(owners)
	}
	return env
}

// check reports the settings of q the functions would refuse.
func (q Quotas) check() []string {
	var bad []string
	plans, _ := config.ParseQuotas(config.ActiveJobQuotasDefault)
	checkQuota := func(where string, v Quota) {
		if v.ActiveJobs < 1 || v.ActiveJobs > config.QuotaMax {
			bad = append(bad, fmt.Sprintf("%s.activeJobs %d: want 1 to %d", where, v.ActiveJobs, config.QuotaMax))
		}
	}
	for _, p := range sortedKeys(q.Plans) {
		if _, ok := plans[p]; !ok {
			bad = append(bad, fmt.Sprintf("quotas.plans.%s: no such plan (want one of %v)", p, sortedKeys(plans)))
		}
		checkQuota("quotas.plans."+p, q.Plans[p])
	}
	for _, o := range sortedKeys(q.Owners) {
		if strings.TrimSpace(o) == "" || strings.ContainsAny(o, ",= \t/") {
			bad = append(bad, fmt.Sprintf("quotas.owners %q: want a user id (no comma, equals sign, slash or space)", o))
		}
		checkQuota("quotas.owners."+o, q.Owners[o])
	}
	return bad
}

// ExternalAPI is the publishing API's base URL.
type ExternalAPI struct {
	// URL is the base URL (https://host[/path]).
	URL string `json:"url"`
	// Live must be true for a non-production environment to call the live
	// API (LiveExternalAPIHost): a deliberate choice, never a default.
	Live bool `json:"live,omitempty"`
}

// Alarms is where the alarm notifications go: subscribers of the stack's
// own topic, or an existing topic.
type Alarms struct {
	// Subscribers are e-mail addresses (SNS mails each a confirmation
	// link) and https:// endpoints subscribed to the stack's alarm topic.
	Subscribers []string `json:"subscribers,omitempty"`
	// TopicARN is an existing SNS topic the alarms notify instead of a
	// topic of the stack's own (its policy must let CloudWatch publish).
	TopicARN string `json:"topicArn,omitempty"`
	// AccountConcurrencyPercent is the share of the account's concurrency
	// quota (AccountConcurrency) in use that raises the account-concurrency
	// alarm, 1 to 100 (default AccountConcurrencyPercentDefault).
	AccountConcurrencyPercent int `json:"accountConcurrencyPercent,omitempty"`
}

// Tracing configures X-Ray.
type Tracing struct {
	// Enabled sets Lambda's active tracing on every function: Lambda then
	// traces the invocations its caller sampled and samples those that
	// come without a trace header itself, at its own fixed rate (one a
	// second and 5 % of the rest; Lambda applies no X-Ray sampling rule).
	// Off: Lambda's default, PassThrough — an invocation is traced only
	// when its caller sampled it, and none of the functions' triggers
	// does (the HTTP API, S3, the table's stream, Scheduler; an SQS
	// message carries at most its untraced sender's unsampled header).
	Enabled bool `json:"enabled"`
	// SamplingRate is refused (Validate): Lambda's active tracing has no
	// configurable rate.
	SamplingRate *float64 `json:"samplingRate,omitempty"`
	// OTLPEndpoint, when set, is the OpenTelemetry collector every
	// function sends its spans to over OTLP/HTTP (CONVEYOR_OTLP_ENDPOINT):
	// one trace per job, from the API request through the queue message
	// to the worker's run and its external calls. An https collector, or
	// http://localhost:4318 with CollectorLayer (a collector in the
	// function's own sandbox, such as the ADOT collector layer). Empty:
	// the functions record no span.
	OTLPEndpoint string `json:"otlpEndpoint,omitempty"`
	// SampleRatio is the share of new traces the functions record
	// (CONVEYOR_TRACE_SAMPLE_RATIO, default 1); a caller's sampled flag
	// decides for the traces it starts. Needs OTLPEndpoint.
	SampleRatio *float64 `json:"sampleRatio,omitempty"`
	// CollectorLayer is a Lambda layer version ARN added to every
	// function: the collector a loopback OTLPEndpoint names, in the
	// stack's region and for arm64.
	CollectorLayer string `json:"collectorLayer,omitempty"`
}

// env is the functions' tracing variables; none without an endpoint.
func (t Tracing) env() map[string]string {
	if t.OTLPEndpoint == "" {
		return nil
	}
	env := map[string]string{config.VarOTLPEndpoint: t.OTLPEndpoint}
	if t.SampleRatio != nil {
		env[config.VarTraceSampleRatio] = strconv.FormatFloat(*t.SampleRatio, 'g', -1, 64)
	}
	return env
}

// check reports what is wrong with the OTLP settings: an endpoint the
// functions accept (https, or http on the loopback host, which only a
// collector layer serves), a ratio from 0 to 1 with an endpoint, and a
// layer ARN in the stack's region.
func (t Tracing) check(region string) (bad []string) {
	if e := t.OTLPEndpoint; e != "" {
		u, err := url.Parse(e)
		switch {
		case err != nil || u.Host == "" || (u.Scheme != "https" && u.Scheme != "http"):
			bad = append(bad, fmt.Sprintf("tracing.otlpEndpoint %q: want an absolute https:// URL, or http://localhost:4318 with tracing.collectorLayer", e))
		case u.Scheme == "http" && u.Hostname() != "localhost" && u.Hostname() != "127.0.0.1":
			bad = append(bad, fmt.Sprintf("tracing.otlpEndpoint %q: http only to a collector on the loopback host (tracing.collectorLayer); spans leave the function over https", e))
		case u.Scheme == "http" && t.CollectorLayer == "":
			bad = append(bad, fmt.Sprintf("tracing.otlpEndpoint %q: a loopback collector needs tracing.collectorLayer (nothing listens in a function's sandbox without one)", e))
		}
	} else if t.SampleRatio != nil || t.CollectorLayer != "" {
		bad = append(bad, "tracing: sampleRatio and collectorLayer need tracing.otlpEndpoint")
	}
	if r := t.SampleRatio; r != nil && (*r < 0 || *r > 1) {
		bad = append(bad, fmt.Sprintf("tracing.sampleRatio %g: want 0 to 1", *r))
	}
	if l := t.CollectorLayer; l != "" {
		m := layerARN.FindStringSubmatch(l)
		if m == nil {
			bad = append(bad, fmt.Sprintf("tracing.collectorLayer %q: want a layer version ARN (arn:aws:lambda:<region>:<account>:layer:<name>:<version>)", l))
		} else if region != "" && m[1] != region {
			bad = append(bad, fmt.Sprintf("tracing.collectorLayer %q: in %s, the stack is in %s (a function takes layers of its own region)", l, m[1], region))
		}
	}
	return bad
}

// SystemLogLevels are the accepted SystemLogLevel values.
var SystemLogLevels = []string{"WARN", "INFO", "DEBUG"}

// SystemLogLevelDefault is the SystemLogLevel of a configuration that
// sets none.
const SystemLogLevelDefault = "WARN"

// SystemLevel is the configured SystemLogLevel, or its default.
func (cfg Config) SystemLevel() string {
	if cfg.SystemLogLevel == "" {
		return SystemLogLevelDefault
	}
	return cfg.SystemLogLevel
}

// OIDC is the identity provider whose tokens the API accepts beside the
// HS256 service tokens.
type OIDC struct {
	// Issuer is the provider's issuer URL (iss); empty: OIDC off.
	Issuer string `json:"issuer,omitempty"`
	// Audience is the aud the tokens must carry.
	Audience string `json:"audience,omitempty"`
	// RoleClaim and PlanClaim name the claims carrying the role and the
	// plan (empty: the functions' defaults).
	RoleClaim string `json:"roleClaim,omitempty"`
	PlanClaim string `json:"planClaim,omitempty"`
}

// ConfigPath is env's configuration file under dir.
func ConfigPath(dir string, env job.Env) string { return filepath.Join(dir, string(env)+".json") }

// LoadConfig reads and validates env's configuration from dir. The error
// names the file and every field that is wrong.
func LoadConfig(dir string, env job.Env) (Config, error) {
	path := ConfigPath(dir, env)
	b, err := os.ReadFile(path)
	if err != nil {
		return Config{}, fmt.Errorf("%s: %w (every cloud environment needs its configuration file; see docs/deploy.md)", path, err)
	}
	cfg, err := ParseConfig(env, b)
	if err != nil {
		return Config{}, fmt.Errorf("%s: %w", path, err)
	}
	return cfg, nil
}

// LoadConfigs loads every cloud environment's configuration from dir and
// checks them together (CheckAccounts). The error names every file and
// field that is wrong.
func LoadConfigs(dir string) (map[job.Env]Config, error) {
	out := map[job.Env]Config{}
	var errs []error
	for _, env := range job.CloudEnvs {
		cfg, err := LoadConfig(dir, env)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		out[env] = cfg
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	if err := CheckAccounts(out); err != nil {
		return nil, err
	}
	return out, nil
}

// ParseConfig decodes a configuration file's content (unknown fields are
// refused: a misspelt setting would otherwise be silently ignored) and
// validates it for env.
func ParseConfig(env job.Env, data []byte) (Config, error) {
	var cfg Config
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&cfg); err != nil {
		return Config{}, fmt.Errorf("not a valid configuration: %w", err)
	}
	if dec.More() {
		return Config{}, fmt.Errorf("not a valid configuration: more than one JSON value")
	}
	if err := cfg.Validate(env); err != nil {
		return Config{}, err
	}
	return cfg, nil
}

// Validate reports every setting of cfg that env cannot deploy with, in one
// error, one line per setting.
func (cfg Config) Validate(env job.Env) error {
	var bad []string
	fail := func(format string, a ...any) { bad = append(bad, fmt.Sprintf(format, a...)) }
	bad = append(bad, cfg.checkOrigins(env)...)
	bad = append(bad, cfg.checkExternalAPI(env)...)
	bad = append(bad, cfg.checkAlarms()...)
	if cfg.Account != "" && !accountID.MatchString(cfg.Account) {
		fail("account %q: want a 12-digit AWS account id", cfg.Account)
	}
	if cfg.Region != "" && !regionName.MatchString(cfg.Region) {
		fail("region %q: want an AWS region name (eu-central-1)", cfg.Region)
	}
	if cfg.Region != "" && cfg.Account == "" {
		fail("region %q without account: name the account it deploys to too", cfg.Region)
	}
	if cfg.AccountConcurrency < 0 {
		fail("accountConcurrency %d: want the account's concurrency quota (default %d)", cfg.AccountConcurrency, AccountConcurrencyDefault)
	}
	bad = append(bad, cfg.checkReservations(env)...)

	if _, ok := retentionDays[cfg.LogRetentionDays]; !ok {
		fail("logRetentionDays %d: want one of CloudWatch Logs' periods: %v", cfg.LogRetentionDays, retentionDayList())
	}
	if cfg.Tracing.SamplingRate != nil {
		fail("tracing.samplingRate: remove it: Lambda's active tracing samples at its own fixed rate (one invocation a second and 5 %% of the rest) and applies no X-Ray sampling rule")
	}
	if l := cfg.SystemLogLevel; l != "" && !slices.Contains(SystemLogLevels, l) {
		fail("systemLogLevel %q: want one of %v", l, SystemLogLevels)
	}
	bad = append(bad, cfg.checkOIDC()...)
	bad = append(bad, cfg.Tracing.check(cfg.Region)...)
	bad = append(bad, cfg.Fairness.check()...)
	bad = append(bad, cfg.Rates.check()...)
	bad = append(bad, cfg.Quotas.check()...)
	bad = append(bad, cfg.Adopt.check(cfg.Account, cfg.Region)...)
	if cfg.BusEvents != "" {
		if _, err := job.ParseBusEvents(cfg.BusEvents); err != nil {
			fail("busEvents %v", err)
		}
	}

	if len(bad) > 0 {
		return fmt.Errorf("invalid %s configuration:\n  %s", env, strings.Join(bad, "\n  "))
	}
	return nil
}

// checkOrigins reports what is wrong with the allowed origins: each must be
// an origin env may serve, listed once, and they must fit a function URL's
// CORS beside the dashboard's.
func (cfg Config) checkOrigins(env job.Env) (bad []string) {
	seen := map[string]bool{}
	for i, o := range cfg.AllowedOrigins {
		if err := checkOrigin(o, env); err != nil {
			bad = append(bad, fmt.Sprintf("allowedOrigins[%d] %q: %v", i, o, err))
		}
		if seen[o] {
			bad = append(bad, fmt.Sprintf("allowedOrigins[%d] %q: listed twice", i, o))
		}
		seen[o] = true
	}
	if n := len(cfg.AllowedOrigins); n > maxOrigins {
		bad = append(bad, fmt.Sprintf("allowedOrigins: %d origins, at most %d (a function URL's CORS takes 100, one is the dashboard's)", n, maxOrigins))
	}
	return bad
}

// checkExternalAPI reports what is wrong with the external API's URL: it is
// required, https, and the live API only in production or on purpose.
func (cfg Config) checkExternalAPI(env job.Env) []string {
	switch host, err := checkHTTPSURL(cfg.ExternalAPI.URL); {
	case cfg.ExternalAPI.URL == "":
		return []string{fmt.Sprintf("externalApi.url: required (the publishing API's base URL, e.g. https://%s)", LiveExternalAPIHost)}
	case err != nil:
		return []string{fmt.Sprintf("externalApi.url %q: %v", cfg.ExternalAPI.URL, err)}
	case host == LiveExternalAPIHost && !env.Production() && !cfg.ExternalAPI.Live:
		return []string{fmt.Sprintf("externalApi.url %q is the live API: point %s at a sandbox, or set externalApi.live to true to call the live API on purpose", cfg.ExternalAPI.URL, env)}
	}
	return nil
}

// checkAlarms reports what is wrong with where alarms go: subscribers an
// SNS topic can take, or an existing topic's ARN, not both.
func (cfg Config) checkAlarms() (bad []string) {
	for i, s := range cfg.Alarms.Subscribers {
		if err := checkSubscriber(s); err != nil {
			bad = append(bad, fmt.Sprintf("alarms.subscribers[%d] %q: %v", i, s, err))
		}
	}
	if arn := cfg.Alarms.TopicARN; arn != "" {
		if !snsTopicARN.MatchString(arn) {
			bad = append(bad, fmt.Sprintf("alarms.topicArn %q: want an SNS topic ARN (arn:aws:sns:<region>:<account>:<name>)", arn))
		}
		if len(cfg.Alarms.Subscribers) > 0 {
			bad = append(bad, "alarms: give subscribers (to the stack's own topic) or topicArn (an existing topic), not both")
		}
	}
	if p := cfg.Alarms.AccountConcurrencyPercent; p < 0 || p > 100 {
		bad = append(bad, fmt.Sprintf("alarms.accountConcurrencyPercent %d: want 1 to 100 (the share of the account's concurrency quota that raises the alarm; unset: %d)", p, AccountConcurrencyPercentDefault))
	}
	return bad
}

// checkOIDC reports what is wrong with the OpenID Connect issuer: an https
// issuer with an audience, and no claim settings without an issuer.
func (cfg Config) checkOIDC() (bad []string) {
	if o := cfg.OIDC; o.Issuer != "" {
		if _, err := checkHTTPSURL(o.Issuer); err != nil {
			bad = append(bad, fmt.Sprintf("oidc.issuer %q: %v", o.Issuer, err))
		}
		if strings.TrimSpace(o.Audience) == "" {
			bad = append(bad, "oidc.audience: required with oidc.issuer (the aud your provider puts in Conveyor's tokens)")
		}
	} else if o.Audience != "" || o.RoleClaim != "" || o.PlanClaim != "" {
		bad = append(bad, "oidc: audience, roleClaim and planClaim need oidc.issuer")
	}
	return bad
}

// maxOrigins leaves room for the dashboard's own origin in a function URL's
// CORS (at most 100 origins).
const maxOrigins = 99

var (
	layerARN    = regexp.MustCompile(`^arn:aws[a-z-]*:lambda:([a-z0-9-]+):[0-9]{12}:layer:[A-Za-z0-9_-]{1,140}:[0-9]+$`)
	snsTopicARN = regexp.MustCompile(`^arn:aws[a-z-]*:sns:[a-z0-9-]+:[0-9]{12}:[A-Za-z0-9_-]{1,256}(\.fifo)?$`)
	accountID   = regexp.MustCompile(`^[0-9]{12}$`)
	regionName  = regexp.MustCompile(`^[a-z]{2}(-gov|-iso[a-z]*)?-[a-z]+-[0-9]$`)
)

// checkReservations: known functions, at least 1 each, a queue consumer's
// covering its mappings' maximum concurrency (or Lambda throttles its own
// mappings), the relay's covering its stream lanes, and the total within
// what the account can reserve.
func (cfg Config) checkReservations(env job.Env) []string {
	var bad []string
	def := resources.For(env)
	mapped := map[string]int{}
	for _, q := range def.Queues {
		mapped[q.Consumer] += q.MaxConcurrency
	}
	mapped[def.EventStream.Function] = max(mapped[def.EventStream.Function], def.EventStream.ParallelizationFactor)
	for _, fn := range sortedKeys(cfg.ReservedConcurrency) {
		n := cfg.ReservedConcurrency[fn]
		switch {
		case !slices.Contains(def.Functions, fn):
			bad = append(bad, fmt.Sprintf("reservedConcurrency.%s: no such function (want one of %v)", fn, def.Functions))
		case n < 1:
			bad = append(bad, fmt.Sprintf("reservedConcurrency.%s = %d: want at least 1 (0 would stop the function; leave it out for no reservation)", fn, n))
		case n < mapped[fn]:
			bad = append(bad, fmt.Sprintf("reservedConcurrency.%s = %d: below the %d its event source mappings may run at once; reserve at least that, or leave it out", fn, n, mapped[fn]))
		}
	}
	if total, can := cfg.ReservedTotal(), Reservable(cfg.Quota()); total > can {
		bad = append(bad, fmt.Sprintf("reservedConcurrency: %d executions reserved; an account with a quota of %d can reserve %d (AWS keeps %d unreserved)",
			total, cfg.Quota(), can, UnreservedConcurrencyMin))
	}
	return bad
}

// Quota is the account's concurrency quota (AccountConcurrency, default
// AccountConcurrencyDefault).
func (cfg Config) Quota() int {
	if cfg.AccountConcurrency > 0 {
		return cfg.AccountConcurrency
	}
	return AccountConcurrencyDefault
}

// ReservedTotal is the sum of cfg's reservations.
func (cfg Config) ReservedTotal() int {
	total := 0
	for _, n := range cfg.ReservedConcurrency {
		total += n
	}
	return total
}

// CheckAccounts checks that environments deployed to one account (the same
// Account, or all without one) reserve together no more than it can: the
// smallest quota among them, less what AWS keeps unreserved.
func CheckAccounts(cfgs map[job.Env]Config) error {
	groups := map[string][]job.Env{}
	for _, env := range job.CloudEnvs {
		if cfg, ok := cfgs[env]; ok {
			groups[cfg.Account] = append(groups[cfg.Account], env)
		}
	}
	var bad []string
	for _, account := range sortedKeys(groups) {
		envs := groups[account]
		total, quota := 0, 0
		for _, env := range envs {
			total += cfgs[env].ReservedTotal()
			if q := cfgs[env].Quota(); quota == 0 || q < quota {
				quota = q
			}
		}
		if can := Reservable(quota); total > can {
			where := "one account (no account set)"
			if account != "" {
				where = "account " + account
			}
			bad = append(bad, fmt.Sprintf("%v share %s and reserve %d executions together; a quota of %d can reserve %d (AWS keeps %d unreserved)",
				envs, where, total, quota, can, UnreservedConcurrencyMin))
		}
	}
	if len(bad) > 0 {
		return fmt.Errorf("reserved concurrency:\n  %s", strings.Join(bad, "\n  "))
	}
	return nil
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// placeholderDomain reports whether host is a documentation or test name:
// a label "example" anywhere (example.com, conveyor.example.ru,
// staging.conveyor.example: RFC 2606 and its imitations), or the reserved
// .test and .invalid top-level domains (RFC 6761). Such a value is a
// template left unfilled.
func placeholderDomain(host string) bool {
	labels := strings.Split(strings.TrimSuffix(strings.ToLower(host), "."), ".")
	if slices.Contains(labels, "example") {
		return true
	}
	tld := labels[len(labels)-1]
	return tld == "test" || tld == "invalid"
}

// PlaceholderDomain is placeholderDomain, for the tests of templates.
func PlaceholderDomain(host string) bool { return placeholderDomain(host) }

func loopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// checkOrigin: scheme://host[:port] and nothing else; https, or http on a
// loopback host outside production (a developer's dashboard against
// staging); no wildcard, no placeholder.
func checkOrigin(o string, env job.Env) error {
	u, err := url.Parse(o)
	if err != nil || u.Host == "" || u.Opaque != "" {
		return errors.New("want an origin, scheme://host[:port]")
	}
	if u.Path != "" || u.RawQuery != "" || u.Fragment != "" || u.User != nil {
		return errors.New("an origin has no path, query, fragment or user (scheme://host[:port])")
	}
	host := u.Hostname()
	switch {
	case strings.Contains(host, "*"):
		return errors.New("no wildcards: list each origin")
	case placeholderDomain(host):
		return errors.New("a placeholder domain: put the real origin of your frontend")
	case u.Scheme == "https":
		return nil
	case u.Scheme == "http" && loopback(host) && !env.Production():
		return nil
	case u.Scheme == "http" && loopback(host):
		return errors.New("a loopback origin in production")
	default:
		return errors.New("want https:// (http:// only for localhost outside production)")
	}
}

// checkHTTPSURL checks an absolute https URL with a real host and returns
// the host.
func checkHTTPSURL(s string) (string, error) {
	u, err := url.Parse(s)
	if err != nil || u.Scheme != "https" || u.Host == "" || u.User != nil {
		return "", errors.New("want an absolute https:// URL")
	}
	if placeholderDomain(u.Hostname()) {
		return "", errors.New("a placeholder domain: put the real URL")
	}
	return u.Hostname(), nil
}

// checkSubscriber: an e-mail address or an https:// URL, neither on a
// placeholder domain.
func checkSubscriber(s string) error {
	if _, err := ParseAlarmSubscriptions(s); err != nil {
		return errors.New("want an e-mail address (name@domain) or an https:// URL")
	}
	host := ""
	if strings.Contains(s, "://") {
		u, _ := url.Parse(s)
		host = u.Hostname()
	} else if a, err := mail.ParseAddress(s); err == nil {
		host = a.Address[strings.LastIndex(a.Address, "@")+1:]
	}
	if placeholderDomain(host) {
		return errors.New("a placeholder domain: put a real address")
	}
	return nil
}

// retentionDays maps CloudWatch Logs' retention periods to CDK's names.
var retentionDays = map[int]awslogs.RetentionDays{
	1: awslogs.RetentionDays_ONE_DAY, 3: awslogs.RetentionDays_THREE_DAYS, 5: awslogs.RetentionDays_FIVE_DAYS,
	7: awslogs.RetentionDays_ONE_WEEK, 14: awslogs.RetentionDays_TWO_WEEKS, 30: awslogs.RetentionDays_ONE_MONTH,
	60: awslogs.RetentionDays_TWO_MONTHS, 90: awslogs.RetentionDays_THREE_MONTHS, 120: awslogs.RetentionDays_FOUR_MONTHS,
	150: awslogs.RetentionDays_FIVE_MONTHS, 180: awslogs.RetentionDays_SIX_MONTHS, 365: awslogs.RetentionDays_ONE_YEAR,
	400: awslogs.RetentionDays_THIRTEEN_MONTHS, 545: awslogs.RetentionDays_EIGHTEEN_MONTHS, 731: awslogs.RetentionDays_TWO_YEARS,
	1096: awslogs.RetentionDays_THREE_YEARS, 1827: awslogs.RetentionDays_FIVE_YEARS, 2192: awslogs.RetentionDays_SIX_YEARS,
	2557: awslogs.RetentionDays_SEVEN_YEARS, 2922: awslogs.RetentionDays_EIGHT_YEARS, 3288: awslogs.RetentionDays_NINE_YEARS,
	3653: awslogs.RetentionDays_TEN_YEARS,
}

func retentionDayList() []int {
	var out []int
	for d := range retentionDays {
		out = append(out, d)
	}
	sort.Ints(out)
	return out
}

// oidcEnv is the OIDC part of an HTTP-serving function's environment: the
// variables that are set, none when OIDC is off.
func (o OIDC) env() map[string]string {
	out := map[string]string{}
	if o.Issuer == "" {
		return out
	}
	for k, v := range map[string]string{VarOIDCIssuer: o.Issuer, VarOIDCAudience: o.Audience, VarOIDCRoleClaim: o.RoleClaim, VarOIDCPlanClaim: o.PlanClaim} {
		if v != "" {
			out[k] = v
		}
	}
	return out
}
