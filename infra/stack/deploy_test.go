package stack_test

import (
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/conveyor/conveyor/infra/stack"
	"github.com/conveyor/conveyor/internal/config"
	"github.com/conveyor/conveyor/internal/job"
	"github.com/conveyor/conveyor/internal/resources"
)

// byTopic is prod-en with the alarms sent to an existing topic.
var byTopic *synthesized

// allSynthesized is every environment's stack and the two variants.
func allSynthesized(t *testing.T) map[string]*synthesized {
	t.Helper()
	out := map[string]*synthesized{}
	for env, s := range stacks(t) {
		out[string(env)] = s
	}
	out["staging (configured)"] = byARN
	out["prod-en (alarm topic)"] = byTopic
	return out
}

// strings walks every string of a decoded template.
func walkStrings(v any, fn func(string)) {
	switch v := v.(type) {
	case string:
		fn(v)
	case map[string]any:
		for k, x := range v {
			fn(k)
			walkStrings(x, fn)
		}
	case []any:
		for _, x := range v {
			walkStrings(x, fn)
		}
	}
}

var hostLike = regexp.MustCompile(`(?i)[a-z0-9](?:[a-z0-9-]*[a-z0-9])?(?:\.[a-z0-9](?:[a-z0-9-]*[a-z0-9])?)+`)

// No template carries a placeholder domain (example.com and the other
// documentation names): every origin, URL and address comes from the
// environment's configuration, which refuses them.
func TestNoPlaceholderDomainInTemplates(t *testing.T) {
	t.Parallel()
	for name, s := range allSynthesized(t) {
		found := map[string]bool{}
		walkStrings(s.raw, func(str string) {
			for _, h := range hostLike.FindAllString(str, -1) {
				if stack.PlaceholderDomain(h) {
					found[h] = true
				}
			}
		})
		if len(found) > 0 {
			t.Errorf("%s: placeholder domains in the template: %v", name, keys(found))
		}
	}
}

func keys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// statefulTypes are the resources that hold data or names worth keeping:
// in production they survive a stack deletion, never a failed create.
var statefulTypes = []string{
	"AWS::DynamoDB::Table", "AWS::SQS::Queue", "AWS::Logs::LogGroup", "AWS::SecretsManager::Secret",
	"AWS::S3::Bucket", "AWS::Scheduler::ScheduleGroup", "AWS::KMS::Key",
}

// No resource is kept after the rollback of a failed create: a kept
// resource with a fixed name would make the retried create fail with
// "already exists". CloudFormation's RetainExceptOnCreate deletes what a
// failed create made and keeps it otherwise. (UpdateReplacePolicy Retain,
// which CDK writes beside it, acts only when an update replaces a
// resource, never on a create.)
func TestNoRetainAfterAFailedCreate(t *testing.T) {
	t.Parallel()
	for name, s := range allSynthesized(t) {
		for id, r := range s.res {
			if r.DeletionPolicy == "Retain" {
				t.Errorf("%s: %s (%s) has DeletionPolicy Retain", name, id, r.Type)
			}
			if !slices.Contains(statefulTypes, r.Type) {
				continue
			}
			want := "Delete"
			if s.def.Env.Production() || (r.Type == "AWS::S3::Bucket" && r.Properties["BucketName"] == nil) {
				// The access-log bucket (a generated name) is kept everywhere.
				want = "RetainExceptOnCreate"
			}
			if r.DeletionPolicy != want {
				t.Errorf("%s: %s (%s) has DeletionPolicy %q, want %q", name, id, r.Type, r.DeletionPolicy, want)
			}
		}
	}
}

// The three environments fit one account: no physical name is used twice
// across their templates, and none creates an account-wide singleton.
func TestEnvironmentsShareAnAccount(t *testing.T) {
	t.Parallel()
	singletons := []string{"AWS::ApiGateway::Account", "AWS::XRay::TransactionSearchConfig", "AWS::Logs::AccountPolicy"}
	owner := map[string]string{}
	for env, s := range stacks(t) {
		for id, r := range s.res {
			if slices.Contains(singletons, r.Type) {
				t.Errorf("%s: %s is an account-wide singleton (%s)", env, id, r.Type)
			}
			for _, n := range physicalNames(r) {
				key := r.Type + " " + n
				if other, ok := owner[key]; ok {
					t.Errorf("%s and %s both name a %s %s", other, env, r.Type, n)
				}
				owner[key] = string(env)
			}
		}
	}
	if len(owner) < 50 {
		t.Errorf("only %d physical names found: the walk misses them", len(owner))
	}
}

