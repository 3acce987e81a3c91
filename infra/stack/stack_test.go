package stack_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/assertions"
	"github.com/aws/jsii-runtime-go"
	"github.com/google/go-cmp/cmp"

	"github.com/conveyor/conveyor/infra/stack"
	"github.com/conveyor/conveyor/internal/envelope"
	"github.com/conveyor/conveyor/internal/job"
	"github.com/conveyor/conveyor/internal/resources"
)

// Synthesizing is slow (every construct call crosses into Node), so the
// stacks are built once per test binary, in one app, and shared.

// cdkJSONContext is infra/cdk.json's context, as the app reads it.
func cdkJSONContext() (map[string]any, error) {
	b, err := os.ReadFile(filepath.Join("..", "cdk.json"))
	if err != nil {
		return nil, err
	}
	return stack.CDKJSONContext(b)
}

var (
	functionsDir string
	once         sync.Once
	built        map[job.Env]*synthesized
	emulator     *synthesized
	byARN        *synthesized             // staging, with the OAuth client secret referenced by ARN, and every optional setting (configuredStaging)
	configs      map[job.Env]stack.Config // infra/env/<env>.json, as the app reads them
	testApp      awscdk.App
	buildErr     error
)

// synthesized is one environment's stack and its template.
type synthesized struct {
	def   resources.Definition
	stack awscdk.Stack
	tmpl  assertions.Template
	// res is the template's Resources, decoded once for Go-side checks.
	res map[string]resource
	raw map[string]any
}

type resource struct {
	Type                string
	Properties          map[string]any
	DeletionPolicy      string
	UpdateReplacePolicy string
}

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "conveyor-infra-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	functionsDir = filepath.Join(dir, "bin")
	if err := writeBootstraps(functionsDir, resources.For(job.Staging).Functions...); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	jsii.Close()
	if os.Getenv("KEEP_CDK_OUT") == "" {
		os.RemoveAll(dir)
	}
	os.Exit(code)
}

// writeBootstraps puts an empty <fn>/bootstrap under dir for each function:
// the stacks package what they find, and tests need no Go cross-build.
func writeBootstraps(dir string, fns ...string) error {
	for _, fn := range fns {
		if err := os.MkdirAll(filepath.Join(dir, fn), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dir, fn, "bootstrap"), nil, 0o755); err != nil {
			return err
		}
	}
	return nil
}

