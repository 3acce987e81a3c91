package store

import (
	"encoding/base64"
	"errors"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/google/go-cmp/cmp"

	"github.com/conveyor/conveyor/internal/resources"
)

func TestCursorIsBoundToItsQuery(t *testing.T) {
	t.Parallel()
	byStatus := page{index: resources.IndexByOwnerUpdated, partitionAttr: resources.AttrOwner, partition: "u1", sortAttr: resources.AttrUpdatedKey, filter: "jobStatus=queued"}
	key := func(partition, sort, id string) map[string]types.AttributeValue {
		return map[string]types.AttributeValue{
			resources.AttrPK: str(jobPK(id)), resources.AttrSK: str(jobSK),
			resources.AttrOwner: str(partition), resources.AttrUpdatedKey: str(sort),
		}
	}
	good := key("u1", "2026-01-02T00:00:00.000000000Z#job_a", "job_a")
	c, err := byStatus.encode(good)
	if err != nil {
		t.Fatal(err)
	}
	got, err := byStatus.decode(c)
	if err != nil {
		t.Fatalf("decoding our own cursor: %v", err)
	}
	if diff := cmp.Diff(good, got, cmp.AllowUnexported(types.AttributeValueMemberS{})); diff != "" {
		t.Errorf("round trip (-want +got):\n%s", diff)
	}
	if c, err := byStatus.encode(nil); c != "" || err != nil {
		t.Errorf("no LastEvaluatedKey: cursor %q, %v; want none", c, err)
	}

	otherStatus := byStatus
	otherStatus.filter = "jobStatus=failed"
	otherUser := byStatus
	otherUser.partition = "u2"
	otherIndex := page{index: resources.IndexByOwner, partitionAttr: resources.AttrOwner, partition: "u1", sortAttr: resources.AttrCreatedKey}
	withSince := byStatus
	withSince.since = "2026-01-01T00:00:00.000000000Z"
	laterSince := byStatus
	laterSince.since = "2026-02-01T00:00:00.000000000Z"
	encode := func(p page, k map[string]types.AttributeValue) string {
		c, err := p.encode(k)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	raw := func(s string) string { return base64.RawURLEncoding.EncodeToString([]byte(s)) }

	tests := []struct {
		name   string
		p      page
		cursor string
		ok     bool
	}{
		{"the same query", byStatus, c, true},
		{"the same query with updatedSince", withSince, encode(withSince, good), true},
		{"another status", otherStatus, c, false},
		{"another user", otherUser, c, false},
		{"another index", otherIndex, c, false},
		{"updatedSince added", withSince, c, false},
		{"another updatedSince", laterSince, encode(withSince, good), false},
		{"a key outside the partition, bound right", byStatus, encode(byStatus, key("u2", "2026-01-02T00:00:00.000000000Z#job_a", "job_a")), false},
		{"a key below updatedSince, bound right", laterSince, encode(laterSince, good), false},
		{"a key of no job", byStatus, encode(byStatus, key("u1", "2026-01-02T00:00:00.000000000Z#job_a", "")), false},
		{"a sort key of another job", byStatus, encode(byStatus, key("u1", "2026-01-02T00:00:00.000000000Z#job_b", "job_a")), false},
		{"an attribute missing", byStatus, raw(`{"q":"` + byStatus.binding() + `","k":{"pk":"JOB#job_a","sk":"JOB","owner":"u1"}}`), false},
		{"an empty attribute", byStatus, raw(`{"q":"` + byStatus.binding() + `","k":{"pk":"JOB#job_a","sk":"JOB","owner":"u1","updatedKey":""}}`), false},
		{"an unknown member", byStatus, raw(`{"q":"` + byStatus.binding() + `","k":{},"x":1}`), false},
		{"the old format", byStatus, raw(`{"pk":"JOB#job_a","sk":"JOB","owner":"u1","updatedKey":"2026-01-02T00:00:00.000000000Z#job_a"}`), false},
		{"two values", byStatus, raw(`{"q":"x","k":{}} {}`), false},
		{"not JSON", byStatus, raw("{"), false},
		{"not base64url", byStatus, "!!", false},
		{"padded", byStatus, base64.URLEncoding.EncodeToString([]byte(`{"q":"x"}`)), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := tt.p.decode(tt.cursor)
			switch {
			case tt.ok && err != nil:
				t.Errorf("decode: %v, want the key", err)
			case !tt.ok && !errors.Is(err, ErrBadCursor):
				t.Errorf("decode: %v, want ErrBadCursor", err)
			}
		})
	}
}