// physicalNames are the names a resource takes in the account: its
// top-level *Name properties given as literals or joins (a Ref or GetAtt
// names another resource), and a sampling rule's RuleName.
func physicalNames(r resource) []string {
	var out []string
	props := r.Properties
	if r.Type == "AWS::XRay::SamplingRule" {
		props, _ = props["SamplingRule"].(map[string]any)
	}
	for k, v := range props {
		// A metric's, a stage's or an inline policy's name is not the
		// resource's name in the account.
		if !strings.HasSuffix(k, "Name") || k == "MetricName" || k == "StageName" || k == "PolicyName" {
			continue
		}
		switch v := v.(type) {
		case string:
			out = append(out, v)
		case map[string]any:
			if v["Fn::Join"] != nil || v["Fn::Sub"] != nil {
				b, _ := json.Marshal(v)
				out = append(out, string(b))
			}
		}
	}
	return out
}

// Every function reserves nothing unless its environment's configuration
// says so (the checked-in ones do not), and the tier mappings keep their
// maximum concurrency.
func TestReservationsComeFromTheConfiguration(t *testing.T) {
	t.Parallel()
	for name, s := range allSynthesized(t) {
		cfg := configs[s.def.Env]
		if name == "staging (configured)" {
			cfg = configuredStaging
		}
		for _, fn := range s.def.Functions {
			got, ok := s.res[s.functionID(t, fn)].Properties["ReservedConcurrentExecutions"]
			want, set := cfg.ReservedConcurrency[fn]
			if ok != set || (set && got != float64(want)) {
				t.Errorf("%s %s: ReservedConcurrentExecutions %v (set %v), want %v (set %v)", name, fn, got, ok, want, set)
			}
		}
		for _, q := range s.def.Queues {
			sc, _ := s.res[s.esmFor(t, q)].Properties["ScalingConfig"].(map[string]any)
			if sc["MaximumConcurrency"] != float64(q.MaxConcurrency) {
				t.Errorf("%s %s: MaximumConcurrency %v, want %d", name, q.Name, sc["MaximumConcurrency"], q.MaxConcurrency)
			}
		}
	}
}