// stacks returns every cloud environment's synthesized stack.
func stacks(t *testing.T) map[job.Env]*synthesized {
	t.Helper()
	once.Do(func() {
		defer func() {
			if r := recover(); r != nil {
				buildErr = fmt.Errorf("synthesizing: %v", r)
			}
		}()
		context, err := cdkJSONContext()
		if err != nil {
			buildErr = err
			return
		}
		if configs, err = stack.LoadConfigs(filepath.Join("..", stack.ConfigDirDefault)); err != nil {
			buildErr = err
			return
		}
		app := stack.NewApp(filepath.Join(filepath.Dir(functionsDir), "cdk.out"), context)
		testApp = app
		sts := map[job.Env]awscdk.Stack{}
		for _, env := range job.CloudEnvs {
			sts[env] = stack.New(app, stack.StackID(env), stack.Props{Env: env, FunctionsDir: functionsDir, Config: configs[env]})
		}
		arnStack := stack.New(app, "Conveyor-staging-byarn", stack.Props{Env: job.Staging, FunctionsDir: functionsDir,
			OAuthClientSecretARN: oauthClientARN, Config: configuredStaging, WriteJobAttributes: true})
		// The topic stack is also bound to an account and region (the
		// checked-in environments are not).
		topicCfg := withAlarmTopic(configs[job.ProdEN])
		topicCfg.Account, topicCfg.Region = boundAccount, boundRegion
		topicStack := stack.New(app, "Conveyor-prod-en-topic", stack.Props{Env: job.ProdEN, FunctionsDir: functionsDir, Config: topicCfg})
		adoptedStack := stack.New(app, "Conveyor-prod-ru-adopted", stack.Props{Env: job.ProdRU, FunctionsDir: functionsDir, Config: withAdopted(configs[job.ProdRU])})
		// The emulator synthesizer is checked on a one-resource stack: a
		// fourth full stack would cost a quarter more synthesis time.
		emu := awscdk.NewStack(app, jsii.String("EmulatorSynthesizer"), &awscdk.StackProps{Synthesizer: stack.EmulatorSynthesizer()})
		awscdk.NewCfnWaitConditionHandle(emu, jsii.String("Nothing"), nil)
		stack.Check(app)
		built = map[job.Env]*synthesized{}
		for env, st := range sts {
			built[env] = decode(st, resources.For(env))
		}
		emulator = decode(emu, resources.For(job.Staging))
		byARN = decode(arnStack, resources.For(job.Staging))
		byTopic = decode(topicStack, resources.For(job.ProdEN))
		adopted = decode(adoptedStack, resources.For(job.ProdRU))
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return built
}

func decode(st awscdk.Stack, def resources.Definition) *synthesized {
	tmpl := assertions.Template_FromStack(st, nil)
	b, err := json.Marshal(tmpl.ToJSON())
	if err != nil {
		panic(err)
	}
	var doc struct {
		Resources map[string]resource
	}
	var raw map[string]any
	if err := json.Unmarshal(b, &doc); err != nil {
		panic(err)
	}
	if err := json.Unmarshal(b, &raw); err != nil {
		panic(err)
	}
	return &synthesized{def: def, stack: st, tmpl: tmpl, res: doc.Resources, raw: raw}
}

// jsiiMu serialises calls into the jsii kernel (one Node process, one
// request stream): the Go runtime is not safe for concurrent calls. Tests
// run in parallel; their CDK assertions and matcher constructions take
// turns, while the Go-side checks on the decoded templates do not wait.
var jsiiMu sync.Mutex

// check runs a CDK assertion, which panics on mismatch, as a test error.
// Build patterns with obj, arrayWith, present… (plain Go); hasProps converts them.
func check(t *testing.T, what string, assertion func()) {
	t.Helper()
	jsiiMu.Lock()
	defer jsiiMu.Unlock()
	defer func() {
		if r := recover(); r != nil {
			t.Errorf("%s: %v", what, r)
		}
	}()
	assertion()
}

// Patterns are built as plain Go values and turned into CDK matchers only
// inside check, under jsiiMu.
type (
	like     map[string]any // assertions.Match_ObjectLike
	contains []any          // assertions.Match_ArrayWith
	present  struct{}       // assertions.Match_AnyValue
	absent   struct{}       // assertions.Match_Absent
	regex    string         // assertions.Match_StringLikeRegexp
)

func obj(m map[string]any) like       { return like(m) }
func arrayWith(items ...any) contains { return contains(items) }

// matcher turns a pattern into CDK matchers; call it under jsiiMu.
func matcher(p any) any {
	switch p := p.(type) {
	case like:
		m := map[string]any{}
		for k, v := range p {
			m[k] = matcher(v)
		}
		return assertions.Match_ObjectLike(&m)
	case map[string]any:
		m := map[string]any{}
		for k, v := range p {
			m[k] = matcher(v)
		}
		return m
	case contains:
		items := make([]any, len(p))
		for i, v := range p {
			items[i] = matcher(v)
		}
		return assertions.Match_ArrayWith(&items)
	case []any:
		items := make([]any, len(p))
		for i, v := range p {
			items[i] = matcher(v)
		}
		return items
	case present:
		return assertions.Match_AnyValue()
	case absent:
		return assertions.Match_Absent()
	case regex:
		return assertions.Match_StringLikeRegexp(jsii.String(string(p)))
	}
	return p
}

// hasProps asserts that a resource of type typ matches pattern; call it
// inside check.
func (s *synthesized) hasProps(typ string, pattern any) {
	s.tmpl.HasResourceProperties(jsii.String(typ), matcher(pattern))
}

// each runs fn for every cloud environment as a parallel subtest.
func each(t *testing.T, fn func(t *testing.T, s *synthesized)) {
	t.Helper()
	for env, s := range stacks(t) {
		t.Run(string(env), func(t *testing.T) {
			t.Parallel()
			fn(t, s)
		})
	}
}

// logicalID finds the one resource of type typ whose property key equals
// value (a physical name from the definition).
func (s *synthesized) logicalID(t *testing.T, typ, key string, value any) string {
	t.Helper()
	var ids []string
	for id, r := range s.res {
		if r.Type == typ && cmp.Equal(r.Properties[key], value) {
			ids = append(ids, id)
		}
	}
	if len(ids) != 1 {
		t.Fatalf("%s with %s=%v: found %v, want exactly one", typ, key, value, ids)
	}
	return ids[0]
}

func (s *synthesized) ofType(typ string) map[string]resource {
	out := map[string]resource{}
	for id, r := range s.res {
		if r.Type == typ {
			out[id] = r
		}
	}
	return out
}

// esmFor finds the event source mapping of a tier's queue.
func (s *synthesized) esmFor(t *testing.T, q resources.Queue) string {
	t.Helper()
	arn := getAtt(s.logicalID(t, "AWS::SQS::Queue", "QueueName", q.Name), "Arn")
	for id, r := range s.ofType("AWS::Lambda::EventSourceMapping") {
		if cmp.Equal(r.Properties["EventSourceArn"], arn) {
			return id
		}
	}
	t.Fatalf("no event source mapping for %s", q.Name)
	return ""
}

func (s *synthesized) functionID(t *testing.T, fn string) string {
	return s.logicalID(t, "AWS::Lambda::Function", "FunctionName", stack.FunctionName(s.def, fn))
}

func getAtt(id, attr string) map[string]any { return map[string]any{"Fn::GetAtt": []any{id, attr}} }
func ref(id string) map[string]any          { return map[string]any{"Ref": id} }

func TestQueues(t *testing.T) {
	t.Parallel()
	each(t, func(t *testing.T, s *synthesized) {
		for _, q := range s.def.Queues {
			dlq := s.logicalID(t, "AWS::SQS::Queue", "QueueName", q.DLQName)
			check(t, q.Name, func() {
				s.hasProps("AWS::SQS::Queue", obj(map[string]any{
					"QueueName":                 q.Name,
					"FifoQueue":                 true,
					"ContentBasedDeduplication": false,
					"VisibilityTimeout":         q.VisibilityTimeout.Seconds(),
					"MessageRetentionPeriod":    q.Retention.Seconds(),
					"SqsManagedSseEnabled":      true,
					"RedrivePolicy": map[string]any{
						"deadLetterTargetArn": getAtt(dlq, "Arn"),
						"maxReceiveCount":     q.MaxReceiveCount,
					},
					// High-throughput FIFO: every job is its own group.
					"DeduplicationScope":  "messageGroup",
					"FifoThroughputLimit": "perMessageGroupId",
				}))
			})
			check(t, q.DLQName, func() {
				s.hasProps("AWS::SQS::Queue", obj(map[string]any{
					"QueueName":              q.DLQName,
					"FifoQueue":              true,
					"MessageRetentionPeriod": q.DLQRetention.Seconds(),
					"SqsManagedSseEnabled":   true,
					"RedrivePolicy":          absent{},
					// Only its own tier's queue may use it as a DLQ.
					"RedriveAllowPolicy": map[string]any{
						"redrivePermission": "byQueue",
						"sourceQueueArns": []any{map[string]any{
							"Fn::Sub": "arn:${AWS::Partition}:sqs:${AWS::Region}:${AWS::AccountId}:" + q.Name,
						}},
					},
				}))
			})
			// enforceSSL: a deny on aws:SecureTransport=false for both.
			for _, id := range []string{s.logicalID(t, "AWS::SQS::Queue", "QueueName", q.Name), dlq} {
				check(t, "TLS only on "+id, func() {
					s.hasProps("AWS::SQS::QueuePolicy", obj(map[string]any{
						"Queues": []any{ref(id)},
						"PolicyDocument": obj(map[string]any{"Statement": arrayWith(obj(map[string]any{
							"Effect":    "Deny",
							"Condition": map[string]any{"Bool": map[string]any{"aws:SecureTransport": "false"}},
						}))}),
					}))
				})
			}
		}
	})
}

func TestTable(t *testing.T) {
	t.Parallel()
	each(t, func(t *testing.T, s *synthesized) {
		tbl := s.def.Table
		props := map[string]any{
			"TableName":   tbl.Name,
			"BillingMode": "PAY_PER_REQUEST",
			"KeySchema": []any{
				map[string]any{"AttributeName": tbl.PartitionKey.Name, "KeyType": "HASH"},
				map[string]any{"AttributeName": tbl.SortKey.Name, "KeyType": "RANGE"},
			},
			"TimeToLiveSpecification":          map[string]any{"AttributeName": tbl.TTLAttribute, "Enabled": true},
			"PointInTimeRecoverySpecification": obj(map[string]any{"PointInTimeRecoveryEnabled": true}),
			"SSESpecification":                 map[string]any{"SSEEnabled": true},
		}
		props["DeletionProtectionEnabled"] = configs[s.def.Env].TableDeletionProtection
		check(t, "table", func() {
			s.hasProps("AWS::DynamoDB::Table", obj(props))
		})
		for _, ix := range tbl.Indexes {
			projection := map[string]any{"ProjectionType": ix.Projection()}
			if len(ix.Include) > 0 {
				var inc []any
				for _, a := range ix.Include {
					inc = append(inc, a)
				}
				projection = map[string]any{"ProjectionType": "INCLUDE", "NonKeyAttributes": inc}
			}
			check(t, "index "+ix.Name, func() {
				s.hasProps("AWS::DynamoDB::Table", obj(map[string]any{
					"GlobalSecondaryIndexes": arrayWith(map[string]any{
						"IndexName": ix.Name,
						"KeySchema": []any{
							map[string]any{"AttributeName": ix.PartitionKey.Name, "KeyType": "HASH"},
							map[string]any{"AttributeName": ix.SortKey.Name, "KeyType": "RANGE"},
						},
						"Projection": projection,
					}),
				}))
			})
		}
		want := "Delete"
		if s.def.Env.Production() {
			want = "RetainExceptOnCreate"
		}
		id := s.logicalID(t, "AWS::DynamoDB::Table", "TableName", tbl.Name)
		if got := s.res[id].DeletionPolicy; got != want {
			t.Errorf("table DeletionPolicy = %q, want %q", got, want)
		}
	})
}

func TestBucket(t *testing.T) {
	t.Parallel()
	each(t, func(t *testing.T, s *synthesized) {
		bk := s.def.Bucket
		name := map[string]any{"Fn::Join": []any{"-", []any{bk.Name, ref("AWS::AccountId")}}}
		check(t, "bucket", func() {
			s.hasProps("AWS::S3::Bucket", obj(map[string]any{
				"BucketName": name,
				"PublicAccessBlockConfiguration": map[string]any{
					"BlockPublicAcls": true, "BlockPublicPolicy": true, "IgnorePublicAcls": true, "RestrictPublicBuckets": true,
				},
				"BucketEncryption": map[string]any{"ServerSideEncryptionConfiguration": []any{
					map[string]any{"ServerSideEncryptionByDefault": map[string]any{"SSEAlgorithm": "AES256"}},
				}},
				"CorsConfiguration": uploadCORS(configs[s.def.Env].AllowedOrigins),
				"LifecycleConfiguration": map[string]any{"Rules": arrayWith(
					obj(map[string]any{"Prefix": bk.UploadPrefix, "ExpirationInDays": bk.UploadObjectExpiry.Hours() / 24, "Status": "Enabled"}),
					obj(map[string]any{"AbortIncompleteMultipartUpload": map[string]any{"DaysAfterInitiation": 1}, "Status": "Enabled"}),
				)},
				"LoggingConfiguration": obj(map[string]any{"DestinationBucketName": present{}}),
			}))
		})
		bucket := s.logicalID(t, "AWS::S3::Bucket", "BucketName", name)
		check(t, "bucket TLS only", func() {
			s.hasProps("AWS::S3::BucketPolicy", obj(map[string]any{
				"Bucket": ref(bucket),
				"PolicyDocument": obj(map[string]any{"Statement": arrayWith(obj(map[string]any{
					"Effect":    "Deny",
					"Condition": map[string]any{"Bool": map[string]any{"aws:SecureTransport": "false"}},
				}))}),
			}))
		})
		check(t, "ObjectCreated notification", func() {
			s.hasProps("Custom::S3BucketNotifications", obj(map[string]any{
				"BucketName": ref(bucket),
				"NotificationConfiguration": map[string]any{"LambdaFunctionConfigurations": []any{map[string]any{
					"Events":            []any{"s3:ObjectCreated:*"},
					"Filter":            map[string]any{"Key": map[string]any{"FilterRules": []any{map[string]any{"Name": "prefix", "Value": bk.UploadPrefix}}}},
					"LambdaFunctionArn": getAtt(s.functionID(t, bk.NotifyFunction), "Arn"),
				}}},
			}))
		})
	})
}

// tracingConfig is the TracingConfig a function's template should carry:
// Active with tracing on, none (Lambda's PassThrough) with it off.
func tracingConfig(cfg stack.Config) any {
	if cfg.Tracing.Enabled {
		return map[string]any{"Mode": "Active"}
	}
	return absent{}
}

// uploadCORS is the bucket's CORS for the configured origins: none
// without origins.
func uploadCORS(origins []string) any {
	if len(origins) == 0 {
		return absent{}
	}
	return map[string]any{"CorsRules": []any{obj(map[string]any{
		"AllowedMethods": []any{"PUT"},
		"AllowedOrigins": toAny(origins),
		"AllowedHeaders": []any{"Content-Type", "Content-Length", "Content-Disposition"},
	})}}
}

func toAny(ss []string) []any {
	out := make([]any, len(ss))
	for i, s := range ss {
		out[i] = s
	}
	return out
}

func TestFunctions(t *testing.T) {
	t.Parallel()
	if got := stack.FunctionSpecs[resources.FuncPublisher].Timeout; got != resources.ConsumerTimeout {
		t.Errorf("publisher timeout = %v, want resources.ConsumerTimeout %v", got, resources.ConsumerTimeout)
	}
	each(t, func(t *testing.T, s *synthesized) {
		cfg := configs[s.def.Env]
		retention := cfg.LogRetentionDays
		for _, fn := range s.def.Functions {
			spec := stack.FunctionSpecs[fn]
			name := stack.FunctionName(s.def, fn)
			logs := s.logicalID(t, "AWS::Logs::LogGroup", "LogGroupName", "/aws/lambda/"+name)
			bucket := s.logicalID(t, "AWS::S3::Bucket", "BucketName",
				map[string]any{"Fn::Join": []any{"-", []any{s.def.Bucket.Name, ref("AWS::AccountId")}}})
			key := s.res[s.logicalID(t, "AWS::KMS::Alias", "AliasName", s.def.KMSAlias)].Properties["TargetKeyId"]
			env := map[string]any{
				"CONVEYOR_ENV":        string(s.def.Env),
				"CONVEYOR_TABLE":      ref(s.logicalID(t, "AWS::DynamoDB::Table", "TableName", s.def.Table.Name)),
				"CONVEYOR_BUCKET":     ref(bucket),
				"CONVEYOR_KMS_KEY_ID": key,
				"CONVEYOR_EVENT_BUS":  ref(s.logicalID(t, "AWS::Events::EventBus", "Name", s.def.EventBus)),
				// From the environment's configuration.
				"CONVEYOR_DEVIANTART_URL": cfg.ExternalAPI.URL,
			}
			for _, q := range s.def.Queues {
				up := strings.ToUpper(string(q.Tier))
				env["CONVEYOR_QUEUE_URL_"+up] = ref(s.logicalID(t, "AWS::SQS::Queue", "QueueName", q.Name))
				env["CONVEYOR_DLQ_URL_"+up] = ref(s.logicalID(t, "AWS::SQS::Queue", "QueueName", q.DLQName))
				if fn == resources.FuncAdmin {
					env["CONVEYOR_ESM_UUID_"+up] = ref(s.esmFor(t, q))
				}
			}
			if fn == resources.FuncSchedules {
				// The users' recurring schedules (schedules.go).
				env["CONVEYOR_SCHEDULE_GROUP"] = s.def.ScheduleGroup
				env["CONVEYOR_SCHEDULE_TARGET_ARN"] = present{}
				env["CONVEYOR_SCHEDULE_ROLE_ARN"] = present{}
			}
			switch fn {
			case resources.FuncAPI, resources.FuncAdmin, resources.FuncUploads, resources.FuncSchedules, resources.FuncStream:
				env["CONVEYOR_JWT_SECRET_ARN"] = ref(s.logicalID(t, "AWS::SecretsManager::Secret", "Name", s.def.Prefix+"/jwt"))
			case resources.FuncPublisher:
				env["CONVEYOR_DEVIANTART_CLIENT_SECRET_ARN"] = ref(s.logicalID(t, "AWS::SecretsManager::Secret", "Name", stack.OAuthClientSecretName(s.def.Env)))
			case resources.FuncRelay:
				// The checked-in environments keep progress off the bus.
				env["CONVEYOR_BUS_EVENTS"] = string(job.BusLifecycle)
			}
			check(t, fn, func() {
				s.hasProps("AWS::Lambda::Function", obj(map[string]any{
					"FunctionName":                 name,
					"Runtime":                      "provided.al2023",
					"Architectures":                []any{"arm64"},
					"Handler":                      "bootstrap",
					"MemorySize":                   spec.MemoryMB,
					"Timeout":                      spec.Timeout.Seconds(),
					"LoggingConfig":                map[string]any{"LogGroup": ref(logs), "LogFormat": "JSON", "SystemLogLevel": cfg.SystemLevel(), "ApplicationLogLevel": "INFO"},
					"TracingConfig":                tracingConfig(cfg),
					"Environment":                  map[string]any{"Variables": obj(env)},
					"ReservedConcurrentExecutions": reservation(cfg, fn),
				}))
			})
			check(t, fn+" log retention", func() {
				s.hasProps("AWS::Logs::LogGroup", obj(map[string]any{
					"LogGroupName": "/aws/lambda/" + name, "RetentionInDays": retention,
				}))
			})
			// The secrets stay out of functions that may not read them.
			vars := s.res[s.functionID(t, fn)].Properties["Environment"].(map[string]any)["Variables"].(map[string]any)
			for k := range vars {
				if _, ok := env[k]; !ok {
					t.Errorf("%s: unexpected environment variable %s", fn, k)
				}
			}
		}
	})
}

func TestEventSourceMappings(t *testing.T) {
	t.Parallel()
	each(t, func(t *testing.T, s *synthesized) {
		conc := map[job.Tier]float64{}
		for _, q := range s.def.Queues {
			queue := s.logicalID(t, "AWS::SQS::Queue", "QueueName", q.Name)
			check(t, q.Name, func() {
				s.hasProps("AWS::Lambda::EventSourceMapping", obj(map[string]any{
					"EventSourceArn":        getAtt(queue, "Arn"),
					"FunctionName":          ref(s.functionID(t, q.Consumer)),
					"BatchSize":             q.BatchSize,
					"FunctionResponseTypes": []any{"ReportBatchItemFailures"},
					"ScalingConfig":         map[string]any{"MaximumConcurrency": q.MaxConcurrency},
				}))
			})
			for _, r := range s.ofType("AWS::Lambda::EventSourceMapping") {
				if cmp.Equal(r.Properties["EventSourceArn"], getAtt(queue, "Arn")) {
					conc[q.Tier] = r.Properties["ScalingConfig"].(map[string]any)["MaximumConcurrency"].(float64)
				}
			}
		}
		if !(conc[job.High] > conc[job.Medium] && conc[job.Medium] > conc[job.Low]) {
			t.Errorf("maximum concurrency high > medium > low does not hold: %v", conc)
		}
		check(t, "mapping count", func() {
			s.tmpl.ResourceCountIs(jsii.String("AWS::Lambda::EventSourceMapping"), jsii.Number(float64(len(s.def.Queues)+1))) // + the table stream
		})
	})
}

func TestHTTPAPIAndStreamURL(t *testing.T) {
	t.Parallel()
	each(t, func(t *testing.T, s *synthesized) {
		api := s.functionID(t, resources.FuncAPI)
		check(t, "integration", func() {
			s.hasProps("AWS::ApiGatewayV2::Integration", obj(map[string]any{
				"IntegrationType": "AWS_PROXY", "IntegrationUri": getAtt(api, "Arn"), "PayloadFormatVersion": "2.0",
			}))
		})
		check(t, "route", func() {
			s.hasProps("AWS::ApiGatewayV2::Route", obj(map[string]any{"RouteKey": "$default"}))
		})
		// Every admin route goes to the admin function, through its own
		// integration; the rest stays on the api function's $default.
		admin := s.functionID(t, resources.FuncAdmin)
		check(t, "admin integration", func() {
			s.hasProps("AWS::ApiGatewayV2::Integration", obj(map[string]any{
				"IntegrationType": "AWS_PROXY", "IntegrationUri": getAtt(admin, "Arn"), "PayloadFormatVersion": "2.0",
			}))
		})
		// The route table (resources.HTTPRoutes): each group's routes
		// target its function's own integration, and no other route than
		// those, the dashboard's and $default exists.
		routes := map[string]bool{"$default": true, "GET /dashboard": true, "GET /dashboard/{proxy+}": true,
			"HEAD /dashboard": true, "HEAD /dashboard/{proxy+}": true}
		for _, r := range resources.HTTPRoutes {
			integration := ""
			for id, res := range s.ofType("AWS::ApiGatewayV2::Integration") {
				if cmp.Equal(res.Properties["IntegrationUri"], getAtt(s.functionID(t, r.Function), "Arn")) {
					integration = id
				}
			}
			if integration == "" {
				t.Errorf("%s: no integration", r.Function)
				continue
			}
			for _, key := range r.RouteKeys() {
				routes[key] = true
				check(t, key, func() {
					s.hasProps("AWS::ApiGatewayV2::Route", obj(map[string]any{"RouteKey": key,
						"Target": map[string]any{"Fn::Join": []any{"", []any{"integrations/", ref(integration)}}}}))
				})
			}
		}
		for id, res := range s.ofType("AWS::ApiGatewayV2::Route") {
			if key, _ := res.Properties["RouteKey"].(string); !routes[key] {
				t.Errorf("route %s: %q is not in the route table", id, key)
			}
		}
		check(t, "access logs", func() {
			s.hasProps("AWS::ApiGatewayV2::Stage", obj(map[string]any{
				"StageName": "$default",
				"AccessLogSettings": obj(map[string]any{
					"DestinationArn": getAtt(s.logicalID(t, "AWS::Logs::LogGroup", "LogGroupName", "/aws/apigateway/"+s.def.Prefix+"-api"), "Arn"),
					"Format":         regex(`\$context\.requestId`),
				}),
			}))
		})
		check(t, "stream URL", func() {
			s.hasProps("AWS::Lambda::Url", obj(map[string]any{
				"TargetFunctionArn": getAtt(s.functionID(t, resources.FuncStream), "Arn"),
				"InvokeMode":        "RESPONSE_STREAM",
				"AuthType":          "NONE",
			}))
		})
	})
}

func TestSchedules(t *testing.T) {
	t.Parallel()
	each(t, func(t *testing.T, s *synthesized) {
		for _, sc := range s.def.Schedules {
			check(t, sc.Name, func() {
				s.hasProps("AWS::Scheduler::Schedule", obj(map[string]any{
					"Name":               sc.Name,
					"ScheduleExpression": sc.Expression,
					"State":              "ENABLED",
					"Target": obj(map[string]any{
						"Arn":   getAtt(s.functionID(t, sc.Function), "Arn"),
						"Input": present{},
					}),
				}))
			})
			id := s.logicalID(t, "AWS::Scheduler::Schedule", "Name", sc.Name)
			input, _ := json.Marshal(s.res[id].Properties["Target"].(map[string]any)["Input"])
			// The detail is the definition's: the task, and the shards
			// the schedule owns.
			want := []string{fmt.Sprintf(`\"task\":\"%s\"`, sc.Task)}
			if sc.Shards != nil {
				shards, _ := json.Marshal(sc.Shards)
				want = append(want, fmt.Sprintf(`\"shards\":%s`, shards))
			} else if strings.Contains(string(input), `\"shards\"`) {
				t.Errorf("%s: input %s names shards; the schedule sweeps every shard", sc.Name, input)
			}
			for _, w := range want {
				if !strings.Contains(string(input), w) {
					t.Errorf("%s: input %s lacks the detail %s", sc.Name, input, w)
				}
			}
		}
	})
}

func TestKeyBusSecrets(t *testing.T) {
	t.Parallel()
	each(t, func(t *testing.T, s *synthesized) {
		key := s.logicalID(t, "AWS::KMS::Alias", "AliasName", s.def.KMSAlias)
		target := s.res[key].Properties["TargetKeyId"]
		check(t, "token key", func() {
			s.hasProps("AWS::KMS::Key", obj(map[string]any{"EnableKeyRotation": true}))
		})
		keyID := target.(map[string]any)["Fn::GetAtt"].([]any)[0].(string)
		if rot := s.res[keyID].Properties["EnableKeyRotation"]; rot != true {
			t.Errorf("the aliased key %s has EnableKeyRotation %v", keyID, rot)
		}
		check(t, "event bus", func() {
			s.hasProps("AWS::Events::EventBus", obj(map[string]any{"Name": s.def.EventBus}))
		})
		for _, name := range []string{s.def.Prefix + "/jwt"} {
			check(t, name, func() {
				s.hasProps("AWS::SecretsManager::Secret", obj(map[string]any{
					"Name":                 name,
					"GenerateSecretString": obj(map[string]any{"PasswordLength": 64}),
				}))
			})
		}
		// The OAuth client secret starts with an empty clientId for an
		// operator to fill in (the publisher refuses to start until then).
		oauth := s.res[s.logicalID(t, "AWS::SecretsManager::Secret", "Name", stack.OAuthClientSecretName(s.def.Env))]
		if diff := cmp.Diff(map[string]any{"SecretStringTemplate": `{"clientId":""}`, "GenerateStringKey": "clientSecret",
			"PasswordLength": 32.0, "ExcludePunctuation": true}, oauth.Properties["GenerateSecretString"]); diff != "" {
			t.Errorf("OAuth client secret (-want +got):\n%s", diff)
		}
		if want := map[bool]string{true: "RetainExceptOnCreate", false: "Delete"}[s.def.Env.Production()]; oauth.DeletionPolicy != want {
			t.Errorf("OAuth client secret DeletionPolicy = %q, want %q", oauth.DeletionPolicy, want)
		}
	})
}

// oauthClientARN is the existing secret the by-ARN stack references.
const oauthClientARN = "arn:aws:secretsmanager:eu-west-1:123456789012:secret:conveyor/deviantart-oauth-client-AbCdEf"

// secretReads returns, per function, the resources its role may call
// secretsmanager:GetSecretValue on.
func secretReads(t *testing.T, s *synthesized) map[string][]any {
	t.Helper()
	out := map[string][]any{}
	for _, fn := range s.def.Functions {
		for _, doc := range policyDocs(t, s, fn) {
			for _, st := range doc.(map[string]any)["Statement"].([]any) {
				st := st.(map[string]any)
				if !slices.Contains(strs(st["Action"]), "secretsmanager:GetSecretValue") {
					continue
				}
				switch r := st["Resource"].(type) {
				case []any:
					out[fn] = append(out[fn], r...)
				default:
					out[fn] = append(out[fn], r)
				}
			}
		}
	}
	return out
}

func TestSecretsAreReadOnlyByTheirFunctions(t *testing.T) {
	t.Parallel()
	each(t, func(t *testing.T, s *synthesized) {
		secret := func(name string) any { return ref(s.logicalID(t, "AWS::SecretsManager::Secret", "Name", name)) }
		want := map[string][]any{
			resources.FuncAPI:       {secret(s.def.Prefix + "/jwt")},
			resources.FuncAdmin:     {secret(s.def.Prefix + "/jwt")},
			resources.FuncUploads:   {secret(s.def.Prefix + "/jwt")},
			resources.FuncSchedules: {secret(s.def.Prefix + "/jwt")},
			resources.FuncStream:    {secret(s.def.Prefix + "/jwt")},
			resources.FuncPublisher: {secret(stack.OAuthClientSecretName(s.def.Env))},
		}
		if diff := cmp.Diff(want, secretReads(t, s)); diff != "" {
			t.Errorf("GetSecretValue grants per function (-want +got):\n%s", diff)
		}
	})
}

func TestOAuthClientSecretByARN(t *testing.T) {
	t.Parallel()
	stacks(t)
	s := byARN
	if n := len(s.ofType("AWS::SecretsManager::Secret")); n != 1 {
		t.Errorf("%d secrets created, want 1 (the JWT key; webhook secrets are per user, sealed in the table; the OAuth client's is referenced)", n)
	}
	if diff := cmp.Diff(map[string][]any{
		resources.FuncAPI:       {ref(s.logicalID(t, "AWS::SecretsManager::Secret", "Name", s.def.Prefix+"/jwt"))},
		resources.FuncAdmin:     {ref(s.logicalID(t, "AWS::SecretsManager::Secret", "Name", s.def.Prefix+"/jwt"))},
		resources.FuncUploads:   {ref(s.logicalID(t, "AWS::SecretsManager::Secret", "Name", s.def.Prefix+"/jwt"))},
		resources.FuncSchedules: {ref(s.logicalID(t, "AWS::SecretsManager::Secret", "Name", s.def.Prefix+"/jwt"))},
		resources.FuncStream:    {ref(s.logicalID(t, "AWS::SecretsManager::Secret", "Name", s.def.Prefix+"/jwt"))},
		resources.FuncPublisher: {oauthClientARN},
	}, secretReads(t, s)); diff != "" {
		t.Errorf("GetSecretValue grants per function (-want +got):\n%s", diff)
	}
	for _, fn := range s.def.Functions {
		vars := s.res[s.functionID(t, fn)].Properties["Environment"].(map[string]any)["Variables"].(map[string]any)
		got, ok := vars["CONVEYOR_DEVIANTART_CLIENT_SECRET_ARN"]
		if want := resources.NeedsOAuthClient(fn); ok != want || (ok && got != oauthClientARN) {
			t.Errorf("%s: CONVEYOR_DEVIANTART_CLIENT_SECRET_ARN = %v (set %v), want set %v to %s", fn, got, ok, want, oauthClientARN)
		}
	}
}

func TestAlarmsAndDashboard(t *testing.T) {
	t.Parallel()
	each(t, func(t *testing.T, s *synthesized) {
		topics := s.ofType("AWS::SNS::Topic")
		if len(topics) != 1 {
			t.Fatalf("want one alarm topic, got %d", len(topics))
		}
		var topic string
		for id, r := range topics {
			topic = id
			if r.Properties["KmsMasterKeyId"] == nil {
				t.Error("alarm topic is not encrypted")
			}
		}
		alarm := func(what string, props map[string]any) {
			props["AlarmActions"] = []any{ref(topic)}
			check(t, what, func() { s.hasProps("AWS::CloudWatch::Alarm", obj(props)) })
		}
		queueDim := func(id string) []any {
			return []any{map[string]any{"Name": "QueueName", "Value": getAtt(id, "QueueName")}}
		}
		for _, q := range s.def.Queues {
			alarm("DLQ depth "+q.DLQName, map[string]any{
				"Namespace": "AWS/SQS", "MetricName": "ApproximateNumberOfMessagesVisible",
				"Dimensions":         queueDim(s.logicalID(t, "AWS::SQS::Queue", "QueueName", q.DLQName)),
				"ComparisonOperator": "GreaterThanThreshold", "Threshold": 0,
			})
			alarm("oldest message "+q.Name, map[string]any{
				"Namespace": "AWS/SQS", "MetricName": "ApproximateAgeOfOldestMessage",
				"Dimensions":         queueDim(s.logicalID(t, "AWS::SQS::Queue", "QueueName", q.Name)),
				"ComparisonOperator": "GreaterThanThreshold", "Threshold": stack.OldestMessageAlarmAfter[q.Tier].Seconds(),
			})
		}
		for _, fn := range s.def.Functions {
			for _, metric := range []string{"Errors", "Throttles"} {
				alarm(fn+" "+metric, map[string]any{
					"Namespace": "AWS/Lambda", "MetricName": metric,
					"Dimensions": []any{map[string]any{"Name": "FunctionName", "Value": ref(s.functionID(t, fn))}},
				})
			}
		}
		// One alarm per external host, on exactly {Environment, Host}:
		// token breakers (no Host) cannot feed it. Any datapoint ≥ 1 in the
		// last two 5-minute periods (the periodic gauge) keeps it on.
		for _, host := range stack.BreakerHosts(configs[s.def.Env]) {
			alarm("breaker open "+host, map[string]any{
				"AlarmName": s.def.Prefix + "-breaker-open-" + host,
				"Namespace": stack.BreakerNamespace, "MetricName": stack.BreakerMetricName,
				"Dimensions": []any{
					map[string]any{"Name": "Environment", "Value": string(s.def.Env)},
					map[string]any{"Name": "Host", "Value": host},
				},
				"Statistic": "Maximum", "Period": 300,
				"ComparisonOperator": "GreaterThanOrEqualToThreshold", "Threshold": 1,
				"EvaluationPeriods": 2, "DatapointsToAlarm": 1,
			})
		}
		if hosts := stack.BreakerHosts(configs[s.def.Env]); !slices.Contains(hosts, "www.deviantart.com") {
			t.Errorf("breaker hosts %v lack the external API's host", hosts)
		}
		for id, r := range s.ofType("AWS::CloudWatch::Alarm") {
			b, _ := json.Marshal(r.Properties)
			if strings.Contains(string(b), `"MetricName":"BreakerOpen"`) && !strings.Contains(string(b), `"Name":"Host"`) {
				t.Errorf("alarm %s watches BreakerOpen without a Host dimension", id)
			}
		}
		// Duration near the timeout, per function but the stream.
		for _, fn := range s.def.Functions {
			id := s.functionID(t, fn)
			limit := stack.FunctionSpecs[fn].Timeout.Seconds() * 1000 * stack.DurationNearTimeoutPercent / 100
			found := false
			for _, r := range s.ofType("AWS::CloudWatch::Alarm") {
				p := r.Properties
				if p["MetricName"] == "Duration" && cmp.Equal(p["Dimensions"], []any{map[string]any{"Name": "FunctionName", "Value": ref(id)}}) {
					found = true
					if p["Statistic"] != "Maximum" || p["Threshold"] != limit || p["ComparisonOperator"] != "GreaterThanThreshold" {
						t.Errorf("%s duration alarm: %v %v %v, want Maximum > %v ms", fn, p["Statistic"], p["ComparisonOperator"], p["Threshold"], limit)
					}
				}
			}
			if found != stack.DurationAlarmed(fn) {
				t.Errorf("%s: duration alarm present %v, want %v", fn, found, stack.DurationAlarmed(fn))
			}
		}
		// API 5xx rate and p99 latency, on the HTTP API.
		apiID := s.logicalID(t, "AWS::ApiGatewayV2::Api", "Name", s.def.Prefix+"-api")
		apiDim := []any{map[string]any{"Name": "ApiId", "Value": ref(apiID)}}
		alarm("api p99", map[string]any{
			"AlarmName": s.def.Prefix + "-api-latency-p99", "Namespace": "AWS/ApiGateway", "MetricName": "Latency",
			"Dimensions": apiDim, "ExtendedStatistic": "p99", "Threshold": stack.APILatencyP99.Seconds() * 1000,
			"ComparisonOperator": "GreaterThanThreshold",
		})
		alarm("api 5xx", map[string]any{
			"AlarmName": s.def.Prefix + "-api-5xx-rate", "Threshold": stack.APIServerErrorRatePercent,
			"Metrics": arrayWith(
				obj(map[string]any{"Id": "errors", "MetricStat": obj(map[string]any{"Metric": obj(map[string]any{
					"Namespace": "AWS/ApiGateway", "MetricName": "5xx", "Dimensions": apiDim})})}),
				obj(map[string]any{"Id": "requests", "MetricStat": obj(map[string]any{"Metric": obj(map[string]any{
					"Namespace": "AWS/ApiGateway", "MetricName": "Count", "Dimensions": apiDim})})}),
			),
		})
		// DynamoDB read and write throttles, on the table and each index.
		table := ref(s.logicalID(t, "AWS::DynamoDB::Table", "TableName", s.def.Table.Name))
		for _, op := range []string{"Read", "Write"} {
			items := []any{obj(map[string]any{"MetricStat": obj(map[string]any{"Metric": obj(map[string]any{
				"Namespace": "AWS/DynamoDB", "MetricName": op + "ThrottleEvents",
				"Dimensions": []any{map[string]any{"Name": "TableName", "Value": table}}})})})}
			for _, ix := range s.def.Table.Indexes {
				items = append(items, obj(map[string]any{"MetricStat": obj(map[string]any{"Metric": obj(map[string]any{
					"Namespace": "AWS/DynamoDB", "MetricName": op + "ThrottleEvents",
					"Dimensions": arrayWith(map[string]any{"Name": "GlobalSecondaryIndexName", "Value": ix.Name})})})}))
			}
			// At most 10 metrics per alarm: groups of ten, the table's first.
			for g := 0; g*10 < len(items); g++ {
				name := s.def.Prefix + "-dynamodb-" + strings.ToLower(op) + "-throttles"
				if g > 0 {
					name += fmt.Sprintf("-%d", g+1)
				}
				alarm(fmt.Sprintf("dynamodb %s throttles %d", op, g+1), map[string]any{
					"AlarmName": name, "Threshold": 0,
					"ComparisonOperator": "GreaterThanThreshold", "Metrics": arrayWith(items[g*10 : min((g+1)*10, len(items))]...),
				})
			}
		}
		// The confirm function's failed invocations.
		alarm("async failures", map[string]any{
			"Namespace": "AWS/SQS", "MetricName": "ApproximateNumberOfMessagesVisible",
			"Dimensions":         queueDim(s.logicalID(t, "AWS::SQS::Queue", "QueueName", s.def.AsyncFailureQueue)),
			"ComparisonOperator": "GreaterThanThreshold", "Threshold": 0,
		})
		// No subscription unless one is given (context alarmSubscription).
		if subs := s.ofType("AWS::SNS::Subscription"); len(subs) != 0 {
			t.Errorf("subscriptions without alarmSubscription: %v", subs)
		}
		check(t, "dashboard", func() {
			s.hasProps("AWS::CloudWatch::Dashboard", obj(map[string]any{"DashboardName": s.def.Prefix}))
		})
	})
}

// TestTemplateMatchesDefinition walks the definition of every cloud
// environment and finds each resource in the template under its name.
func TestTemplateMatchesDefinition(t *testing.T) {
	t.Parallel()
	each(t, func(t *testing.T, s *synthesized) {
		d := s.def
		if got, want := len(s.ofType("AWS::SQS::Queue")), 2*len(d.Queues)+2; got != want {
			t.Errorf("%d queues, want %d (a queue and a DLQ per tier, the relay's and the async failure queues)", got, want)
		}
		s.logicalID(t, "AWS::SQS::Queue", "QueueName", d.AsyncFailureQueue)
		for _, q := range d.Queues {
			main := s.res[s.logicalID(t, "AWS::SQS::Queue", "QueueName", q.Name)].Properties
			dlq := s.logicalID(t, "AWS::SQS::Queue", "QueueName", q.DLQName)
			if main["FifoQueue"] != true || s.res[dlq].Properties["FifoQueue"] != true {
				t.Errorf("%s: queue or DLQ is not FIFO", q.Tier)
			}
			want := map[string]any{"deadLetterTargetArn": getAtt(dlq, "Arn"), "maxReceiveCount": float64(q.MaxReceiveCount)}
			if diff := cmp.Diff(want, main["RedrivePolicy"]); diff != "" {
				t.Errorf("%s redrive (-want +got):\n%s", q.Name, diff)
			}
		}

		tables := s.ofType("AWS::DynamoDB::Table")
		if len(tables) != 1 {
			t.Fatalf("%d tables, want 1", len(tables))
		}
		tbl := s.res[s.logicalID(t, "AWS::DynamoDB::Table", "TableName", d.Table.Name)].Properties
		keySchema := func(pk, sk resources.Key) []any {
			return []any{
				map[string]any{"AttributeName": pk.Name, "KeyType": "HASH"},
				map[string]any{"AttributeName": sk.Name, "KeyType": "RANGE"},
			}
		}
		if diff := cmp.Diff(keySchema(d.Table.PartitionKey, d.Table.SortKey), tbl["KeySchema"]); diff != "" {
			t.Errorf("table keys (-want +got):\n%s", diff)
		}
		wantAttrs := map[string]string{}
		for _, k := range []resources.Key{d.Table.PartitionKey, d.Table.SortKey} {
			wantAttrs[k.Name] = string(k.Type)
		}
		var wantGSIs []any
		for _, ix := range d.Table.Indexes {
			wantAttrs[ix.PartitionKey.Name] = string(ix.PartitionKey.Type)
			wantAttrs[ix.SortKey.Name] = string(ix.SortKey.Type)
			projection := map[string]any{"ProjectionType": ix.Projection()}
			if len(ix.Include) > 0 {
				var inc []any
				for _, a := range ix.Include {
					inc = append(inc, a)
				}
				projection = map[string]any{"ProjectionType": "INCLUDE", "NonKeyAttributes": inc}
			}
			wantGSIs = append(wantGSIs, map[string]any{
				"IndexName":  ix.Name,
				"KeySchema":  keySchema(ix.PartitionKey, ix.SortKey),
				"Projection": projection,
			})
		}
		gotAttrs := map[string]string{}
		for _, a := range tbl["AttributeDefinitions"].([]any) {
			a := a.(map[string]any)
			gotAttrs[a["AttributeName"].(string)] = a["AttributeType"].(string)
		}
		if diff := cmp.Diff(wantAttrs, gotAttrs); diff != "" {
			t.Errorf("attribute definitions (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff(wantGSIs, tbl["GlobalSecondaryIndexes"]); diff != "" {
			t.Errorf("GSIs (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff(map[string]any{"AttributeName": d.Table.TTLAttribute, "Enabled": true}, tbl["TimeToLiveSpecification"]); diff != "" {
			t.Errorf("TTL (-want +got):\n%s", diff)
		}
		pitr, _ := tbl["PointInTimeRecoverySpecification"].(map[string]any)
		if pitr["PointInTimeRecoveryEnabled"] != d.Table.PointInTimeRecovery {
			t.Errorf("PITR = %v, want %v", pitr, d.Table.PointInTimeRecovery)
		}
		if want := configs[d.Env].TableDeletionProtection; tbl["DeletionProtectionEnabled"] != want {
			t.Errorf("deletion protection = %v, want %v (the configuration's)", tbl["DeletionProtectionEnabled"], want)
		}

		s.logicalID(t, "AWS::S3::Bucket", "BucketName", map[string]any{"Fn::Join": []any{"-", []any{d.Bucket.Name, ref("AWS::AccountId")}}})
		s.logicalID(t, "AWS::KMS::Alias", "AliasName", d.KMSAlias)
		s.logicalID(t, "AWS::Events::EventBus", "Name", d.EventBus)
		for _, sc := range d.Schedules {
			r := s.res[s.logicalID(t, "AWS::Scheduler::Schedule", "Name", sc.Name)].Properties
			if r["ScheduleExpression"] != sc.Expression {
				t.Errorf("%s: expression %v, want %s", sc.Name, r["ScheduleExpression"], sc.Expression)
			}
		}
		for _, fn := range d.Functions {
			s.functionID(t, fn)
		}
	})
}

// policyActions collects, per function, every action its role may take and
// the resources of each statement.
func policyActions(t *testing.T, s *synthesized) map[string][]string {
	t.Helper()
	roleOf := map[string]string{}
	for _, fn := range s.def.Functions {
		role := s.res[s.functionID(t, fn)].Properties["Role"].(map[string]any)["Fn::GetAtt"].([]any)[0].(string)
		roleOf[role] = fn
		if mp := s.res[role].Properties["ManagedPolicyArns"]; mp != nil {
			t.Errorf("%s: role has managed policies %v", fn, mp)
		}
	}
	out := map[string][]string{}
	for id, p := range s.ofType("AWS::IAM::Policy") {
		for _, r := range p.Properties["Roles"].([]any) {
			fn, ok := roleOf[r.(map[string]any)["Ref"].(string)]
			if !ok {
				continue
			}
			for _, st := range p.Properties["PolicyDocument"].(map[string]any)["Statement"].([]any) {
				st := st.(map[string]any)
				if st["Effect"] != "Allow" {
					t.Errorf("%s: unexpected %v statement", id, st["Effect"])
				}
				out[fn] = append(out[fn], strs(st["Action"])...)
				if slices.Contains(strs(st["Resource"]), "*") && !allXRay(strs(st["Action"])) {
					t.Errorf("%s: actions %v on resource *", fn, st["Action"])
				}
			}
		}
	}
	for fn := range out {
		sort.Strings(out[fn])
		out[fn] = slices.Compact(out[fn])
	}
	return out
}

func strs(v any) []string {
	switch v := v.(type) {
	case string:
		return []string{v}
	case []any:
		var out []string
		for _, x := range v {
			if s, ok := x.(string); ok {
				out = append(out, s)
			}
		}
		return out
	}
	return nil
}

// allXRay reports whether every action is one that supports no
// resource-level permissions: X-Ray's, and dynamodb:ListStreams (which the
// relay's stream mapping needs).
func allXRay(actions []string) bool {
	for _, a := range actions {
		if !strings.HasPrefix(a, "xray:") && a != "dynamodb:ListStreams" {
			return false
		}
	}
	return true
}

func TestLeastPrivilege(t *testing.T) {
	t.Parallel()
	logs := []string{"logs:CreateLogStream", "logs:PutLogEvents", "xray:PutTelemetryRecords", "xray:PutTraceSegments"}
	rw := []string{"dynamodb:BatchGetItem", "dynamodb:ConditionCheckItem", "dynamodb:DeleteItem", "dynamodb:GetItem",
		"dynamodb:PutItem", "dynamodb:Query", "dynamodb:UpdateItem"}
	consume := []string{"sqs:ChangeMessageVisibility", "sqs:DeleteMessage", "sqs:GetQueueAttributes", "sqs:GetQueueUrl", "sqs:ReceiveMessage"}
	// What each function's code calls (internal/handler wires it), as the IAM
	// conformance check (localstack/iamcheck, docs/iam.md) finds it: the
	// api seals tokens but never opens one (it opens webhook signing
	// secrets), and touches neither S3 nor Scheduler (the uploads and
	// schedules functions serve those routes); the admin function alone
	// holds the admin powers (it serves the admin routes) and touches
	// neither S3 nor KMS; only the relay puts events on the bus, and it
	// reads and rebuilds the webhook endpoints' summaries in the table; the
	// publisher sends no message; uploads, confirm and publisher may list
	// the upload prefix (a missing object is a 404, not a 403).
	want := map[string][]string{
		resources.FuncAPI: concat(logs, rw, []string{"kms:Decrypt", "kms:GenerateDataKey",
			"secretsmanager:GetSecretValue", "sqs:SendMessage"}),
		resources.FuncUploads: concat(logs, []string{"dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:UpdateItem",
			"s3:GetObject", "s3:ListBucket", "s3:PutObject", "secretsmanager:GetSecretValue"}),
		resources.FuncSchedules: concat(logs, []string{"dynamodb:DeleteItem", "dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:Query", "dynamodb:UpdateItem",
			"kms:GenerateDataKey", "secretsmanager:GetSecretValue"}, userScheduleActions),
		resources.FuncAdmin: concat(logs, without(rw, "dynamodb:ConditionCheckItem"), []string{"lambda:UpdateEventSourceMapping",
			"secretsmanager:GetSecretValue", "sqs:ChangeMessageVisibility", "sqs:DeleteMessage",
			"sqs:GetQueueAttributes", "sqs:ReceiveMessage", "sqs:SendMessage", "sqs:StartMessageMoveTask"}),
		// confirm also sends its failed invocations to the failure queue
		// (the on-failure destination): SendMessage only.
		resources.FuncConfirm: concat(logs, []string{"dynamodb:GetItem", "dynamodb:UpdateItem", "s3:GetObject", "s3:ListBucket",
			"sqs:SendMessage"}),
		resources.FuncPublisher: concat(logs, rw, consume, []string{"kms:Decrypt", "kms:GenerateDataKey", "s3:GetObject", "s3:ListBucket",
			"secretsmanager:GetSecretValue", "sqs:SendMessage"}),
		resources.FuncSystem: concat(logs, without(rw, "dynamodb:ConditionCheckItem", "dynamodb:DeleteItem"), consume,
			[]string{"kms:Decrypt", "kms:GenerateDataKey", "sqs:SendMessage"}),
		resources.FuncRecovery: concat(logs, without(rw, "dynamodb:DeleteItem"), []string{"kms:Decrypt", "kms:GenerateDataKey", "s3:DeleteObject", "sqs:SendMessage"}),
		// The stream read (granted by the event source), PutEvents,
		// SendMessage to the system tier and the on-failure queue only, and
		// the endpoint summaries (read, rebuilt).
		resources.FuncRelay: concat(logs, []string{"dynamodb:BatchGetItem", "dynamodb:DescribeStream", "dynamodb:GetRecords", "dynamodb:GetShardIterator",
			"dynamodb:ListStreams", "dynamodb:PutItem", "dynamodb:Query", "events:PutEvents", "sqs:GetQueueAttributes", "sqs:GetQueueUrl", "sqs:SendMessage"}),
		resources.FuncStream: concat(logs, []string{"dynamodb:BatchGetItem", "dynamodb:GetItem", "dynamodb:Query", "secretsmanager:GetSecretValue",
			"dynamodb:PutItem", "dynamodb:UpdateItem", "dynamodb:DeleteItem"}),
	}
	// The purposes of the secrets each function seals (GenerateDataKey)
	// and opens (Decrypt): every KMS grant is conditioned on exactly these.
	purposes := map[string]map[string][]string{
		resources.FuncAPI: {"kms:GenerateDataKey": {envelope.PurposeAccountToken, envelope.PurposeWebhookSigning, envelope.PurposeHTTPHeaders},
			"kms:Decrypt": {envelope.PurposeWebhookSigning}},
		resources.FuncPublisher: {"kms:Decrypt": {envelope.PurposeAccountToken, envelope.PurposeHTTPHeaders},
			"kms:GenerateDataKey": {envelope.PurposeAccountToken}},
		resources.FuncSystem:    {"kms:Decrypt": {envelope.PurposeWebhookSigning}, "kms:GenerateDataKey": {envelope.PurposeWebhookSigning}},
		resources.FuncRecovery:  {"kms:GenerateDataKey": {envelope.PurposeHTTPHeaders}, "kms:Decrypt": {envelope.PurposeScheduleTemplate}},
		resources.FuncSchedules: {"kms:GenerateDataKey": {envelope.PurposeScheduleTemplate}},
	}
	for fn := range want {
		sort.Strings(want[fn])
		want[fn] = slices.Compact(want[fn])
	}
	each(t, func(t *testing.T, s *synthesized) {
		got := policyActions(t, s)
		want := want
		if !configs[s.def.Env].Tracing.Enabled {
			// No X-Ray grant without active tracing.
			traced := want
			want = map[string][]string{}
			for fn, actions := range traced {
				want[fn] = slices.DeleteFunc(slices.Clone(actions), func(a string) bool { return strings.HasPrefix(a, "xray:") })
			}
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("actions per function (-want +got):\n%s", diff)
		}
		// confirm's SQS actions reach the failure queue and nothing else;
		// the admin powers (DLQ and mapping) are on no other role.
		failures := getAtt(s.logicalID(t, "AWS::SQS::Queue", "QueueName", s.def.AsyncFailureQueue), "Arn")
		for _, doc := range policyDocs(t, s, resources.FuncConfirm) {
			for _, st := range doc.(map[string]any)["Statement"].([]any) {
				st := st.(map[string]any)
				if slices.ContainsFunc(strs(st["Action"]), func(a string) bool { return strings.HasPrefix(a, "sqs:") }) &&
					!cmp.Equal(st["Resource"], failures) {
					t.Errorf("confirm may %v on %v, want only the failure queue", st["Action"], st["Resource"])
				}
			}
		}
		// Every asynchronously invoked function may send to the failure
		// queue (its on-failure destination), and do nothing else there.
		for _, fn := range s.def.AsyncInvoked() {
			sends := 0
			for _, doc := range policyDocs(t, s, fn) {
				for _, st := range doc.(map[string]any)["Statement"].([]any) {
					st := st.(map[string]any)
					// CDK merges statements of the same actions: the
					// failure queue may be one of several resources.
					res, _ := st["Resource"].([]any)
					if !cmp.Equal(st["Resource"], failures) && !slices.ContainsFunc(res, func(r any) bool { return cmp.Equal(r, failures) }) {
						continue
					}
					if a := strs(st["Action"]); !slices.Equal(a, []string{"sqs:SendMessage"}) {
						t.Errorf("%s may %v on the failure queue, want sqs:SendMessage only", fn, a)
					}
					sends++
				}
			}
			if sends == 0 {
				t.Errorf("%s: no statement on the failure queue, want sqs:SendMessage (its on-failure destination)", fn)
			}
		}
		for fn, actions := range got {
			if fn == resources.FuncAdmin {
				continue
			}
			for _, a := range actions {
				if a == "sqs:StartMessageMoveTask" || a == "lambda:UpdateEventSourceMapping" {
					t.Errorf("%s may %s", fn, a)
				}
			}
		}
		// KMS: each action in one statement, on the key, for its purposes.
		got2 := map[string]map[string][]string{}
		for _, fn := range s.def.Functions {
			for _, doc := range policyDocs(t, s, fn) {
				for _, st := range doc.(map[string]any)["Statement"].([]any) {
					st := st.(map[string]any)
					for _, a := range strs(st["Action"]) {
						if a == "s3:ListBucket" {
							// Listing is for the upload prefix only.
							cond, _ := st["Condition"].(map[string]any)
							like, _ := cond["StringLike"].(map[string]any)
							if p := strs(like["s3:prefix"]); !slices.Equal(p, []string{s.def.Bucket.UploadPrefix + "*"}) {
								t.Errorf("%s may list the bucket under %v, want only %s*", fn, p, s.def.Bucket.UploadPrefix)
							}
						}
						if !strings.HasPrefix(a, "kms:") {
							continue
						}
						cond, _ := st["Condition"].(map[string]any)
						eq, _ := cond["StringEquals"].(map[string]any)
						if got2[fn] == nil {
							got2[fn] = map[string][]string{}
						}
						got2[fn][a] = append(got2[fn][a], strs(eq[stack.PurposeCondition])...)
					}
				}
			}
		}
		if diff := cmp.Diff(purposes, got2); diff != "" {
			t.Errorf("KMS purposes per function and action (-want +got):\n%s", diff)
		}
		// No statement anywhere in the template scans the table or uses
		// an action wildcard.
		for id, p := range s.ofType("AWS::IAM::Policy") {
			for _, st := range p.Properties["PolicyDocument"].(map[string]any)["Statement"].([]any) {
				for _, a := range strs(st.(map[string]any)["Action"]) {
					if a == "dynamodb:Scan" || strings.Contains(a, "*") {
						t.Errorf("%s allows %s", id, a)
					}
				}
			}
		}
		// Recovery queries only the sweep index; the stream only the two
		// indexes of a caller's jobs; publisher and confirm none.
		allowed := map[string]map[string]bool{
			resources.FuncRecovery: {resources.IndexBySweep: true},
			resources.FuncStream:   {resources.IndexByOwner: true, resources.IndexByOwnerUpdated: true, resources.IndexByFeed: true},
		}
		for _, fn := range []string{resources.FuncRecovery, resources.FuncPublisher, resources.FuncConfirm, resources.FuncStream} {
			b, _ := json.Marshal(policyDocs(t, s, fn))
			for _, ix := range s.def.Table.Indexes {
				if strings.Contains(string(b), "/index/"+ix.Name+`"`) != allowed[fn][ix.Name] {
					t.Errorf("%s: access to index %s is not as intended", fn, ix.Name)
				}
			}
		}
	})
}

func policyDocs(t *testing.T, s *synthesized, fn string) []any {
	role := s.res[s.functionID(t, fn)].Properties["Role"].(map[string]any)["Fn::GetAtt"].([]any)[0].(string)
	var docs []any
	for _, p := range s.ofType("AWS::IAM::Policy") {
		for _, r := range p.Properties["Roles"].([]any) {
			if r.(map[string]any)["Ref"] == role {
				docs = append(docs, p.Properties["PolicyDocument"])
			}
		}
	}
	return docs
}

// without is set less drop.
func without(set []string, drop ...string) []string {
	return slices.DeleteFunc(slices.Clone(set), func(a string) bool { return slices.Contains(drop, a) })
}

func concat(sets ...[]string) []string {
	var out []string
	for _, s := range sets {
		out = append(out, s...)
	}
	return out
}

// TestNoUnsuppressedNagFindings: cdk-nag's AwsSolutions pack reports
// nothing that is not suppressed with a reason.
func TestNoUnsuppressedNagFindings(t *testing.T) {
	t.Parallel()
	each(t, func(t *testing.T, s *synthesized) {
		jsiiMu.Lock()
		defer jsiiMu.Unlock()
		ann := assertions.Annotations_FromStack(s.stack)
		pattern := assertions.Match_StringLikeRegexp(jsii.String("AwsSolutions-.*"))
		report := func(level string, found any) {
			b, _ := json.Marshal(found)
			var msgs []struct {
				ID    string `json:"id"`
				Entry struct {
					Data any `json:"data"`
				} `json:"entry"`
			}
			_ = json.Unmarshal(b, &msgs)
			for _, m := range msgs {
				t.Errorf("unsuppressed cdk-nag %s at %s: %v", level, m.ID, m.Entry.Data)
			}
		}
		report("error", ann.FindError(jsii.String("*"), pattern))
		report("warning", ann.FindWarning(jsii.String("*"), pattern))
	})
}

func TestEmulatorSynthesizer(t *testing.T) {
	t.Parallel()
	s := stacks(t)[job.Staging]
	if rules, _ := s.raw["Rules"].(map[string]any); rules["CheckBootstrapVersion"] == nil {
		t.Error("the default synthesizer lost its bootstrap-version rule")
	}
	if rules, ok := emulator.raw["Rules"].(map[string]any); ok {
		if _, ok := rules["CheckBootstrapVersion"]; ok {
			t.Error("the emulator template checks the bootstrap version")
		}
	}
	if params, ok := emulator.raw["Parameters"].(map[string]any); ok {
		if _, ok := params["BootstrapVersion"]; ok {
			t.Error("the emulator template has a BootstrapVersion parameter")
		}
	}
}

func TestMissingBootstrapFailsClearly(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if err := writeBootstraps(dir, resources.FuncAPI, resources.FuncConfirm); err != nil {
		t.Fatal(err)
	}
	err := stack.CheckAssets(dir, resources.For(job.Staging))
	if err == nil || !strings.Contains(err.Error(), filepath.Join(dir, resources.FuncPublisher, "bootstrap")) ||
		!strings.Contains(err.Error(), "make build") || strings.Contains(err.Error(), filepath.Join(dir, resources.FuncAPI, "bootstrap")) {
		t.Errorf("CheckAssets = %v, want the missing bootstraps named and `make build` suggested", err)
	}
	got := func() (r any) {
		defer func() { r = recover() }()
		stack.New(nil, "Conveyor-staging", stack.Props{Env: job.Staging, FunctionsDir: dir})
		return nil
	}()
	if msg, _ := got.(string); !strings.Contains(msg, "make build") {
		t.Errorf("New with a missing bootstrap: panic %v, want one suggesting `make build`", got)
	}
	got = func() (r any) {
		defer func() { r = recover() }()
		stack.New(nil, "Conveyor-local", stack.Props{Env: job.Local, FunctionsDir: functionsDir})
		return nil
	}()
	if msg, _ := got.(string); !strings.Contains(msg, "not a cloud environment") {
		t.Errorf("New for local: panic %v, want a refusal", got)
	}
}

// The bucket lifecycle may not delete an object that a job may still need:
// the synthesized expiration of uploads/ covers the longest allowed
// scheduleAt, the use window, the run margin and the stale stage.
func TestUploadLifecycleCoversTheRetentionHorizon(t *testing.T) {
	t.Parallel()
	each(t, func(t *testing.T, s *synthesized) {
		bk := s.def.Bucket
		id := s.logicalID(t, "AWS::S3::Bucket", "BucketName", map[string]any{"Fn::Join": []any{"-", []any{bk.Name, ref("AWS::AccountId")}}})
		lc, _ := s.res[id].Properties["LifecycleConfiguration"].(map[string]any)
		rules, _ := lc["Rules"].([]any)
		found := false
		for _, r := range rules {
			rule, _ := r.(map[string]any)
			if rule["Prefix"] != bk.UploadPrefix {
				continue
			}
			found = true
			days, ok := rule["ExpirationInDays"].(float64)
			if !ok {
				t.Fatalf("the %s rule has no ExpirationInDays: %v", bk.UploadPrefix, rule)
			}
			if got := time.Duration(days) * 24 * time.Hour; got < resources.UploadObjectHorizon {
				t.Errorf("uploads expire after %v, before the retention horizon %v", got, resources.UploadObjectHorizon)
			}
			if floor := resources.MaxScheduleAhead + resources.MaxStaleAfter; time.Duration(days)*24*time.Hour < floor {
				t.Errorf("uploads expire after %v days, before the longest scheduleAt plus the stale stage (%v)", days, floor)
			}
		}
		if !found {
			t.Errorf("no lifecycle rule for %s", bk.UploadPrefix)
		}
	})
}

func TestAlarmSubscriptions(t *testing.T) {
	t.Parallel()
	stacks(t)
	s := byARN
	topic := ""
	for id := range s.ofType("AWS::SNS::Topic") {
		topic = id
	}
	for _, sub := range []struct{ protocol, endpoint string }{{"email", alarmSubscriptions[0]}, {"https", alarmSubscriptions[1]}} {
		check(t, sub.protocol, func() {
			s.hasProps("AWS::SNS::Subscription", map[string]any{
				"Protocol": sub.protocol, "Endpoint": sub.endpoint, "TopicArn": ref(topic),
			})
		})
	}
	if n := len(s.ofType("AWS::SNS::Subscription")); n != 2 {
		t.Errorf("%d subscriptions, want 2", n)
	}
}

func TestParseAlarmSubscriptions(t *testing.T) {
	t.Parallel()
	got, err := stack.ParseAlarmSubscriptions(" ops@example.com, https://hooks.example.com/sns?x=1 ,,")
	if diff := cmp.Diff([]string{"ops@example.com", "https://hooks.example.com/sns?x=1"}, got); err != nil || diff != "" {
		t.Errorf("ParseAlarmSubscriptions: %v (-want +got):\n%s", err, diff)
	}
	if got, err := stack.ParseAlarmSubscriptions(""); err != nil || len(got) != 0 {
		t.Errorf("empty: %v, %v; want none", got, err)
	}
	for _, bad := range []string{"http://hooks.example.com/sns", "ops", "Ops <ops@example.com>", "ftp://x", "https://", "https://u:p@x.example"} {
		if _, err := stack.ParseAlarmSubscriptions("ops@example.com," + bad); err == nil || !strings.Contains(err.Error(), bad) {
			t.Errorf("%q: error %v, want a refusal naming it", bad, err)
		}
	}
}

// Every asynchronously invoked function (S3 invokes confirm, EventBridge
// Scheduler invokes recovery with the sweeps and the users' schedule
// ticks) has its invoke configuration: its retries, its maximum event age,
// and the failure queue as its on-failure destination, so that no event
// Lambda gives up on is dropped.
func TestAsyncInvokedFunctionsKeepTheirFailures(t *testing.T) {
	t.Parallel()
	each(t, func(t *testing.T, s *synthesized) {
		failures := s.logicalID(t, "AWS::SQS::Queue", "QueueName", s.def.AsyncFailureQueue)
		fns := s.def.AsyncInvoked()
		for _, want := range []string{s.def.Bucket.NotifyFunction, resources.FuncRecovery} {
			if !slices.Contains(fns, want) {
				t.Errorf("AsyncInvoked() = %v, want %s among them", fns, want)
			}
		}
		// Every schedule's target (the template's, not the definition's)
		// is among them.
		for id, r := range s.ofType("AWS::Scheduler::Schedule") {
			arn := r.Properties["Target"].(map[string]any)["Arn"]
			found := false
			for _, fn := range fns {
				found = found || cmp.Equal(arn, getAtt(s.functionID(t, fn), "Arn"))
			}
			if !found {
				t.Errorf("schedule %s invokes %v, which has no invoke configuration", id, arn)
			}
		}
		for _, fn := range fns {
			cfg := resources.AsyncInvokes[fn]
			check(t, fn+" event invoke config", func() {
				s.hasProps("AWS::Lambda::EventInvokeConfig", obj(map[string]any{
					"FunctionName":             ref(s.functionID(t, fn)),
					"Qualifier":                "$LATEST",
					"MaximumRetryAttempts":     cfg.RetryAttempts,
					"MaximumEventAgeInSeconds": cfg.MaxEventAge.Seconds(),
					"DestinationConfig":        map[string]any{"OnFailure": map[string]any{"Destination": getAtt(failures, "Arn")}},
				}))
			})
		}
		if n := len(s.ofType("AWS::Lambda::EventInvokeConfig")); n != len(fns) {
			t.Errorf("%d event invoke configs, want %d (%v)", n, len(fns), fns)
		}
		check(t, "failure queue", func() {
			s.hasProps("AWS::SQS::Queue", obj(map[string]any{
				"QueueName": s.def.AsyncFailureQueue, "FifoQueue": absent{}, "SqsManagedSseEnabled": true,
				"MessageRetentionPeriod": 14 * 24 * 3600,
			}))
		})
	})
}

// Recovery's ticks and sweeps: retried twice, kept an hour, then on the
// failure queue (resources.AsyncInvokes says why).
func TestRecoveryInvokeConfiguration(t *testing.T) {
	t.Parallel()
	each(t, func(t *testing.T, s *synthesized) {
		failures := s.logicalID(t, "AWS::SQS::Queue", "QueueName", s.def.AsyncFailureQueue)
		check(t, "recovery event invoke config", func() {
			s.hasProps("AWS::Lambda::EventInvokeConfig", obj(map[string]any{
				"FunctionName":             ref(s.functionID(t, resources.FuncRecovery)),
				"Qualifier":                "$LATEST",
				"MaximumRetryAttempts":     2,
				"MaximumEventAgeInSeconds": 3600,
				"DestinationConfig":        map[string]any{"OnFailure": map[string]any{"Destination": getAtt(failures, "Arn")}},
			}))
		})
	})
}

// The dashboard is served by the api function under /dashboard/, and the
// stack says where.
func TestDashboardRouted(t *testing.T) {
	t.Parallel()
	each(t, func(t *testing.T, s *synthesized) {
		api := s.functionID(t, resources.FuncAPI)
		integration := ""
		for id, r := range s.ofType("AWS::ApiGatewayV2::Integration") {
			if cmp.Equal(r.Properties["IntegrationUri"], getAtt(api, "Arn")) {
				integration = id
			}
		}
		if integration == "" {
			t.Fatal("no integration with the api function")
		}
		target := map[string]any{"Fn::Join": []any{"", []any{"integrations/", ref(integration)}}}
		for _, key := range []string{"GET /dashboard", "GET /dashboard/{proxy+}", "HEAD /dashboard/{proxy+}"} {
			check(t, key, func() {
				s.hasProps("AWS::ApiGatewayV2::Route", obj(map[string]any{"RouteKey": key, "Target": target}))
			})
		}
		out, _ := s.raw["Outputs"].(map[string]any)
		dash, _ := out["DashboardUrl"].(map[string]any)
		b, _ := json.Marshal(dash["Value"])
		apiID := s.logicalID(t, "AWS::ApiGatewayV2::Api", "Name", s.def.Prefix+"-api")
		if !strings.Contains(string(b), `"`+stack.DashboardPath+`"`) || !strings.Contains(string(b), apiID) {
			t.Errorf("DashboardUrl output = %s, want the API's endpoint followed by %s", b, stack.DashboardPath)
		}
	})
}

const boundAccount, boundRegion = "123456789012", "eu-west-1" // alarmTopicARN's

// TestAnEnvironmentWithAnAccountIsBoundToIt: a configuration that names
// its account and region synthesizes a stack bound to them, which the CDK
// CLI refuses to deploy with another account's credentials or into
// another region; one that names none stays environment-agnostic.
func TestAnEnvironmentWithAnAccountIsBoundToIt(t *testing.T) {
	t.Parallel()
	staging := stacks(t)[job.Staging].stack
	jsiiMu.Lock() // the jsii kernel takes one call at a time
	a, r, agnostic := deref(byTopic.stack.Account()), deref(byTopic.stack.Region()), deref(staging.Account())
	jsiiMu.Unlock()
	if a != boundAccount || r != boundRegion {
		t.Errorf("a configured account and region: the stack is for %s in %s, want %s in %s", a, r, boundAccount, boundRegion)
	}
	if a := agnostic; !strings.HasPrefix(a, "${Token[") {
		t.Errorf("no account configured: the stack is for %q, want the deploying credentials' account (a token)", a)
	}
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
