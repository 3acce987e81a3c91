package iamcheck_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/conveyor/conveyor/internal/aws/awsenv"
	"github.com/conveyor/conveyor/internal/job"
	"github.com/conveyor/conveyor/internal/resources"
	"github.com/conveyor/conveyor/localstack/iamcheck"
	"github.com/conveyor/conveyor/localstack/lambdaruntime"
)

// template is a small synthesized-like template: the relay's role with a
// table grant built with Fn::Join and Fn::GetAtt, a KMS grant scoped to a
// purpose, one unscoped; the bucket named with the account id.
const template = `{"Resources": {
  "Table": {"Type": "AWS::DynamoDB::Table", "Properties": {"TableName": "conveyor-staging"}},
  "Bucket": {"Type": "AWS::S3::Bucket", "Properties": {"BucketName": {"Fn::Join": ["-", ["conveyor-staging-uploads", {"Ref": "AWS::AccountId"}]]}}},
  "Key": {"Type": "AWS::KMS::Key", "Properties": {"KeyPolicy": {"Version": "2012-10-17", "Statement": [
    {"Effect": "Allow", "Principal": {"AWS": {"Fn::Join": ["", ["arn:", {"Ref": "AWS::Partition"}, ":iam::", {"Ref": "AWS::AccountId"}, ":root"]]}}, "Action": "kms:*", "Resource": "*"}]}}},
  "Alias": {"Type": "AWS::KMS::Alias", "Properties": {"AliasName": "alias/conveyor-staging", "TargetKeyId": {"Fn::GetAtt": ["Key", "Arn"]}}},
  "RelayRole": {"Type": "AWS::IAM::Role", "Properties": {}},
  "RelayFunction": {"Type": "AWS::Lambda::Function", "Properties": {"FunctionName": "conveyor-staging-relay", "Role": {"Fn::GetAtt": ["RelayRole", "Arn"]}}},
  "RelayPolicy": {"Type": "AWS::IAM::Policy", "Properties": {"Roles": [{"Ref": "RelayRole"}], "PolicyDocument": {"Version": "2012-10-17", "Statement": [
    {"Effect": "Allow", "Action": ["dynamodb:Query", "dynamodb:PutItem"], "Resource": [{"Fn::GetAtt": ["Table", "Arn"]}, {"Fn::Join": ["", [{"Fn::GetAtt": ["Table", "Arn"]}, "/index/byOwner"]]}]},
    {"Effect": "Allow", "Action": "s3:GetObject", "Resource": {"Fn::Join": ["", [{"Fn::GetAtt": ["Bucket", "Arn"]}, "/uploads/*"]]}},
    {"Effect": "Allow", "Action": "kms:Decrypt", "Resource": {"Fn::GetAtt": ["Key", "Arn"]}, "Condition": {"StringEquals": {"kms:EncryptionContext:purpose": ["webhook-signing"]}}},
    {"Effect": "Allow", "Action": "kms:GenerateDataKey", "Resource": {"Fn::GetAtt": ["Key", "Arn"]}}
  ]}}}
}}`

const keyARN = "arn:aws:kms:us-east-1:123456789012:key/local-key"

func parse(t *testing.T) (*iamcheck.Template, resources.Definition) {
	t.Helper()
	cloud := resources.For(job.Staging)
	cloud.Functions = []string{resources.FuncRelay}
	local := resources.Named(job.Local, "t-local")
	tmpl, err := iamcheck.ParseTemplate([]byte(template), iamcheck.Mapping{Cloud: cloud, Local: local, Account: lambdaruntime.AccountID,
		Region: "us-east-1", KMSKeyARN: keyARN})
	if err != nil {
		t.Fatal(err)
	}
	return tmpl, local
}

// TestTemplateResolvesIntoLocalARNs: the role's statements name the local
// stack's table, index, bucket (no account suffix) and key.
func TestTemplateResolvesIntoLocalARNs(t *testing.T) {
	t.Parallel()
	tmpl, _ := parse(t)
	role := tmpl.Roles[resources.FuncRelay]
	if role == nil || len(role.Policies) != 1 {
		t.Fatalf("relay role: %+v", role)
	}
	var got []any
	for _, st := range role.Policies[0]["Statement"].([]any) {
		got = append(got, st.(map[string]any)["Resource"])
	}
	table := "arn:aws:dynamodb:us-east-1:123456789012:table/t-local"
	want := []any{[]any{table, table + "/index/byOwner"}, "arn:aws:s3:::t-local-uploads/uploads/*", keyARN, keyARN}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("resources (-want +got):\n%s", diff)
	}
	if _, ok := tmpl.ResourcePolicies[keyARN]; !ok {
		t.Errorf("the key's policy is not the local key's: %v", tmpl.ResourcePolicies)
	}
}