// The configured settings reach the template: origins on the API, the
// bucket and the stream URL (with the dashboard's own origin), the OIDC
// variables on the functions that verify tokens only, the external API's
// URL everywhere and its host in the breaker alarm, log retention, and
// tracing off.
func TestConfiguredSettingsReachTheTemplate(t *testing.T) {
	t.Parallel()
	stacks(t)
	s, cfg := byARN, configuredStaging
	apiID := s.logicalID(t, "AWS::ApiGatewayV2::Api", "Name", s.def.Prefix+"-api")
	api := s.res[apiID].Properties
	if diff := cmp.Diff(toAny(cfg.AllowedOrigins), api["CorsConfiguration"].(map[string]any)["AllowOrigins"]); diff != "" {
		t.Errorf("API CORS origins (-want +got):\n%s", diff)
	}
	check(t, "bucket CORS", func() {
		s.hasProps("AWS::S3::Bucket", obj(map[string]any{"CorsConfiguration": uploadCORS(cfg.AllowedOrigins)}))
	})
	for _, url := range s.ofType("AWS::Lambda::Url") {
		got, _ := json.Marshal(url.Properties["Cors"].(map[string]any)["AllowOrigins"])
		for _, o := range cfg.AllowedOrigins {
			if !strings.Contains(string(got), `"`+o+`"`) {
				t.Errorf("stream URL origins %s lack %s", got, o)
			}
		}
		if !strings.Contains(string(got), apiID) {
			t.Errorf("stream URL origins %s lack the dashboard's (the API endpoint, %s)", got, apiID)
		}
	}
	// The checked-in environments allow no other origin: no API CORS, no
	// bucket CORS, only the dashboard's origin on the stream.
	for env, st := range stacks(t) {
		if len(configs[env].AllowedOrigins) > 0 {
			continue
		}
		for id, r := range st.ofType("AWS::ApiGatewayV2::Api") {
			if r.Properties["CorsConfiguration"] != nil {
				t.Errorf("%s: %s has CORS without configured origins", env, id)
			}
		}
		for _, url := range st.ofType("AWS::Lambda::Url") {
			if n := len(url.Properties["Cors"].(map[string]any)["AllowOrigins"].([]any)); n != 1 {
				t.Errorf("%s: the stream URL allows %d origins, want the dashboard's alone", env, n)
			}
		}
	}
	oidc := map[string]any{stack.VarOIDCIssuer: cfg.OIDC.Issuer, stack.VarOIDCAudience: cfg.OIDC.Audience,
		stack.VarOIDCRoleClaim: cfg.OIDC.RoleClaim, stack.VarOIDCPlanClaim: cfg.OIDC.PlanClaim}
	for _, fn := range s.def.Functions {
		props := s.res[s.functionID(t, fn)].Properties
		vars := props["Environment"].(map[string]any)["Variables"].(map[string]any)
		for k, v := range oidc {
			if got, ok := vars[k]; ok != resources.ReadsJWTSecret(fn) || (ok && got != v) {
				t.Errorf("%s: %s = %v (set %v), want set only on the functions that verify tokens, to %v", fn, k, got, ok, v)
			}
		}
		// Every function sends with the same slots: the plans' defaults
		// with the configured ones over them, and the named owners.
		if got, want := vars["CONVEYOR_FAIR_SLOTS"], "corporate=6,enterprise=12,free=1,pro=4,standard=3"; got != want {
			t.Errorf("%s: CONVEYOR_FAIR_SLOTS = %v, want %s", fn, got, want)
		}
		if got := vars["CONVEYOR_OWNER_SLOTS"]; got != "user-42=16" {
			t.Errorf("%s: CONVEYOR_OWNER_SLOTS = %v, want user-42=16", fn, got)
		}
		// The functions that serve user tokens (api, uploads, schedules)
		// admit requests by their owner's rate, the same rates.
		rates := map[string]any{"CONVEYOR_RATE_LIMITS": "corporate=50/100,enterprise=100/100,free=2/50,pro=20/100,standard=10/80", "CONVEYOR_OWNER_RATE_LIMITS": "user-42=40/400"}
		userFacing := fn == resources.FuncAPI || fn == resources.FuncUploads || fn == resources.FuncSchedules
		for k, want := range rates {
			if got, ok := vars[k]; ok != userFacing || (ok && got != want) {
				t.Errorf("%s: %s = %v (set %v), want %v on the api, uploads and schedules functions alone", fn, k, got, ok, want)
			}
		}
		// Only the relay reads what goes on the bus: the configured choice.
		if got, ok := vars["CONVEYOR_BUS_EVENTS"]; ok != (fn == resources.FuncRelay) || (ok && got != cfg.BusEvents) {
			t.Errorf("%s: CONVEYOR_BUS_EVENTS = %v (set %v), want %q on the relay alone", fn, got, ok, cfg.BusEvents)
		}
		if vars["CONVEYOR_DEVIANTART_URL"] != cfg.ExternalAPI.URL {
			t.Errorf("%s: CONVEYOR_DEVIANTART_URL = %v, want %s", fn, vars["CONVEYOR_DEVIANTART_URL"], cfg.ExternalAPI.URL)
		}
		if tc := props["TracingConfig"]; tc != nil && tc.(map[string]any)["Mode"] != "PassThrough" {
			t.Errorf("%s: tracing %v with tracing off", fn, tc)
		}
	}
	for id, r := range s.ofType("AWS::Logs::LogGroup") {
		if r.Properties["RetentionInDays"] != float64(cfg.LogRetentionDays) {
			t.Errorf("%s: RetentionInDays %v, want %d", id, r.Properties["RetentionInDays"], cfg.LogRetentionDays)
		}
	}
	if n := len(s.ofType("AWS::XRay::SamplingRule")); n != 0 {
		t.Errorf("%d sampling rules with tracing off", n)
	}
	if hosts := stack.BreakerHosts(cfg); !cmp.Equal(hosts, []string{"sandbox.conveyor.dev"}) {
		t.Errorf("breaker hosts %v, want the configured API's", hosts)
	}
	found := false
	for _, r := range s.ofType("AWS::CloudWatch::Alarm") {
		if r.Properties["AlarmName"] == s.def.Prefix+"-breaker-open-sandbox.conveyor.dev" {
			found = true
		}
	}
	if !found {
		t.Error("no breaker alarm on the configured external API's host")
	}
}

