package store

import (
	"errors"
	"fmt"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// DecodeEvents reads the events of an event item — one write's, oldest
// first — from a table stream record's new image (the relay's input). It
// fails when the image is missing (the stream must carry NEW_IMAGE) or is
// not a whole event item.
func DecodeEvents(image map[string]events.DynamoDBAttributeValue) ([]EventRecord, error) {
	if len(image) == 0 {
		return nil, errors.New("the stream record has no new image (the table's stream must be NEW_IMAGE or NEW_AND_OLD_IMAGES)")
	}
	item, err := itemOf(image)
	if err != nil {
		return nil, err
	}
	evs, err := decodeEvents(item)
	if err != nil {
		return nil, err
	}
	for _, ev := range evs {
		if ev.JobID == "" || ev.Seq < 1 || ev.Type == "" || ev.At.IsZero() {
			return nil, fmt.Errorf("decoding an event item: jobId, seq, type and at are required (got %q, %d, %q, %v)", ev.JobID, ev.Seq, ev.Type, ev.At)
		}
	}
	return evs, nil
}

// itemOf converts a stream image (aws-lambda-go's attribute values) into
// the SDK's attribute values, for attributevalue.UnmarshalMap.
func itemOf(image map[string]events.DynamoDBAttributeValue) (map[string]types.AttributeValue, error) {
	out := make(map[string]types.AttributeValue, len(image))
	for k, v := range image {
		av, err := attributeOf(v)
		if err != nil {
			return nil, fmt.Errorf("attribute %s: %w", k, err)
		}
		out[k] = av
	}
	return out, nil
}

func attributeOf(v events.DynamoDBAttributeValue) (types.AttributeValue, error) {
	switch v.DataType() {
	case events.DataTypeString:
		return &types.AttributeValueMemberS{Value: v.String()}, nil
	case events.DataTypeNumber:
		return &types.AttributeValueMemberN{Value: v.Number()}, nil
	case events.DataTypeBinary:
		return &types.AttributeValueMemberB{Value: v.Binary()}, nil
	case events.DataTypeBoolean:
		return &types.AttributeValueMemberBOOL{Value: v.Boolean()}, nil
	case events.DataTypeNull:
		return &types.AttributeValueMemberNULL{Value: true}, nil
	case events.DataTypeStringSet:
		return &types.AttributeValueMemberSS{Value: v.StringSet()}, nil
	case events.DataTypeNumberSet:
		return &types.AttributeValueMemberNS{Value: v.NumberSet()}, nil
	case events.DataTypeBinarySet:
		return &types.AttributeValueMemberBS{Value: v.BinarySet()}, nil
	case events.DataTypeList:
		var l []types.AttributeValue
		for _, e := range v.List() {
			av, err := attributeOf(e)
			if err != nil {
				return nil, err
			}
			l = append(l, av)
		}
		return &types.AttributeValueMemberL{Value: l}, nil
	case events.DataTypeMap:
		m, err := itemOf(v.Map())
		if err != nil {
			return nil, err
		}
		return &types.AttributeValueMemberM{Value: m}, nil
	}
	return nil, fmt.Errorf("unsupported attribute type %d", v.DataType())
}
