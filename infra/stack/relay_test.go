package stack_test

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/conveyor/conveyor/internal/job"
	"github.com/conveyor/conveyor/internal/resources"
)

// TestEventRelay: the table streams new images; the relay's mapping reads
// it filtered to new event items, with partial batch failures, bisection,
// bounded retries and an on-failure queue; the bus has an archive of the
// environment's events; the relay may send to the system tier and its
// failure queue only.
func TestEventRelay(t *testing.T) {
	t.Parallel()
	each(t, func(t *testing.T, s *synthesized) {
		m := s.def.EventStream
		table := s.logicalID(t, "AWS::DynamoDB::Table", "TableName", s.def.Table.Name)
		failures := s.logicalID(t, "AWS::SQS::Queue", "QueueName", m.FailureQueueName)
		check(t, "table stream", func() {
			s.hasProps("AWS::DynamoDB::Table", obj(map[string]any{
				"TableName":           s.def.Table.Name,
				"StreamSpecification": map[string]any{"StreamViewType": resources.StreamViewNewImage},
			}))
		})
		check(t, "relay mapping", func() {
			s.hasProps("AWS::Lambda::EventSourceMapping", obj(map[string]any{
				"EventSourceArn":                 getAtt(table, "StreamArn"),
				"FunctionName":                   ref(s.functionID(t, resources.FuncRelay)),
				"StartingPosition":               m.StartingPosition,
				"BatchSize":                      m.BatchSize,
				"MaximumBatchingWindowInSeconds": int(m.BatchingWindow.Seconds()),
				"ParallelizationFactor":          m.ParallelizationFactor,
				"MaximumRetryAttempts":           m.MaxRetries,
				"BisectBatchOnFunctionError":     true,
				"FunctionResponseTypes":          []any{"ReportBatchItemFailures"},
				"FilterCriteria":                 map[string]any{"Filters": []any{map[string]any{"Pattern": m.Filter}}},
				"DestinationConfig":              map[string]any{"OnFailure": map[string]any{"Destination": getAtt(failures, "Arn")}},
			}))
		})
		var pattern map[string]any
		_ = json.Unmarshal([]byte(m.Filter), &pattern)
		if !cmp.Equal(pattern["eventName"], []any{"INSERT"}) {
			t.Errorf("filter %s does not keep to inserts", m.Filter)
		}
		check(t, "archive", func() {
			s.hasProps("AWS::Events::Archive", obj(map[string]any{
				"ArchiveName":   s.def.EventArchive.Name,
				"EventPattern":  map[string]any{"source": []any{resources.EventSource(s.def.Env)}},
				"RetentionDays": int(s.def.EventArchive.Retention.Hours() / 24),
			}))
		})
		// SendMessage goes to exactly the system queue and the failure queue.
		system := getAtt(s.logicalID(t, "AWS::SQS::Queue", "QueueName", s.def.Queues[slices.IndexFunc(s.def.Queues, func(q resources.Queue) bool { return q.Tier == job.System })].Name), "Arn")
		var targets []any
		for _, d := range policyDocs(t, s, resources.FuncRelay) {
			for _, st := range d.(map[string]any)["Statement"].([]any) {
				stm := st.(map[string]any)
				if slices.Contains(strs(stm["Action"]), "sqs:SendMessage") {
					if r, ok := stm["Resource"].([]any); ok {
						targets = append(targets, r...)
					} else {
						targets = append(targets, stm["Resource"])
					}
				}
			}
		}
		want := []any{system, getAtt(failures, "Arn")}
		less := func(a, b any) int {
			x, _ := json.Marshal(a)
			y, _ := json.Marshal(b)
			return strings.Compare(string(x), string(y))
		}
		slices.SortFunc(targets, less)
		slices.SortFunc(want, less)
		if diff := cmp.Diff(want, targets); diff != "" {
			t.Errorf("relay's SendMessage resources (-want +got):\n%s", diff)
		}
	})
}
