package stack_test

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/conveyor/conveyor/infra/stack"
	"github.com/conveyor/conveyor/internal/job"
	"github.com/conveyor/conveyor/internal/resources"
)

// adopted is prod-ru pointed at a restored table and the token key a
// deleted stack kept (Config.Adopt).
var adopted *synthesized

const (
	adoptedTable  = "conveyor-prod-ru-restored-20261204"
	adoptedStream = "arn:aws:dynamodb:eu-west-1:123456789012:table/" + adoptedTable + "/stream/2026-12-04T10:00:00.000"
	adoptedKey    = "arn:aws:kms:eu-west-1:123456789012:key/0a1b2c3d-4e5f-6a7b-8c9d-0e1f2a3b4c5d"
)

func withAdopted(cfg stack.Config) stack.Config {
	cfg.Adopt = stack.Adopt{Table: adoptedTable, TableStreamARN: adoptedStream, TokenKeyARN: adoptedKey}
	return cfg
}

// A stack that adopts a restored table and a kept key creates neither:
// every function is given the restored table's name and the kept key,
// their grants name both, the relay reads the restored table's stream,
// the alarms watch it, and the key's alias points at the kept key under
// the logical id the stack's own key's alias has (an in-place update).
func TestAnAdoptedTableAndKeyAreUsedNotCreated(t *testing.T) {
	t.Parallel()
	own := stacks(t)[job.ProdRU]
	s := adopted
	def := resources.For(job.ProdRU)
	if n := len(s.ofType("AWS::DynamoDB::Table")); n != 0 {
		t.Errorf("%d tables created, want none", n)
	}
	for id, r := range s.ofType("AWS::KMS::Key") {
		if r.Properties["EnableKeyRotation"] == true && strings.Contains(r.Properties["Description"].(string), "connected-account tokens") {
			t.Errorf("a token key %s is created", id)
		}
	}
	alias := s.logicalID(t, "AWS::KMS::Alias", "AliasName", def.KMSAlias)
	if got := s.res[alias].Properties["TargetKeyId"]; got != adoptedKey {
		t.Errorf("the alias targets %v, want the adopted key", got)
	}
	if ownAlias := own.logicalID(t, "AWS::KMS::Alias", "AliasName", def.KMSAlias); ownAlias != alias {
		t.Errorf("the alias's logical id %s differs from the stack's own key's alias %s: switching would replace it", alias, ownAlias)
	}
	for _, fn := range def.Functions {
		vars := s.res[s.functionID(t, fn)].Properties["Environment"].(map[string]any)["Variables"].(map[string]any)
		if vars["CONVEYOR_TABLE"] != adoptedTable || vars["CONVEYOR_KMS_KEY_ID"] != adoptedKey {
			t.Errorf("%s: CONVEYOR_TABLE %v, CONVEYOR_KMS_KEY_ID %v", fn, vars["CONVEYOR_TABLE"], vars["CONVEYOR_KMS_KEY_ID"])
		}
	}
	relay := s.functionID(t, resources.FuncRelay)
	found := false
	for _, r := range s.ofType("AWS::Lambda::EventSourceMapping") {
		if cmp.Equal(r.Properties["FunctionName"], ref(relay)) {
			found = true
			if r.Properties["EventSourceArn"] != adoptedStream {
				t.Errorf("the relay's mapping reads %v, want the adopted table's stream", r.Properties["EventSourceArn"])
			}
		}
	}
	if !found {
		t.Error("no event source mapping for the relay")
	}
	// Every grant that named the stack's own table and key names the
	// adopted ones, and nothing names a table or key of the stack's own.
	var tableGrants, keyGrants int
	for _, r := range s.ofType("AWS::IAM::Policy") {
		walkStrings(r.Properties, func(v string) {
			if strings.Contains(v, ":table/"+adoptedTable) {
				tableGrants++
			}
			if v == adoptedKey {
				keyGrants++
			}
		})
	}
	if tableGrants == 0 || keyGrants == 0 {
		t.Errorf("grants on the adopted table: %d, on the adopted key: %d; want some of each", tableGrants, keyGrants)
	}
	walkStrings(s.raw["Resources"], func(v string) {
		if strings.Contains(v, "table/"+def.Table.Name+"/") || strings.HasSuffix(v, "table/"+def.Table.Name) {
			t.Errorf("the adopted stack still names the stack's own table: %s", v)
		}
	})
	for _, dims := range []string{"TableName"} {
		n := 0
		for _, r := range s.ofType("AWS::CloudWatch::Alarm") {
			walkStrings(r.Properties, func(v string) {
				if v == adoptedTable {
					n++
				}
			})
		}
		if n == 0 {
			t.Errorf("no alarm watches the adopted table by its %s", dims)
		}
	}
}

// The token key outlives a production stack and never a failed create;
// staging's goes with its stack (TestNoRetainAfterAFailedCreate holds the
// policy for every stateful type; this names the key's).
func TestTheTokenKeyIsKeptInProduction(t *testing.T) {
	t.Parallel()
	for env, s := range stacks(t) {
		for id, r := range s.ofType("AWS::KMS::Key") {
			if !strings.Contains(r.Properties["Description"].(string), "connected-account tokens") {
				continue
			}
			want := map[bool]string{true: "RetainExceptOnCreate", false: "Delete"}[env.Production()]
			if r.DeletionPolicy != want || (env.Production() && r.UpdateReplacePolicy != "Retain") {
				t.Errorf("%s: token key %s DeletionPolicy %q UpdateReplacePolicy %q, want %q", env, id, r.DeletionPolicy, r.UpdateReplacePolicy, want)
			}
		}
	}
}

func TestAdoptIsChecked(t *testing.T) {
	t.Parallel()
	base := `{"externalApi":{"url":"https://www.deviantart.com"},"logRetentionDays":30,"account":"123456789012","region":"eu-west-1",`
	for _, tc := range []struct{ adopt, want string }{
		{`{"table":"conveyor-prod-ru-r1"}`, "adopt.tableStreamArn: required with adopt.table"},
		{`{"tableStreamArn":"` + adoptedStream + `"}`, "adopt.tableStreamArn without adopt.table"},
		{`{"table":"conveyor-prod-ru-r1","tableStreamArn":"` + adoptedStream + `"}`, "the stream of table " + adoptedTable + ", not of adopt.table conveyor-prod-ru-r1"},
		{`{"table":"` + adoptedTable + `","tableStreamArn":"` + strings.Replace(adoptedStream, "123456789012", "210987654321", 1) + `"}`, "adopt.tableStreamArn: in account 210987654321"},
		{`{"tokenKeyArn":"arn:aws:kms:eu-west-1:123456789012:alias/conveyor-prod-ru"}`, "want a KMS key ARN"},
		{`{"tokenKeyArn":"` + strings.Replace(adoptedKey, "eu-west-1", "us-east-1", 1) + `"}`, "adopt.tokenKeyArn: in region us-east-1"},
	} {
		_, err := stack.ParseConfig(job.ProdRU, []byte(base+`"adopt":`+tc.adopt+`}`))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("adopt %s: %v, want an error saying %q", tc.adopt, err, tc.want)
		}
	}
	if _, err := stack.ParseConfig(job.ProdRU, []byte(base+`"adopt":{"table":"`+adoptedTable+`","tableStreamArn":"`+adoptedStream+`","tokenKeyArn":"`+adoptedKey+`"}}`)); err != nil {
		t.Errorf("a valid adopt: %v", err)
	}
}
