package stack

import (
	"fmt"
	"regexp"
)

// Adopt names stateful resources that outlive a stack, for the stack to
// use instead of making its own: a table restored from a point in time
// (PITR restores to a new table), and the token key a deleted production
// stack kept (RetainExceptOnCreate), without which the restored table's
// sealed tokens cannot be opened (docs/operations.md, "Restore and
// rollback").
type Adopt struct {
	// Table is an existing table the stack uses instead of creating one:
	// the functions get its name, their grants and the relay's stream
	// mapping name it, the alarms watch it. Its indexes must be the
	// definition's (a restore keeps the source's); its stream, TTL, PITR
	// and deletion protection are set by the operator (the runbook's
	// commands), not by the stack. Empty: the stack creates the table.
	Table string `json:"table,omitempty"`
	// TableStreamARN is that table's stream (view type NEW_IMAGE), which
	// feeds the relay; required with Table.
	TableStreamARN string `json:"tableStreamArn,omitempty"`
	// TokenKeyARN is an existing KMS key (a key ARN) that seals and opens
	// the account tokens instead of a key of the stack's own; the stack
	// points its alias at it and grants the functions on it. Empty: the
	// stack creates the key.
	TokenKeyARN string `json:"tokenKeyArn,omitempty"`
}

var (
	tableName      = regexp.MustCompile(`^[a-zA-Z0-9_.-]{3,255}$`)
	tableStreamARN = regexp.MustCompile(`^arn:aws[a-z-]*:dynamodb:([a-z0-9-]+):(\d{12}):table/([a-zA-Z0-9_.-]{3,255})/stream/[0-9A-Za-z:.-]+$`)
	keyARN         = regexp.MustCompile(`^arn:aws[a-z-]*:kms:([a-z0-9-]+):(\d{12}):key/(mrk-)?[0-9a-f-]{32,36}$`)
)

// check reports what is wrong with a: a table needs its stream, each ARN
// its shape, and both lie in the environment's account and region when
// the configuration names them.
func (a Adopt) check(account, region string) (bad []string) {
	fail := func(format string, args ...any) { bad = append(bad, fmt.Sprintf(format, args...)) }
	where := func(field, r, acct string) {
		if account != "" && acct != account {
			fail("adopt.%s: in account %s, but the environment deploys to %s", field, acct, account)
		}
		if region != "" && r != region {
			fail("adopt.%s: in region %s, but the environment deploys to %s", field, r, region)
		}
	}
	switch {
	case a.Table == "" && a.TableStreamARN != "":
		fail("adopt.tableStreamArn without adopt.table: name the table whose stream it is")
	case a.Table != "" && !tableName.MatchString(a.Table):
		fail("adopt.table %q: want a DynamoDB table name (3-255 of a-z A-Z 0-9 _ . -)", a.Table)
	case a.Table != "" && a.TableStreamARN == "":
		fail("adopt.tableStreamArn: required with adopt.table (aws dynamodb describe-table --table-name %s --query Table.LatestStreamArn; enable its stream first, NEW_IMAGE)", a.Table)
	case a.Table != "":
		m := tableStreamARN.FindStringSubmatch(a.TableStreamARN)
		if m == nil {
			fail("adopt.tableStreamArn %q: want a DynamoDB stream ARN (arn:aws:dynamodb:<region>:<account>:table/<name>/stream/<label>)", a.TableStreamARN)
			break
		}
		if m[3] != a.Table {
			fail("adopt.tableStreamArn %q: the stream of table %s, not of adopt.table %s", a.TableStreamARN, m[3], a.Table)
		}
		where("tableStreamArn", m[1], m[2])
	}
	if a.TokenKeyARN != "" {
		if m := keyARN.FindStringSubmatch(a.TokenKeyARN); m == nil {
			fail("adopt.tokenKeyArn %q: want a KMS key ARN (arn:aws:kms:<region>:<account>:key/<key id>), not an alias", a.TokenKeyARN)
		} else {
			where("tokenKeyArn", m[1], m[2])
		}
	}
	return bad
}
