package store

import (
	"crypto/sha256"
	"encoding/hex"
	"reflect"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/conveyor/conveyor/internal/job"
)

// TestJobZKeepsEveryType: the attributes a compact job item moves into
// jobZ come back as they were, of every attribute type — a number's digits
// as written, binary and sets apart from strings and lists, a map whose
// only key begins with the type mark apart from a marked value.
func TestJobZKeepsEveryType(t *testing.T) {
	s := func(v string) types.AttributeValue { return &types.AttributeValueMemberS{Value: v} }
	n := func(v string) types.AttributeValue { return &types.AttributeValueMemberN{Value: v} }
	rest := map[string]types.AttributeValue{
		"s": s("a"), "empty": s(""), "n": n("12345678901234567890"), "neg": n("-0.000125"), "exp": n("1E+3"),
		"b":    &types.AttributeValueMemberB{Value: []byte{0, 1, 0xff}},
		"t":    &types.AttributeValueMemberBOOL{Value: true},
		"f":    &types.AttributeValueMemberBOOL{Value: false},
		"null": &types.AttributeValueMemberNULL{Value: true},
		"ss":   &types.AttributeValueMemberSS{Value: []string{"x", "y"}},
		"ns":   &types.AttributeValueMemberNS{Value: []string{"1", "2.5"}},
		"bs":   &types.AttributeValueMemberBS{Value: [][]byte{{1}, {2, 3}}},
		"l":    &types.AttributeValueMemberL{Value: []types.AttributeValue{s("x"), n("1"), &types.AttributeValueMemberL{}}},
		"m":    &types.AttributeValueMemberM{Value: map[string]types.AttributeValue{"k": s("v"), "B": s("not binary")}},
		"em":   &types.AttributeValueMemberM{Value: map[string]types.AttributeValue{}},
		"mark": &types.AttributeValueMemberM{Value: map[string]types.AttributeValue{typedKey + "B": s("a user's key")}},
		"deep": &types.AttributeValueMemberM{Value: map[string]types.AttributeValue{
			"in": &types.AttributeValueMemberM{Value: map[string]types.AttributeValue{typedKey + "M": n("7")}}}},
	}
	item := map[string]types.AttributeValue{"pk": s(jobPK("job_1")), "version": n("3")}
	for k, v := range rest {
		item[k] = v
	}
	if err := compactJob(item, job.Queued); err != nil {
		t.Fatal(err)
	}
	if _, ok := item["m"]; ok {
		t.Fatalf("compacted item still has the attribute m: %v", item)
	}
	item["sk"] = s(jobSK) // the table key, which jobItem adds after compacting
	back, err := ExpandJobItem(item)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]types.AttributeValue{"pk": s(jobPK("job_1")), "sk": s(jobSK), "version": n("3"), "id": s("job_1")}
	for k, v := range rest {
		want[k] = v
	}
	if diff := cmp.Diff(want, back, cmp.Exporter(func(reflect.Type) bool { return true }), cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("jobZ round trip (-want +got):\n%s", diff)
	}
}

// TestACompactJobKeepsWhatItsReadersName: a compact item keeps as
// attributes what the indexes project and the conditions, filters and
// projections read — an active job its sweep times and lease, a finished
// one its finish time — and nothing of its phases, items or params.
func TestACompactJobKeepsWhatItsReadersName(t *testing.T) {
	now := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	later := now.Add(time.Minute)
	j := job.Job{ID: "job_1", Type: "publish", Status: job.Running, Tier: job.Low, Owner: "u1", Version: 2, EventSeq: 3,
		CreatedAt: now, UpdatedAt: now, QueuedAt: &now, HeartbeatAt: &now, LeaseOwner: "w1", LeaseUntil: &later,
		Phases: []job.Phase{{Name: "token", Status: "running"}}, Items: []job.Item{{ID: "itm_1"}}, Params: job.Doc(`{"title":"t"}`)}
	st := &Store{}
	item, err := st.jobItem(&j)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range []string{"status", "tier", "owner", "version", "eventSeq", "queuedAt", "heartbeatAt", "leaseOwner", "leaseUntil", "jobStatus", "sweepKey", "sweepAt"} {
		if _, ok := item[a]; !ok {
			t.Errorf("running job: no attribute %s", a)
		}
	}
	for _, a := range []string{"phases", "items", "params", "id", "hash", "createdAt"} {
		if _, ok := item[a]; ok {
			t.Errorf("running job: attribute %s outside jobZ", a)
		}
	}
	j.Status, j.FinishedAt, j.LeaseOwner, j.LeaseUntil = job.Succeeded, &later, "", nil
	if item, err = st.jobItem(&j); err != nil {
		t.Fatal(err)
	}
	if _, ok := item["finishedAt"]; !ok {
		t.Error("finished job: no attribute finishedAt")
	}
	for _, a := range []string{"queuedAt", "heartbeatAt"} {
		if _, ok := item[a]; ok {
			t.Errorf("finished job: attribute %s outside jobZ", a)
		}
	}
	var back job.Job
	if err := unmarshalJob(item, &back); err != nil {
		t.Fatal(err)
	}
	if back.ID != j.ID || back.QueuedAt == nil || !back.QueuedAt.Equal(now) || len(back.Phases) != 1 || len(back.Items) != 1 || string(back.Params) != `{"title":"t"}` {
		t.Errorf("read back %+v", back)
	}
}

// TestJobDictNeverChanges: every compressed jobZ and earlierZ ever stored
// needs jobDict, byte for byte, to be read.
func TestJobDictNeverChanges(t *testing.T) {
	sum := sha256.Sum256(jobDict)
	if got, want := hex.EncodeToString(sum[:]), "b8716563eaaed59e49a947e1205c268ffb4f16d16947cd2c6977f822184132f0"; got != want {
		t.Fatalf("jobdict.v1 has SHA-256 %s, want %s: stored items need the dictionary they were written with", got, want)
	}
	b, err := compressed([]byte(`{"phases":[]}`))
	if err != nil {
		t.Fatal(err)
	}
	if back, err := decompressed(b); err != nil || string(back) != `{"phases":[]}` {
		t.Fatalf("round trip: %q, %v", back, err)
	}
}
