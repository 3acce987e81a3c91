package store

import (
	"encoding/json"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/conveyor/conveyor/internal/job"
)

// A job.Doc (a kind's params or result, a schedule's job template) is JSON
// whose shape belongs to its kind. In the table it is a map attribute (NULL
// when empty), so a stored job stays readable in the console and by the
// table's other readers. attributevalue sees a job.Doc as the bytes it is,
// so the items that hold documents go through EncodeDocs after
// attributevalue.MarshalMap and through DecodeDocs before
// attributevalue.UnmarshalMap.

// jobDocs are the attributes of a job item that hold documents.
var jobDocs = []string{"params", "result"}

// EncodeDocs turns the named attributes of item, as attributevalue encodes
// a job.Doc field (binary), into the map a document is stored as (NULL
// when the document is empty). Absent and NULL attributes are left as they
// are.
func EncodeDocs(item map[string]types.AttributeValue, names ...string) error {
	for _, n := range names {
		b, ok := item[n].(*types.AttributeValueMemberB)
		if !ok {
			continue
		}
		av, err := docAttribute(job.Doc(b.Value))
		if err != nil {
			return err
		}
		item[n] = av
	}
	return nil
}

// DecodeDocs returns item with each named attribute that holds a stored
// document turned back into its JSON (binary), which attributevalue
// decodes into a job.Doc field. item itself is not changed.
func DecodeDocs(item map[string]types.AttributeValue, names ...string) (map[string]types.AttributeValue, error) {
	out, copied := item, false
	for _, n := range names {
		av, ok := item[n]
		if !ok {
			continue
		}
		if _, null := av.(*types.AttributeValueMemberNULL); null {
			continue
		}
		var v any
		if err := attributevalue.Unmarshal(av, &v); err != nil {
			return nil, fmt.Errorf("decoding a job document: %w", err)
		}
		b, err := job.Marshal(v)
		if err != nil {
			return nil, fmt.Errorf("decoding a job document: %w", err)
		}
		if !copied {
			out, copied = make(map[string]types.AttributeValue, len(item)), true
			for k, v := range item {
				out[k] = v
			}
		}
		out[n] = &types.AttributeValueMemberB{Value: b}
	}
	return out, nil
}

// docAttribute is how d is stored: a map, NULL when it is empty.
func docAttribute(d job.Doc) (types.AttributeValue, error) {
	if d.Empty() {
		return &types.AttributeValueMemberNULL{Value: true}, nil
	}
	var v any
	if err := json.Unmarshal(d, &v); err != nil {
		return nil, fmt.Errorf("encoding a job document: %w", err)
	}
	return attributevalue.Marshal(v)
}

// marshalJob renders j as an item (without its keys).
func marshalJob(j *job.Job) (map[string]types.AttributeValue, error) {
	item, err := attributevalue.MarshalMap(j)
	if err != nil {
		return nil, err
	}
	return item, EncodeDocs(item, jobDocs...)
}

// unmarshalJob reads a job item into j.
func unmarshalJob(item map[string]types.AttributeValue, j *job.Job) error {
	item, err := expandJob(item)
	if err != nil {
		return err
	}
	item, err = DecodeDocs(item, jobDocs...)
	if err != nil {
		return err
	}
	if err := attributevalue.UnmarshalMap(item, j); err != nil {
		return err
	}
	if j.ID == "" {
		// A compact item and its index entries name the job by key only.
		j.ID, _ = jobIDOf(item)
	}
	return nil
}
