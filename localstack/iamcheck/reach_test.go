package iamcheck_test

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/conveyor/conveyor/internal/aws/awsenv"
	"github.com/conveyor/conveyor/localstack/iamcheck"
	"github.com/conveyor/conveyor/localstack/lambdaruntime"
)

// evaluator is the pinned iam-simulate under root (VarModules's, or
// .cache/iam-simulate's), or a skip when it is not installed (`make
// iam-simulate`; `make iam` installs it and sets VarModules).
func evaluator(t *testing.T, root string) iamcheck.Evaluator {
	t.Helper()
	ev := iamcheck.Evaluator{Script: filepath.Join(root, "infra", "iam", "simulate.mjs"), Modules: os.Getenv(VarModules)}
	if ev.Modules == "" {
		ev.Modules = filepath.Join(root, ".cache", "iam-simulate", "node_modules")
		if _, err := os.Stat(filepath.Join(ev.Modules, "@cloud-copilot", "iam-simulate")); err != nil {
			t.Skipf("the evaluator is not installed in %s (`make iam-simulate`): %v", ev.Modules, err)
		}
	}
	return ev
}

// TestReachReportsADeniedUnrecordedCall runs the static check on a
// fixture function (testdata/reach/lister) that writes an object and
// lists the bucket only when the write fails: the recorded run saw the
// write alone. A role without s3:ListBucket is reported for the list,
// with the path that reaches it; a role that grants it is not; the
// local stand-in's delete is not entered; and the reasoned list
// silences a finding it names and fails on an entry that is not one.
func TestReachReportsADeniedUnrecordedCall(t *testing.T) {
	t.Parallel()
	if os.Getenv(VarModules) == "" && os.Getenv(VarTemplates) == "" {
		// Loading the SDK's S3 package and building the graph is ten
		// seconds of CPU, several times that under -race: `make iam` runs it.
		t.Skipf("neither %s nor %s is set: `make iam` runs this test", VarModules, VarTemplates)
	}
	root, err := lambdaruntime.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	ev := evaluator(t, root)
	const pkg = "github.com/conveyor/conveyor/localstack/iamcheck/testdata/reach/lister"
	r, err := iamcheck.Reach(iamcheck.ReachConfig{Dir: root, Patterns: []string{"./localstack/iamcheck/testdata/reach/lister"},
		StandIns: []string{pkg + ".localCleanup"}})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, o := range r.Operations {
		got = append(got, o.Call)
	}
	if diff := cmp.Diff([]string{"s3.ListObjectsV2", "s3.PutObject"}, got); diff != "" {
		t.Errorf("reachable operations (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[string][]string{"lister": {pkg + ".localCleanup"}}, r.StandIns); diff != "" {
		t.Errorf("stand-ins met (-want +got):\n%s", diff)
	}

	const account, bucket = "123456789012", "arn:aws:s3:::fixture"
	role := func(statements ...any) *iamcheck.Template {
		return &iamcheck.Template{Roles: map[string]*iamcheck.Role{"lister": {Function: "lister", ARN: "arn:aws:iam::" + account + ":role/lister",
			Policies: []map[string]any{{"Version": "2012-10-17", "Statement": statements}}}}}
	}
	put := map[string]any{"Effect": "Allow", "Action": []any{"s3:PutObject"}, "Resource": []any{bucket + "/*"}}
	list := map[string]any{"Effect": "Allow", "Action": []any{"s3:ListBucket"}, "Resource": []any{bucket}}
	recordedPut := awsenv.Call{Function: "lister", Service: "S3", Operation: "PutObject", Access: awsenv.Access{Action: "s3:PutObject", Resource: bucket + "/k"}}
	// Another function's request names the resource s3:ListBucket is used on.
	recordedList := awsenv.Call{Function: "other", Service: "S3", Operation: "ListObjectsV2", Access: awsenv.Access{Action: "s3:ListBucket", Resource: bucket}}

	for _, tc := range []struct {
		name  string
		tmpl  *iamcheck.Template
		calls []awsenv.Call
		// want is each finding's function, action and what it was
		// evaluated on.
		want []string
	}{
		{"denied on the resource another function used", role(put), []awsenv.Call{recordedPut, recordedList},
			[]string{"lister s3:ListBucket arn:aws:s3:::fixture (recorded by other): ImplicitlyDenied"}},
		{"granted on the resource another function used", role(put, list), []awsenv.Call{recordedPut, recordedList}, nil},
		{"granted on no resource", role(put), []awsenv.Call{recordedPut}, []string{"lister s3:ListBucket"}},
		{"granted on the role's own resource", role(put, list), []awsenv.Call{recordedPut}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			found, allowed, err := iamcheck.ReachableDenied(ev, tc.tmpl, account, r.Operations, tc.calls)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, u := range found {
				s := u.Function + " " + u.Action
				for _, e := range u.On {
					s += " " + e.Resource + " (" + e.From + "): " + e.Decision.Result
				}
				got = append(got, s)
				if want := "lister.main → s3.ListObjectsV2"; u.Operation.ChainString() != want {
					t.Errorf("path %q, want %q", u.Operation.ChainString(), want)
				}
				t.Logf("REACHABLE-DENIED %s", u)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("findings (-want +got):\n%s", diff)
			}
			// PutObject is the recorded side's; ListBucket, unless denied,
			// is vouched for here.
			if wantAllowed := len(tc.want) == 0; wantAllowed != slices.Contains(allowed, iamcheck.Grant{Function: "lister", Action: "s3:ListBucket"}) || len(allowed) > 1 {
				t.Errorf("allowed %v, for findings %v", allowed, got)
			}

			// The list gives a finding its reason; an entry that is not a
			// finding is stale.
			l := iamcheck.AllowList{{Functions: []string{"lister"}, Actions: []string{"s3:ListBucket"}, Reason: "the fixture's reason"}}
			unlisted, stale, listed := l.Unreasoned(found, []string{"lister"})
			if len(unlisted) > 0 {
				t.Errorf("listed, still reported: %v", unlisted)
			}
			if wantStale := len(found) == 0; wantStale != (len(stale) == 1) || len(stale)+len(listed) != 1 {
				t.Errorf("stale %v, listed %v, for findings %v", stale, listed, got)
			}
		})
	}
}

