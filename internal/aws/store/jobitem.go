package store

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/conveyor/conveyor/internal/job"
	"github.com/conveyor/conveyor/internal/resources"
)

// A job item is compact: the attributes a reader of the table names — its
// keys, each index's keys and projected attributes, what a condition,
// filter or projection reads — stay attributes, and the rest of the job
// (its phases, items, params, result, error, counts and most times) is one
// binary attribute, jobZ: those attributes as typed JSON (see jsonValue),
// compressed with a dictionary of such documents (compressed, jobDict).
// The id is the table key's (JOB#id), not repeated.
// A published job's claim and finish then write under the 1 KB of one
// write unit (2 units in a transaction) instead of 2 KB (4):
// docs/performance.md. Items written with every attribute (before, or by
// a store told WriteJobAttributes) are read as they are.

// attrJobZ is a compact job item's attribute holding the rest of the job.
const attrJobZ = "jobZ"

// jobKept are the job's own attributes a compact item keeps as attributes,
// beside the keys and index keys jobItem adds: what the sweep index
// projects (resources.SweepAttrs) and its filters read, what
// byOwnerUpdatedKeys projects (the event sequence), the condition of every
// job write (version), the lease read (JobLease) and TTL. The id is read
// from the table key.
var jobKept = func() map[string]bool {
	kept := map[string]bool{"version": true, resources.AttrEventSeq: true, "leaseOwner": true, "leaseUntil": true,
		resources.AttrExpiresAt: true}
	for _, a := range slices.Concat(resources.SweepAttrs, resources.InspectorAttrs, resources.OwnerUpdatedAttrs) {
		kept[a] = true
	}
	delete(kept, "id")
	return kept
}()

// activeOnly are the attributes of jobKept that only an active job's
// sweeps read (when it is due, whether it is stuck or parked, its lease):
// a job that is no longer active keeps them in jobZ, and its sweep entry
// (retention's) carries its finish time.
var activeOnly = []string{"scheduleAt", "queuedAt", "retryAt", "stuckFrom", "heartbeatAt", "waiting", "wait",
	"leaseOwner", "leaseUntil"}

// keptFor is whether a job in status st keeps attribute a as an attribute.
func keptFor(st job.Status, a string) bool {
	return jobKept[a] && (st.Active() || !slices.Contains(activeOnly, a))
}

// WriteJobAttributes makes s write job items with every attribute, as
// code before compact job items wrote and reads them, and with the retired
// byOwnerStatus's key (CONVEYOR_JOB_ITEMS=attributes): the first deploy of
// the change, so that no function still running older code meets a
// compact item (docs/migrations.md). Both shapes are read either way.
func (s *Store) WriteJobAttributes() { s.jobAttributes = true }

// compactJob moves the attributes of item, a job in status st, that it
// does not keep (keptFor) into jobZ.
func compactJob(item map[string]types.AttributeValue, st job.Status) error {
	rest := map[string]types.AttributeValue{}
	for k, v := range item {
		if !keptFor(st, k) {
			rest[k] = v
			delete(item, k)
		}
	}
	delete(rest, "id") // the key's
	b, err := job.Marshal(jsonMap(rest))
	if err != nil {
		return err
	}
	z, err := compressed(b)
	if err != nil {
		return err
	}
	item[attrJobZ] = &types.AttributeValueMemberB{Value: z}
	return nil
}

// ExpandJobItem returns a stored item with a compact job's jobZ expanded
// into the attributes it holds, as a job item with every attribute has
// them; any other item as it is. It is for tools and tests that read the
// table's items themselves (a search of every stored byte for a secret).
func ExpandJobItem(item map[string]types.AttributeValue) (map[string]types.AttributeValue, error) {
	if sk, ok := item[resources.AttrSK].(*types.AttributeValueMemberS); !ok || sk.Value != jobSK {
		return item, nil
	}
	if _, compact := item[attrJobZ]; !compact {
		return item, nil
	}
	out, err := expandJob(item)
	if err != nil {
		return nil, err
	}
	if id, ok := jobIDOf(out); ok {
		out["id"] = str(id)
	}
	return out, nil
}

// expandJob returns item with jobZ's attributes back in place (a new map),
// or item itself when it has no jobZ (an item with every attribute, or an
// index entry). item is not changed. The id stays the key's (jobIDOf).
func expandJob(item map[string]types.AttributeValue) (map[string]types.AttributeValue, error) {
	z, ok := item[attrJobZ].(*types.AttributeValueMemberB)
	if !ok {
		return item, nil
	}
	bad := func(err error) error { return fmt.Errorf("decoding a job's %s: %w", attrJobZ, err) }
	b, err := decompressed(z.Value)
	if err != nil {
		return nil, bad(err)
	}
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var rest map[string]any
	if err := d.Decode(&rest); err != nil {
		return nil, bad(err)
	}
	m, err := fromJSONMap(rest)
	if err != nil {
		return nil, bad(err)
	}
	out := m.Value
	maps.Copy(out, item)
	delete(out, attrJobZ)
	return out, nil
}