// Each environment's choices of tracing and logs reach every function:
// active tracing where tracing is on, Lambda's PassThrough (no
// TracingConfig, no X-Ray grant) where it is off, and never an X-Ray
// sampling rule (Lambda's own sampling applies none); JSON logs, Lambda's
// own lines at the configured system level (WARN unless set), the
// functions' lines from INFO up (the EMF metric lines are INFO). The
// checked-in production environments trace nothing and keep no start or
// report line of an invocation that succeeds; staging traces and keeps
// them.
func TestTracingAndLogLevels(t *testing.T) {
	t.Parallel()
	stacks(t)
	for env, want := range map[job.Env]struct {
		tracing bool
		level   string
	}{job.Staging: {true, "INFO"}, job.ProdRU: {false, "WARN"}, job.ProdEN: {false, "WARN"}} {
		if cfg := configs[env]; cfg.Tracing.Enabled != want.tracing || cfg.SystemLevel() != want.level {
			t.Errorf("%s: tracing %v, system log level %s; want %v, %s (infra/env/%s.json)", env, cfg.Tracing.Enabled, cfg.SystemLevel(), want.tracing, want.level, env)
		}
	}
	each(t, func(t *testing.T, s *synthesized) {
		cfg := configs[s.def.Env]
		if n := len(s.ofType("AWS::XRay::SamplingRule")); n != 0 {
			t.Errorf("%d X-Ray sampling rules: Lambda's active tracing applies none", n)
		}
		actions := policyActions(t, s)
		for _, fn := range s.def.Functions {
			id := s.functionID(t, fn)
			props := s.res[id].Properties
			tc, _ := props["TracingConfig"].(map[string]any)
			if cfg.Tracing.Enabled != (tc != nil && tc["Mode"] == "Active") || (!cfg.Tracing.Enabled && tc != nil) {
				t.Errorf("%s: TracingConfig %v with tracing.enabled %v", fn, props["TracingConfig"], cfg.Tracing.Enabled)
			}
			lc, _ := props["LoggingConfig"].(map[string]any)
			if lc["LogFormat"] != "JSON" || lc["SystemLogLevel"] != cfg.SystemLevel() || lc["ApplicationLogLevel"] != "INFO" {
				t.Errorf("%s: LoggingConfig %v, want JSON, system %s, application INFO", fn, lc, cfg.SystemLevel())
			}
			grantsXRay := slices.Contains(actions[fn], "xray:PutTraceSegments")
			if grantsXRay != cfg.Tracing.Enabled {
				t.Errorf("%s: role grants X-Ray %v with tracing.enabled %v", fn, grantsXRay, cfg.Tracing.Enabled)
			}
		}
		for id, r := range s.ofType("AWS::ApiGatewayV2::Stage") {
			settings, _ := r.Properties["AccessLogSettings"].(map[string]any)
			var got map[string]string
			if err := json.Unmarshal([]byte(fmt.Sprint(settings["Format"])), &got); err != nil || !cmp.Equal(got, resources.AccessLogFields) {
				t.Errorf("%s: access log format %v, want resources.AccessLogFields %v (%v)", id, settings["Format"], resources.AccessLogFields, err)
			}
		}
	})
}

// A configured OTLP collector reaches every function: its endpoint and
// sampling ratio as the functions read them (internal/config), and the
// collector's layer; the checked-in environments, which name none, give
// the functions neither (they record no span).
func TestOTLPTracingReachesEveryFunction(t *testing.T) {
	t.Parallel()
	stacks(t)
	for name, s := range map[string]*synthesized{"staging (configured)": byARN, "prod-ru": stacks(t)[job.ProdRU]} {
		configured := s == byARN
		for _, fn := range s.def.Functions {
			props := s.res[s.functionID(t, fn)].Properties
			vars, _ := props["Environment"].(map[string]any)["Variables"].(map[string]any)
			endpoint, ratio := vars[config.VarOTLPEndpoint], vars[config.VarTraceSampleRatio]
			layers := fmt.Sprint(props["Layers"])
			if configured && (endpoint != "http://localhost:4318" || ratio != "0.25" || !strings.Contains(layers, collectorLayer)) {
				t.Errorf("%s %s: endpoint %v, ratio %v, layers %s; want the configured collector", name, fn, endpoint, ratio, layers)
			}
			if !configured && (endpoint != nil || ratio != nil || props["Layers"] != nil) {
				t.Errorf("%s %s: endpoint %v, ratio %v, layers %s; want none", name, fn, endpoint, ratio, layers)
			}
		}
	}
}

