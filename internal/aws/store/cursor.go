package store

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/conveyor/conveyor/internal/fault"
	"github.com/conveyor/conveyor/internal/resources"
)

// ErrBadCursor is returned for a cursor this store did not hand out for
// the query it is used with: one from another filter, index, user or
// updatedSince, or one forged, altered or garbled. DynamoDB would refuse
// most of them as a start key outside the key condition (fault.ErrBadCursor).
var ErrBadCursor = fault.ErrBadCursor

// page describes one list query's index, so that the cursors it hands out
// are bound to it and the cursors it accepts can be checked against it.
type page struct {
	// index is the GSI queried.
	index string
	// partitionAttr and partition are the index's partition key and the
	// value the query fixes it to.
	partitionAttr, partition string
	// sortAttr is the index's sort key; since, when set, is its lower bound
	// in the key condition, until its upper bound.
	sortAttr, since, until string
	// filter fingerprints the filters applied after the Query (empty for
	// lists that have none): a cursor continues only the same filters.
	filter string
}

// keyAttrs are the attributes of a LastEvaluatedKey on p's index: the
// table's key and the index's.
func (p page) keyAttrs() []string {
	return []string{resources.AttrPK, resources.AttrSK, p.partitionAttr, p.sortAttr}
}

// binding fingerprints the query a cursor continues (index, partition and
// range condition; not the page size).
func (p page) binding() string {
	parts := []string{p.index, p.partition, p.since}
	if p.until != "" || p.filter != "" {
		parts = append(parts, p.until, p.filter)
	}
	sum := sha256.Sum256([]byte(strings.Join(parts, "\x00")))
	return base64.RawURLEncoding.EncodeToString(sum[:12])
}

// cursorJSON is a cursor's content: the query it is bound to and the
// LastEvaluatedKey it resumes after (every key attribute is a string).
type cursorJSON struct {
	Query string            `json:"q"`
	Key   map[string]string `json:"k"`
}

// encode renders k, a LastEvaluatedKey of p's query, as an opaque,
// URL-safe cursor bound to p.
func (p page) encode(k map[string]types.AttributeValue) (string, error) {
	if len(k) == 0 {
		return "", nil
	}
	c := cursorJSON{Query: p.binding(), Key: map[string]string{}}
	for name, v := range k {
		sv, ok := v.(*types.AttributeValueMemberS)
		if !ok {
			return "", fmt.Errorf("encoding a cursor: key attribute %s is not a string", name)
		}
		c.Key[name] = sv.Value
	}
	b, err := json.Marshal(c)
	if err != nil {
		return "", fmt.Errorf("encoding a cursor: %w", err)
	}
	return base64.RawURLEncoding.EncodeToString(b), nil
}

// decode returns the start key of cursor c for p's query, or an error
// wrapping ErrBadCursor unless c is a cursor p's query handed out (or has
// exactly its shape: a job's key inside the query's key condition, which is
// all DynamoDB asks of a start key). An empty c starts at the beginning.
func (p page) decode(c string) (map[string]types.AttributeValue, error) {
	if c == "" {
		return nil, nil
	}
	b, err := base64.RawURLEncoding.DecodeString(c)
	if err != nil {
		return nil, fmt.Errorf("%w: not base64url", ErrBadCursor)
	}
	var cur cursorJSON
	dec := json.NewDecoder(strings.NewReader(string(b)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&cur); err != nil || dec.More() {
		return nil, fmt.Errorf("%w: not a cursor", ErrBadCursor)
	}
	if cur.Query != p.binding() {
		return nil, fmt.Errorf("%w: it continues another list (another filter, updatedSince or user)", ErrBadCursor)
	}
	if len(cur.Key) != len(p.keyAttrs()) {
		return nil, fmt.Errorf("%w: not a key of this list", ErrBadCursor)
	}
	key := make(map[string]types.AttributeValue, len(cur.Key))
	for _, name := range p.keyAttrs() {
		v, ok := cur.Key[name]
		if !ok || v == "" {
			return nil, fmt.Errorf("%w: not a key of this list", ErrBadCursor)
		}
		key[name] = str(v)
	}
	// The start key must lie inside the query's key condition, and be a
	// job's: its own id in its key and in its sort key.
	id, isJob := strings.CutPrefix(cur.Key[resources.AttrPK], jobPK(""))
	switch {
	case cur.Key[p.partitionAttr] != p.partition,
		p.since != "" && cur.Key[p.sortAttr] < p.since,
		p.until != "" && cur.Key[p.sortAttr] > p.until,
		!isJob || id == "" || cur.Key[resources.AttrSK] != jobSK,
		!strings.HasSuffix(cur.Key[p.sortAttr], "#"+id):
		return nil, fmt.Errorf("%w: its key lies outside this list", ErrBadCursor)
	}
	return key, nil
}

// after is the cursor that resumes p's query after entry, one of its
// index entries (the table's key and the index's are in every entry).
func (p page) after(entry map[string]types.AttributeValue) (string, error) {
	key := map[string]types.AttributeValue{}
	for _, a := range p.keyAttrs() {
		if v, ok := entry[a]; ok {
			key[a] = v
		}
	}
	return p.encode(key)
}

// maxEvaluated bounds the index entries one Query of a page evaluates.
const maxEvaluated = 1000

// entriesPage runs in, a Query of p's index from its ExclusiveStartKey,
// until it holds limit entries that keep accepts (keep returns the job id
// of an entry it keeps) or the key range ends, and returns their ids in
// order, the entries by id, and the cursor after the last one kept ("" at
// the range's end).
//
// DynamoDB applies a Query's Limit before its FilterExpression, so a page
// whose filter drops most entries would take one round trip per limit
// entries evaluated: a page of one under a filter that matches nothing in
// 800 entries, 800 queries. Each Query after the first evaluates twice as
// many entries as the one before (at most maxEvaluated), so such a page
// takes log2 of the entries it reads in round trips and evaluates at most
// about twice what it needs; matches past limit are left for the next
// page, which starts after the last entry kept.
func (s *Store) entriesPage(ctx context.Context, in *dynamodb.QueryInput, p page, limit int, keep func(map[string]types.AttributeValue) (string, bool)) ([]string, map[string]map[string]types.AttributeValue, string, error) {
	var ids []string
	entries := map[string]map[string]types.AttributeValue{}
	evaluate := limit
	for {
		in.Limit = aws.Int32(int32(min(evaluate, maxEvaluated)))
		out, err := s.db.Query(ctx, in)
		if err != nil {
			return nil, nil, "", err
		}
		for _, item := range out.Items {
			id, ok := keep(item)
			if !ok {
				continue
			}
			if len(ids) == limit {
				next, err := p.after(entries[ids[len(ids)-1]])
				return ids, entries, next, err
			}
			ids, entries[id] = append(ids, id), item
		}
		if len(out.LastEvaluatedKey) == 0 {
			return ids, entries, "", nil
		}
		if len(ids) == limit {
			next, err := p.encode(out.LastEvaluatedKey)
			return ids, entries, next, err
		}
		in.ExclusiveStartKey = out.LastEvaluatedKey
		evaluate = max(limit-len(ids), 2*int(*in.Limit))
	}
}
