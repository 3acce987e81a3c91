package stack_test

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/conveyor/conveyor/internal/resources"
)

// userScheduleActions are the schedules function's rights over the users'
// recurring schedules (schedules.go).
var userScheduleActions = []string{"iam:PassRole", "scheduler:CreateSchedule", "scheduler:DeleteSchedule", "scheduler:UpdateSchedule"}

func TestUserSchedulesInfrastructure(t *testing.T) {
	t.Parallel()
	each(t, func(t *testing.T, s *synthesized) {
		groups := s.ofType("AWS::Scheduler::ScheduleGroup")
		names := []any{}
		for _, g := range groups {
			names = append(names, g.Properties["Name"])
		}
		if !slices.Contains(names, any(s.def.ScheduleGroup)) {
			t.Errorf("schedule groups %v, want %s", names, s.def.ScheduleGroup)
		}
		// The role Scheduler assumes may invoke the recovery function only.
		recovery := s.functionID(t, resources.FuncRecovery)
		found := false
		for id, r := range s.ofType("AWS::IAM::Role") {
			doc := r.Properties["AssumeRolePolicyDocument"].(map[string]any)
			st := doc["Statement"].([]any)[0].(map[string]any)
			svc, _ := st["Principal"].(map[string]any)["Service"].(string)
			if svc != "scheduler.amazonaws.com" || st["Condition"] == nil {
				continue
			}
			for _, p := range s.ofType("AWS::IAM::Policy") {
				for _, role := range p.Properties["Roles"].([]any) {
					if role.(map[string]any)["Ref"] != id {
						continue
					}
					for _, st := range p.Properties["PolicyDocument"].(map[string]any)["Statement"].([]any) {
						st := st.(map[string]any)
						res, _ := json.Marshal(st["Resource"])
						if slices.Equal(strs(st["Action"]), []string{"lambda:InvokeFunction"}) && strings.Contains(string(res), `"`+recovery+`"`) {
							found = true
						}
					}
				}
			}
		}
		if !found {
			t.Error("no scheduler role (with a source-account condition) that may invoke the recovery function")
		}
		// The schedules function knows where to put schedules.
		env := s.res[s.functionID(t, resources.FuncSchedules)].Properties["Environment"].(map[string]any)["Variables"].(map[string]any)
		for _, k := range []string{"CONVEYOR_SCHEDULE_GROUP", "CONVEYOR_SCHEDULE_TARGET_ARN", "CONVEYOR_SCHEDULE_ROLE_ARN"} {
			if env[k] == nil {
				t.Errorf("the schedules function lacks %s", k)
			}
		}
	})
}
