package esm

import (
	"context"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	"github.com/conveyor/conveyor/internal/job"
)

// fakeLambda records the updates; the emulator has no event source
// mappings for SQS to update.
type fakeLambda struct {
	got []*lambda.UpdateEventSourceMappingInput
}

func (f *fakeLambda) UpdateEventSourceMapping(_ context.Context, in *lambda.UpdateEventSourceMappingInput, _ ...func(*lambda.Options)) (*lambda.UpdateEventSourceMappingOutput, error) {
	f.got = append(f.got, in)
	return &lambda.UpdateEventSourceMappingOutput{}, nil
}

func TestSwitch(t *testing.T) {
	t.Parallel()
	uuids := map[job.Tier]string{job.Low: "uuid-low", job.High: "uuid-high"}
	fl := &fakeLambda{}
	sw := Switch{Lambda: fl, UUIDs: uuids}
	if err := sw.SetEnabled(context.Background(), job.Low, false); err != nil {
		t.Fatal(err)
	}
	if err := sw.SetEnabled(context.Background(), job.Medium, false); err == nil || !strings.Contains(err.Error(), "CONVEYOR_ESM_UUID_MEDIUM") {
		t.Errorf("a tier without a mapping: %v", err)
	}
	if len(fl.got) != 1 || aws.ToString(fl.got[0].UUID) != "uuid-low" || aws.ToBool(fl.got[0].Enabled) {
		t.Errorf("update: %+v", fl.got)
	}
}