// TestReasonedListStaysExact: infra/iam/reachable.yaml parses, and the
// list gives a finding its reason, leaves an unlisted one reported, and
// names as stale each of its pairs ("all" standing for every function)
// that is not a finding.
func TestReasonedListStaysExact(t *testing.T) {
	t.Parallel()
	root, err := lambdaruntime.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := iamcheck.ReadAllowList(filepath.Join(root, "infra", "iam", "reachable.yaml")); err != nil {
		t.Fatal(err)
	}
	l := iamcheck.AllowList{
		{Functions: []string{"admin"}, Actions: []string{"sqs:ChangeMessageVisibility"}, Reason: "a finding"},
		{Functions: []string{"all"}, Actions: []string{"s3:ListBucket"}, Reason: "a finding of one function, stale for the other"},
	}
	found := []iamcheck.Unrecorded{
		{Function: "admin", Action: "sqs:ChangeMessageVisibility"},
		{Function: "api", Action: "s3:ListBucket"},
		{Function: "api", Action: "kms:Decrypt"},
	}
	unlisted, stale, listed := l.Unreasoned(found, []string{"admin", "api"})
	var got []string
	for _, u := range unlisted {
		got = append(got, "unlisted "+u.Function+" "+u.Action)
	}
	for _, g := range stale {
		got = append(got, "stale "+g.Function+" "+g.Action)
	}
	for g := range listed {
		got = append(got, "listed "+g.Function+" "+g.Action)
	}
	slices.Sort(got)
	want := []string{"listed admin sqs:ChangeMessageVisibility", "listed api s3:ListBucket", "stale admin s3:ListBucket", "unlisted api kms:Decrypt"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}
