// Package schedules wires the users' recurring schedules service of a
// function's environment: the schedules function manages them (its
// routes), the recovery function fires their ticks. It is apart from both
// so that each links the other's nothing: recovery no HTTP router and no
// JWT key, schedules no sweep.
package schedules

import (
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/scheduler"

	"github.com/conveyor/conveyor/internal/handler"
	"github.com/conveyor/conveyor/internal/jobs"
	"github.com/conveyor/conveyor/internal/schedule"
)

// Service is the users' recurring schedules service of env: in
// EventBridge Scheduler when the configuration names a schedule group,
// with js validating their job templates and submitting the ticks' jobs.
func Service(env handler.Env, db *dynamodb.Client, js *jobs.Service) *schedule.Service {
	cfg := env.Config
	scfg := schedule.Config{DB: db, Table: cfg.Table, Jobs: js, Now: env.Now, Logger: env.Log()}
	if cfg.ScheduleGroup != "" {
		scfg.Backend = schedule.SchedulerBackend{Client: scheduler.NewFromConfig(env.AWS), Group: cfg.ScheduleGroup,
			TargetARN: cfg.ScheduleTargetARN, RoleARN: cfg.ScheduleRoleARN}
	}
	return schedule.New(scfg)
}