// What fails without an error metric has an alarm, to the alarm topic:
// batches the relay gave up on (its failure queue), the relay falling
// behind the stream, and S3 events Lambda dropped before confirm.
func TestSilentFailuresAreAlarmed(t *testing.T) {
	t.Parallel()
	each(t, func(t *testing.T, s *synthesized) {
		var topic string
		for id := range s.ofType("AWS::SNS::Topic") {
			topic = id
		}
		alarm := func(what string, props map[string]any) {
			props["AlarmActions"] = []any{ref(topic)}
			props["OKActions"] = []any{ref(topic)}
			props["AlarmDescription"] = regex(`.+: .+`)
			check(t, what, func() { s.hasProps("AWS::CloudWatch::Alarm", obj(props)) })
		}
		relayQueue := s.logicalID(t, "AWS::SQS::Queue", "QueueName", s.def.EventStream.FailureQueueName)
		alarm("relay failure queue", map[string]any{
			"AlarmName": s.def.Prefix + "-relay-failures", "Namespace": "AWS/SQS", "MetricName": "ApproximateNumberOfMessagesVisible",
			"Dimensions":         []any{map[string]any{"Name": "QueueName", "Value": getAtt(relayQueue, "QueueName")}},
			"ComparisonOperator": "GreaterThanThreshold", "Threshold": 0,
		})
		alarm("relay iterator age", map[string]any{
			"AlarmName": s.def.Prefix + "-relay-iterator-age", "Namespace": "AWS/Lambda", "MetricName": "IteratorAge",
			"Dimensions": []any{map[string]any{"Name": "FunctionName", "Value": ref(s.functionID(t, s.def.EventStream.Function))}},
			"Statistic":  "Maximum", "ComparisonOperator": "GreaterThanThreshold", "Threshold": stack.RelayIteratorAgeLimit.Seconds() * 1000,
		})
		alarm("confirm dropped events", map[string]any{
			"AlarmName": s.def.Prefix + "-" + s.def.Bucket.NotifyFunction + "-async-events-dropped", "Namespace": "AWS/Lambda",
			"MetricName": "AsyncEventsDropped",
			"Dimensions": []any{map[string]any{"Name": "FunctionName", "Value": ref(s.functionID(t, s.def.Bucket.NotifyFunction))}},
			"Statistic":  "Sum", "ComparisonOperator": "GreaterThanThreshold", "Threshold": 0,
		})
	})
}

