// Package esm pauses and resumes a tier in AWS through its queue's Lambda
// event source mapping (admin.Switch): the adapter of the Lambda API. It is
// its own package so that only the function that switches tiers (admin)
// links the Lambda client.
package esm

import (
	"context"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/lambda"

	"github.com/conveyor/conveyor/internal/config"
	"github.com/conveyor/conveyor/internal/job"
)

// Updater is the part of the Lambda client Switch uses.
type Updater interface {
	UpdateEventSourceMapping(ctx context.Context, in *lambda.UpdateEventSourceMappingInput, optFns ...func(*lambda.Options)) (*lambda.UpdateEventSourceMappingOutput, error)
}

// Switch pauses a tier in AWS by disabling its queue's event source
// mapping (Lambda stops polling; messages wait in the queue, their
// retention keeps running) and resumes it by enabling it again.
type Switch struct {
	Lambda Updater
	// UUIDs of each tier's event source mapping (config.Config.ESMUUIDs,
	// from CONVEYOR_ESM_UUID_<TIER>).
	UUIDs map[job.Tier]string
}

// New returns the Switch of the mappings uuids, with a Lambda client made
// from awsCfg.
func New(awsCfg aws.Config, uuids map[job.Tier]string) Switch {
	return Switch{Lambda: lambda.NewFromConfig(awsCfg), UUIDs: uuids}
}

// SetEnabled implements admin.Switch.
func (s Switch) SetEnabled(ctx context.Context, tier job.Tier, enabled bool) error {
	uuid := s.UUIDs[tier]
	if uuid == "" {
		return fmt.Errorf("no event source mapping is configured for the %s tier (%s)", tier, config.VarESMUUID(tier))
	}
	if _, err := s.Lambda.UpdateEventSourceMapping(ctx, &lambda.UpdateEventSourceMappingInput{UUID: aws.String(uuid), Enabled: aws.Bool(enabled)}); err != nil {
		return fmt.Errorf("updating the %s tier's event source mapping: %w", tier, err)
	}
	return nil
}
