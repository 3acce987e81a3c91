package telemetry

import (
	"encoding/json"
	"testing"

	"go.opentelemetry.io/otel/attribute"
)

// TestSliceAttributesEncodeAsOTLPArrays: each element of a slice attribute
// is encoded as a scalar of its type is (OTLP/JSON: int64 as a string).
func TestSliceAttributesEncodeAsOTLPArrays(t *testing.T) {
	for v, want := range map[attribute.Value]string{
		attribute.StringSliceValue([]string{"a", "b"}): `{"arrayValue":{"values":[{"stringValue":"a"},{"stringValue":"b"}]}}`,
		attribute.Int64SliceValue([]int64{1, -2}):      `{"arrayValue":{"values":[{"intValue":"1"},{"intValue":"-2"}]}}`,
		attribute.BoolSliceValue([]bool{true}):         `{"arrayValue":{"values":[{"boolValue":true}]}}`,
		attribute.Float64SliceValue([]float64{0.5}):    `{"arrayValue":{"values":[{"doubleValue":0.5}]}}`,
		attribute.StringSliceValue(nil):                `{"arrayValue":{"values":null}}`,
	} {
		b, err := json.Marshal(anyValue(v))
		if err != nil || string(b) != want {
			t.Errorf("%v: %s (%v), want %s", v.Emit(), b, err, want)
		}
	}
}
