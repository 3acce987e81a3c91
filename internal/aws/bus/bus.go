// Package bus puts events on an EventBridge event bus (relay.Bus): the
// adapter of the EventBridge API. One Put is one PutEvents request.
package bus

import (
	"context"
	"errors"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	ebtypes "github.com/aws/aws-sdk-go-v2/service/eventbridge/types"

	"github.com/conveyor/conveyor/internal/config"
	"github.com/conveyor/conveyor/internal/relay"
)

// API is the part of the EventBridge client a Bus uses.
type API interface {
	PutEvents(ctx context.Context, in *eventbridge.PutEventsInput, opts ...func(*eventbridge.Options)) (*eventbridge.PutEventsOutput, error)
}

// Bus is one event bus.
type Bus struct {
	client API
	name   string
}

// New returns the bus named name, with an EventBridge client made from
// awsCfg.
func New(awsCfg aws.Config, name string) *Bus {
	return &Bus{client: eventbridge.NewFromConfig(awsCfg), name: name}
}

// For is the environment's bus (cfg.EventBus, CONVEYOR_EVENT_BUS), with an
// EventBridge client made from awsCfg: what the relay function puts on.
func For(awsCfg aws.Config, cfg config.Config) relay.Bus { return New(awsCfg, cfg.EventBus) }

// Put implements relay.Bus: entries go in one PutEvents request, each
// entry's refusal reported as its error code and message.
func (b *Bus) Put(ctx context.Context, entries []relay.Entry) ([]error, error) {
	in := make([]ebtypes.PutEventsRequestEntry, len(entries))
	for i, e := range entries {
		in[i] = ebtypes.PutEventsRequestEntry{
			EventBusName: aws.String(b.name), Source: aws.String(e.Source),
			DetailType: aws.String(e.DetailType), Detail: aws.String(e.Detail),
			Resources: []string{},
		}
		if !e.Time.IsZero() {
			in[i].Time = aws.Time(e.Time)
		}
	}
	out, err := b.client.PutEvents(ctx, &eventbridge.PutEventsInput{Entries: in})
	if err != nil {
		return nil, fmt.Errorf("putting %d events on bus %s: %w", len(entries), b.name, err)
	}
	errs := make([]error, len(entries))
	for i := range errs {
		switch {
		case i >= len(out.Entries):
			errs[i] = errors.New("no answer for the entry")
		case out.Entries[i].ErrorCode != nil:
			errs[i] = errors.New(aws.ToString(out.Entries[i].ErrorCode) + ": " + aws.ToString(out.Entries[i].ErrorMessage))
		}
	}
	return errs, nil
}