// typedKey marks, as the one key of a JSON object, a value of a type JSON
// has no literal for (B, SS, NS, BS), or a map whose only key begins with
// it (M): its key is the type after the mark.
const typedKey = "\x00"

// jsonValue renders av as JSON that keeps every type: S a string, N a
// number (its decimal digits as they are), BOOL, NULL, L an array, M an
// object; B and the sets an object of one key, the mark and the type.
func jsonValue(av types.AttributeValue) any {
	switch v := av.(type) {
	case *types.AttributeValueMemberS:
		return v.Value
	case *types.AttributeValueMemberN:
		return json.Number(v.Value)
	case *types.AttributeValueMemberBOOL:
		return v.Value
	case *types.AttributeValueMemberNULL:
		return nil
	case *types.AttributeValueMemberL:
		l := make([]any, len(v.Value))
		for i, e := range v.Value {
			l[i] = jsonValue(e)
		}
		return l
	case *types.AttributeValueMemberM:
		m := jsonMap(v.Value)
		if len(m) == 1 {
			for k := range m {
				if strings.HasPrefix(k, typedKey) {
					return map[string]any{typedKey + "M": m}
				}
			}
		}
		return m
	case *types.AttributeValueMemberB:
		return map[string]any{typedKey + "B": v.Value}
	case *types.AttributeValueMemberSS:
		return map[string]any{typedKey + "SS": v.Value}
	case *types.AttributeValueMemberNS:
		return map[string]any{typedKey + "NS": v.Value}
	case *types.AttributeValueMemberBS:
		return map[string]any{typedKey + "BS": v.Value}
	}
	panic(fmt.Sprintf("store: an attribute value of type %T", av))
}

func jsonMap(m map[string]types.AttributeValue) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = jsonValue(v)
	}
	return out
}

// fromJSONValue reverses jsonValue, from JSON decoded with UseNumber.
func fromJSONValue(v any) (types.AttributeValue, error) {
	switch v := v.(type) {
	case string:
		return &types.AttributeValueMemberS{Value: v}, nil
	case json.Number:
		return &types.AttributeValueMemberN{Value: string(v)}, nil
	case bool:
		return &types.AttributeValueMemberBOOL{Value: v}, nil
	case nil:
		return &types.AttributeValueMemberNULL{Value: true}, nil
	case []any:
		l := make([]types.AttributeValue, len(v))
		for i, e := range v {
			av, err := fromJSONValue(e)
			if err != nil {
				return nil, err
			}
			l[i] = av
		}
		return &types.AttributeValueMemberL{Value: l}, nil
	case map[string]any:
		if len(v) == 1 {
			for k, inner := range v {
				if typ, ok := strings.CutPrefix(k, typedKey); ok {
					return fromTyped(typ, inner)
				}
			}
		}
		return fromJSONMap(v)
	}
	return nil, fmt.Errorf("a JSON value of type %T", v)
}

// fromJSONMap reads a JSON object as an M.
func fromJSONMap(v map[string]any) (*types.AttributeValueMemberM, error) {
	m := make(map[string]types.AttributeValue, len(v))
	for k, e := range v {
		av, err := fromJSONValue(e)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", k, err)
		}
		m[k] = av
	}
	return &types.AttributeValueMemberM{Value: m}, nil
}

// fromTyped reads the value of a marked object of type typ.
func fromTyped(typ string, v any) (types.AttributeValue, error) {
	strs := func() ([]string, error) {
		notStrings := fmt.Errorf("a %s that is not a list of strings", typ)
		l, ok := v.([]any)
		if !ok && v != nil {
			return nil, notStrings
		}
		out := make([]string, len(l))
		for i, e := range l {
			if out[i], ok = e.(string); !ok {
				return nil, notStrings
			}
		}
		return out, nil
	}
	switch typ {
	case "M":
		m, ok := v.(map[string]any)
		if !ok {
			return nil, errors.New("a marked map that is not an object")
		}
		return fromJSONMap(m)
	case "B":
		s, ok := v.(string)
		b, err := base64.StdEncoding.DecodeString(s)
		if !ok || err != nil {
			return nil, errors.New("a B that is not base64")
		}
		return &types.AttributeValueMemberB{Value: b}, nil
	case "SS":
		ss, err := strs()
		return &types.AttributeValueMemberSS{Value: ss}, err
	case "NS":
		ns, err := strs()
		return &types.AttributeValueMemberNS{Value: ns}, err
	case "BS":
		ss, err := strs()
		if err != nil {
			return nil, err
		}
		bs := make([][]byte, len(ss))
		for i, s := range ss {
			if bs[i], err = base64.StdEncoding.DecodeString(s); err != nil {
				return nil, errors.New("a BS that is not base64")
			}
		}
		return &types.AttributeValueMemberBS{Value: bs}, nil
	}
	return nil, fmt.Errorf("a marked value of unknown type %q", typ)
}