// TestUnexercisedAndUnscoped: a grant no call used must be listed; a listed
// grant a call uses, or that is not granted, is stale; a KMS grant without
// a purpose condition is unscoped; a scoped one counts per purpose.
func TestUnexercisedAndUnscoped(t *testing.T) {
	t.Parallel()
	tmpl, local := parse(t)
	calls := []awsenv.Call{
		{Function: "relay", Access: awsenv.Access{Action: "dynamodb:Query", Resource: "x"}},
		{Function: "relay", Access: awsenv.Access{Action: "kms:Decrypt", Resource: keyARN, Context: map[string]string{iamcheck.PurposeKey: "webhook-signing"}}},
	}
	allow := iamcheck.AllowList{
		{Functions: []string{"relay"}, Actions: []string{"s3:GetObject", "dynamodb:Query", "sqs:SendMessage"}, Reason: "test"},
	}
	missing, stale, listed := iamcheck.Unexercised(tmpl, calls, local.Functions, allow)
	if diff := cmp.Diff([]iamcheck.Grant{{"relay", "dynamodb:PutItem"}, {"relay", "kms:GenerateDataKey"}}, missing); diff != "" {
		t.Errorf("missing (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]iamcheck.Grant{{"relay", "dynamodb:Query"}, {"relay", "sqs:SendMessage"}}, stale); diff != "" {
		t.Errorf("stale (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[iamcheck.Grant]string{{"relay", "s3:GetObject"}: "test"}, listed); diff != "" {
		t.Errorf("listed (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]iamcheck.Grant{{"relay", "kms:GenerateDataKey"}}, iamcheck.Unscoped(tmpl)); diff != "" {
		t.Errorf("unscoped (-want +got):\n%s", diff)
	}
}

// TestDeniedEvaluatesWithIAMSimulate runs the real evaluator (when `make
// iam-simulate` installed it): the right purpose, table and index pass;
// another purpose, another index and an underivable resource are findings.
func TestDeniedEvaluatesWithIAMSimulate(t *testing.T) {
	t.Parallel()
	root, err := lambdaruntime.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	ev := iamcheck.Evaluator{Script: filepath.Join(root, "infra", "iam", "simulate.mjs"), Modules: filepath.Join(root, ".cache", "iam-simulate", "node_modules")}
	if _, err := os.Stat(filepath.Join(ev.Modules, "@cloud-copilot", "iam-simulate")); err != nil {
		t.Skip("iam-simulate is not installed (make iam-simulate)")
	}
	if _, err := exec.LookPath("node"); err != nil {
		t.Skip("node is not installed")
	}
	tmpl, _ := parse(t)
	table := "arn:aws:dynamodb:us-east-1:123456789012:table/t-local"
	call := func(action, resource string, ctx map[string]string) awsenv.Call {
		return awsenv.Call{Function: "relay", Operation: "Op", Access: awsenv.Access{Action: action, Resource: resource, Context: ctx}}
	}
	calls := []awsenv.Call{
		call("dynamodb:Query", table, nil),
		call("dynamodb:Query", table+"/index/byOwner", nil),
		call("dynamodb:Query", table+"/index/bySweep", nil),
		call("kms:Decrypt", keyARN, map[string]string{iamcheck.PurposeKey: "webhook-signing", "kms:EncryptionContext:user": "u1"}),
		call("kms:Decrypt", keyARN, map[string]string{iamcheck.PurposeKey: "account-token", "kms:EncryptionContext:user": "u1"}),
		call("s3:GetObject", "arn:aws:s3:::t-local-uploads/uploads/u1/x.png", nil),
		call("s3:GetObject", "arn:aws:s3:::t-local-uploads/other/x.png", nil),
		{Function: "relay", Operation: "ListTables", Access: awsenv.Access{Action: "dynamodb:ListTables", Unknown: "not known"}},
	}
	denied, err := iamcheck.Denied(ev, tmpl, lambdaruntime.AccountID, calls)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, f := range denied {
		got = append(got, f.Action+" "+strings.TrimPrefix(f.Resource, table)+" "+f.Decision.Result)
	}
	want := []string{
		"dynamodb:ListTables  Unknown",
		"dynamodb:Query /index/bySweep ImplicitlyDenied",
		"kms:Decrypt " + keyARN + " ImplicitlyDenied",
		"s3:GetObject arn:aws:s3:::t-local-uploads/other/x.png ImplicitlyDenied",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("findings (-want +got):\n%s", diff)
	}
}

// An allow-list entry naming environments applies to their templates
// alone; one without, to every environment's.
func TestAllowListFor(t *testing.T) {
	t.Parallel()
	l := iamcheck.AllowList{
		{Functions: []string{"all"}, Actions: []string{"logs:PutLogEvents"}, Reason: "everywhere"},
		{Functions: []string{"all"}, Actions: []string{"xray:PutTraceSegments"}, Reason: "traced", Envs: []string{string(job.Staging)}},
	}
	if got := len(l.For(string(job.Staging))); got != 2 {
		t.Errorf("staging: %d entries, want 2", got)
	}
	if got := l.For(string(job.ProdEN)); len(got) != 1 || got[0].Reason != "everywhere" {
		t.Errorf("prod-en: %v, want the entry without envs alone", got)
	}
}

// TestServicesMayUseTheStacksResources evaluates, with the real evaluator,
// every request an AWS service makes for each cloud environment's
// synthesized template (`make iam` synthesizes them and sets
// CONVEYOR_IAM_TEMPLATES; unset, the test is skipped) against the
// resource's own policy and the role the service acts with: CloudWatch
// publishing every alarm to the alarm topic and using the topic's key,
// EventBridge Scheduler assuming the schedules' roles and invoking the
// recovery function with them (and the schedules function passing the
// users' schedules' role), S3 invoking confirm, EventBridge rules'
// targets, Lambda assuming each role and delivering failed asynchronous
// invocations and event source batches to their destinations.
func TestServicesMayUseTheStacksResources(t *testing.T) {
	t.Parallel()
	templates := os.Getenv(VarTemplates)
	if templates == "" {
		t.Skipf("%s is not set: `make iam` synthesizes the templates and runs this test", VarTemplates)
	}
	root, err := lambdaruntime.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	ev := iamcheck.Evaluator{Script: filepath.Join(root, "infra", "iam", "simulate.mjs"), Modules: os.Getenv(VarModules)}
	if ev.Modules == "" {
		ev.Modules = filepath.Join(root, ".cache", "iam-simulate", "node_modules")
	}
	local := resources.Named(job.Local, "t-services")
	for _, env := range job.CloudEnvs {
		t.Run(string(env), func(t *testing.T) {
			t.Parallel()
			cloud := resources.For(env)
			tmpl, err := iamcheck.LoadTemplate(filepath.Join(templates, "Conveyor-"+string(env)+".template.json"), iamcheck.Mapping{
				Cloud: cloud, Local: local, Account: lambdaruntime.AccountID, Region: awsenv.DefaultRegion, KMSKeyARN: keyARN,
			})
			if err != nil {
				t.Fatal(err)
			}
			// Every kind of use the stack wires is among the accesses.
			fn := func(name string) string {
				return "arn:aws:lambda:" + awsenv.DefaultRegion + ":" + lambdaruntime.AccountID + ":function:" + local.Prefix + "-" + name
			}
			topic := "arn:aws:sns:" + awsenv.DefaultRegion + ":" + lambdaruntime.AccountID + ":" + local.Prefix + "-alarms"
			for _, want := range []struct{ principal, action, resource string }{
				{iamcheck.PrincipalCloudWatch, "sns:Publish", topic},
				{iamcheck.PrincipalCloudWatch, "kms:GenerateDataKey", ""},
				{iamcheck.PrincipalCloudWatch, "kms:Decrypt", ""},
				{iamcheck.PrincipalScheduler, "sts:AssumeRole", ""},
				{"role", "lambda:InvokeFunction", fn(resources.FuncRecovery)},
				{"role", "iam:PassRole", ""},
				{iamcheck.PrincipalS3, "lambda:InvokeFunction", fn(resources.FuncConfirm)},
				{iamcheck.PrincipalLambda, "sts:AssumeRole", ""},
			} {
				found := 0
				for _, a := range tmpl.Services {
					if (a.Principal == want.principal || (want.principal == "role" && a.Role != "")) && a.Action == want.action &&
						(want.resource == "" || a.Resource == want.resource) {
						found++
					}
				}
				if found == 0 {
					t.Errorf("no service access %s: %s on %q: the check does not see that use", want.principal, want.action, want.resource)
				}
			}
			// Every asynchronously invoked function's failed invocations
			// reach the failure queue with its role.
			failures := "arn:aws:sqs:" + awsenv.DefaultRegion + ":" + lambdaruntime.AccountID + ":" + local.AsyncFailureQueue
			for _, name := range cloud.AsyncInvoked() {
				found := false
				for _, a := range tmpl.Services {
					found = found || (a.Role != "" && a.Action == "sqs:SendMessage" && a.Resource == failures && strings.Contains(a.Use, fn(name)))
				}
				if !found {
					t.Errorf("no service access for %s's on-failure destination (sqs:SendMessage on %s): the check does not see it", name, failures)
				}
			}
			denied, err := iamcheck.DeniedServices(ev, tmpl, lambdaruntime.AccountID)
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%d service accesses evaluated, %d denied", len(tmpl.Services), len(denied))
			for _, f := range denied {
				t.Errorf("DENIED %s", f)
			}
		})
	}
}