// What keeps the functions running has an alarm, with what to do:
// EventBridge Scheduler failing to invoke, or giving up on, the users'
// schedules (their group) and the sweeps (the default group, where the
// stack's schedules are); each function throttled; the account's
// concurrent executions near its quota (the configured share); and every
// asynchronously invoked function's dropped events.
func TestOperationalAlarms(t *testing.T) {
	t.Parallel()
	stacks(t)
	for name, s := range map[string]*synthesized{"staging": stacks(t)[job.Staging], "prod-ru": stacks(t)[job.ProdRU],
		"prod-en": stacks(t)[job.ProdEN], "staging (configured)": byARN} {
		cfg := configs[s.def.Env]
		if s == byARN {
			cfg = configuredStaging
		}
		var topic string
		for id := range s.ofType("AWS::SNS::Topic") {
			topic = id
		}
		alarm := func(what string, props map[string]any) {
			props["AlarmActions"] = []any{ref(topic)}
			props["OKActions"] = []any{ref(topic)}
			check(t, name+": "+what, func() { s.hasProps("AWS::CloudWatch::Alarm", obj(props)) })
		}
		// The users' schedules are in the stack's group; the stack's own
		// schedules name none (the default group).
		check(t, name+": user schedule group", func() {
			s.hasProps("AWS::Scheduler::ScheduleGroup", obj(map[string]any{"Name": s.def.ScheduleGroup}))
		})
		for id, r := range s.ofType("AWS::Scheduler::Schedule") {
			if g, ok := r.Properties["GroupName"]; ok {
				t.Errorf("%s: schedule %s is in group %v, but the sweep alarms watch %s", name, id, g, stack.SweepScheduleGroup)
			}
		}
		for group, label := range map[string]string{s.def.ScheduleGroup: "user-schedules", stack.SweepScheduleGroup: "sweep-schedules"} {
			for metric, suffix := range map[string]string{"TargetErrorCount": "target-errors", "InvocationDroppedCount": "dropped"} {
				alarm(label+" "+metric, map[string]any{
					"AlarmName": s.def.Prefix + "-" + label + "-" + suffix, "Namespace": "AWS/Scheduler", "MetricName": metric,
					"Dimensions": []any{map[string]any{"Name": "ScheduleGroup", "Value": group}},
					"Statistic":  "Sum", "Period": 300, "ComparisonOperator": "GreaterThanThreshold", "Threshold": 0,
					"AlarmDescription": regex(`.+: .+`),
				})
			}
		}
		for _, fn := range s.def.Functions {
			alarm(fn+" throttles", map[string]any{
				"AlarmName": s.def.Prefix + "-" + fn + "-throttles", "Namespace": "AWS/Lambda", "MetricName": "Throttles",
				"Dimensions": []any{map[string]any{"Name": "FunctionName", "Value": ref(s.functionID(t, fn))}},
				"Statistic":  "Sum", "ComparisonOperator": "GreaterThanThreshold", "Threshold": 0,
				"AlarmDescription": regex(`throttled .+: .+reservedConcurrency.+quota`),
			})
		}
		for _, fn := range s.def.AsyncInvoked() {
			alarm(fn+" dropped events", map[string]any{
				"AlarmName": s.def.Prefix + "-" + fn + "-async-events-dropped", "Namespace": "AWS/Lambda", "MetricName": "AsyncEventsDropped",
				"Dimensions": []any{map[string]any{"Name": "FunctionName", "Value": ref(s.functionID(t, fn))}},
				"Statistic":  "Sum", "ComparisonOperator": "GreaterThanThreshold", "Threshold": 0,
			})
		}
		// The account's concurrency: no dimension (every function of the
		// region), the highest of each minute, 3 of 5 minutes.
		want := map[string]int{"staging (configured)": 600}[name]
		if want == 0 {
			want = 800 // 80 % of the default quota of 1,000
		}
		if got := stack.AccountConcurrencyThreshold(cfg); got != want {
			t.Errorf("%s: AccountConcurrencyThreshold = %d, want %d", name, got, want)
		}
		alarm("account concurrency", map[string]any{
			"AlarmName": s.def.Prefix + "-account-concurrency", "Namespace": "AWS/Lambda", "MetricName": "ConcurrentExecutions",
			"Dimensions": absent{}, "Statistic": "Maximum", "Period": 60,
			"ComparisonOperator": "GreaterThanOrEqualToThreshold", "Threshold": want, "EvaluationPeriods": 5, "DatapointsToAlarm": 3,
			"AlarmDescription": regex(`quota.+: .+`),
		})
		// Every alarm says what to do (a description past its colon), in
		// what CloudWatch takes.
		for id, r := range s.ofType("AWS::CloudWatch::Alarm") {
			d, _ := r.Properties["AlarmDescription"].(string)
			if len(d) > 1024 {
				t.Errorf("%s: alarm %s's description is %d characters, CloudWatch takes 1024", name, id, len(d))
			}
		}
	}
	// The share is checked.
	for _, pct := range []int{-1, 101} {
		cfg := configs[job.Staging]
		cfg.Alarms.AccountConcurrencyPercent = pct
		if err := cfg.Validate(job.Staging); err == nil || !strings.Contains(err.Error(), "alarms.accountConcurrencyPercent") {
			t.Errorf("accountConcurrencyPercent %d: %v, want a refusal naming it", pct, err)
		}
	}
	cfg := configs[job.Staging]
	cfg.AccountConcurrency, cfg.Alarms.AccountConcurrencyPercent = stack.AccountConcurrencyNew, 75
	if got := stack.AccountConcurrencyThreshold(cfg); got != 8 {
		t.Errorf("75%% of a quota of 10: threshold %d, want 8 (rounded up)", got)
	}
}

