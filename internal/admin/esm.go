package admin

import (
	"context"
	"fmt"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/lambda"

	"github.com/conveyor/conveyor/internal/resources"
)

// ESMEnvPrefix names the variables that hold each tier's event source
// mapping UUID: CONVEYOR_ESM_UUID_HIGH, …_MEDIUM, …_LOW, …_SYSTEM.
const ESMEnvPrefix = "CONVEYOR_ESM_UUID_"

// ESMUpdater is the part of the Lambda client ESMSwitch uses.
type ESMUpdater interface {
	UpdateEventSourceMapping(ctx context.Context, in *lambda.UpdateEventSourceMappingInput, optFns ...func(*lambda.Options)) (*lambda.UpdateEventSourceMappingOutput, error)
}

// ESMSwitch pauses a tier in AWS by disabling its queue's event source
// mapping (Lambda stops polling; messages wait in the queue, their
// retention keeps running) and resumes it by enabling it again.
type ESMSwitch struct {
	Lambda ESMUpdater
	// UUIDs of each tier's event source mapping.
	UUIDs map[resources.Tier]string
}

// ESMUUIDsFromEnv reads every tier's mapping UUID through getenv; tiers
// without one are left out.
func ESMUUIDsFromEnv(getenv func(string) string) map[resources.Tier]string {
	out := map[resources.Tier]string{}
	for _, t := range resources.Tiers {
		if v := getenv(ESMEnvPrefix + strings.ToUpper(string(t))); v != "" {
			out[t] = v
		}
	}
	return out
}

// SetEnabled implements Switch.
func (s ESMSwitch) SetEnabled(ctx context.Context, tier resources.Tier, enabled bool) error {
	uuid := s.UUIDs[tier]
	if uuid == "" {
		return fmt.Errorf("no event source mapping is configured for the %s tier (%s%s)", tier, ESMEnvPrefix, strings.ToUpper(string(tier)))
	}
	if _, err := s.Lambda.UpdateEventSourceMapping(ctx, &lambda.UpdateEventSourceMappingInput{UUID: aws.String(uuid), Enabled: aws.Bool(enabled)}); err != nil {
		return fmt.Errorf("updating the %s tier's event source mapping: %w", tier, err)
	}
	return nil
}