// The HTTP API's CORS is resources.APICORS (which the local gateway
// serves too) for the configured origins: a browser may send the
// contract's request headers (Idempotency-Key among them) and read its
// response headers (X-Request-Id, Retry-After, Idempotent-Replayed, …).
// The stream URL's is resources.StreamCORS.
func TestAPICORSServesTheContractsHeaders(t *testing.T) {
	t.Parallel()
	stacks(t)
	s, cfg := byARN, configuredStaging
	c := resources.APICORS
	for _, h := range []string{"Authorization", "Content-Type", "Idempotency-Key"} {
		if !slices.Contains(c.AllowHeaders, h) {
			t.Errorf("resources.APICORS allows no %s request header", h)
		}
	}
	for _, h := range []string{"Location", "X-Total-Count", "X-Request-Id", "Retry-After", "Idempotent-Replayed"} {
		if !slices.Contains(c.ExposeHeaders, h) {
			t.Errorf("resources.APICORS exposes no %s response header", h)
		}
	}
	check(t, "API CORS", func() {
		s.hasProps("AWS::ApiGatewayV2::Api", obj(map[string]any{"CorsConfiguration": map[string]any{
			"AllowOrigins": toAny(cfg.AllowedOrigins), "AllowMethods": toAny(c.AllowMethods),
			"AllowHeaders": toAny(c.AllowHeaders), "ExposeHeaders": toAny(c.ExposeHeaders), "MaxAge": c.MaxAge.Seconds(),
		}}))
	})
	check(t, "stream URL CORS", func() {
		s.hasProps("AWS::Lambda::Url", obj(map[string]any{"Cors": obj(map[string]any{
			"AllowMethods": toAny(resources.StreamCORS.AllowMethods), "AllowHeaders": toAny(resources.StreamCORS.AllowHeaders),
			"MaxAge": resources.StreamCORS.MaxAge.Seconds(),
		})}))
	})
}

// With alarms.topicArn, every alarm notifies that topic and the stack
// makes no topic (nor its key) of its own.
func TestAlarmsToAnExistingTopic(t *testing.T) {
	t.Parallel()
	stacks(t)
	s := byTopic
	if n := len(s.ofType("AWS::SNS::Topic")); n != 0 {
		t.Errorf("%d topics created, want none", n)
	}
	alarms := s.ofType("AWS::CloudWatch::Alarm")
	if len(alarms) < 20 {
		t.Fatalf("%d alarms", len(alarms))
	}
	for id, r := range alarms {
		if diff := cmp.Diff([]any{alarmTopicARN}, r.Properties["AlarmActions"]); diff != "" {
			t.Errorf("%s AlarmActions (-want +got):\n%s", id, diff)
		}
	}
	for _, env := range job.CloudEnvs {
		if len(configs[env].Alarms.Subscribers) == 0 && configs[env].Alarms.TopicARN == "" {
			t.Logf("%s: the checked-in configuration has no alarm subscriber (the deploy warns)", env)
		}
	}
}

// TestWriteJobAttributesReachesEveryFunction: the first deploy of compact
// job items (Props.WriteJobAttributes, from JobItemsContextKey) tells every
// function to write job items with every attribute; without it, none is
// told, and they write compact items (docs/migrations.md).
func TestWriteJobAttributesReachesEveryFunction(t *testing.T) {
	t.Parallel()
	stacks(t)
	for name, s := range map[string]*synthesized{"staging (configured, attributes)": byARN, "staging": stacks(t)[job.Staging]} {
		want := map[bool]any{true: "attributes", false: nil}[s == byARN]
		for _, fn := range s.def.Functions {
			vars := s.res[s.functionID(t, fn)].Properties["Environment"].(map[string]any)["Variables"].(map[string]any)
			if got := vars["CONVEYOR_JOB_ITEMS"]; got != want {
				t.Errorf("%s: %s: CONVEYOR_JOB_ITEMS = %v, want %v", name, fn, got, want)
			}
		}
	}
	if got, want := stack.JobItemsContextKey(job.ProdEN), "conveyor:prod-en:jobItems"; got != want {
		t.Errorf("JobItemsContextKey = %q, want %q", got, want)
	}
}
