// Package schedules wires the users' recurring schedules service of a
// function's environment: the schedules function manages them (its
// routes), the recovery function fires their ticks. It is apart from both
// so that each links the other's nothing: recovery no HTTP router and no
// JWT key, schedules no sweep.
package schedules

import (
	"github.com/conveyor/conveyor/internal/aws/scheduler"
	"github.com/conveyor/conveyor/internal/handler"
	"github.com/conveyor/conveyor/internal/jobs"
	"github.com/conveyor/conveyor/internal/schedule"
	"github.com/conveyor/conveyor/internal/store"
)

// Service is the users' recurring schedules service of env, kept in st
// and, when the configuration names a schedule group, in EventBridge
// Scheduler, with js validating their job templates and submitting the
// ticks' jobs.
func Service(env handler.Env, st *store.Store, js *jobs.Service) *schedule.Service {
	cfg := env.Config
	scfg := schedule.Config{Store: st, Jobs: js, Now: env.Now, Logger: env.Log()}
	if cfg.ScheduleGroup != "" {
		scfg.Backend = scheduler.New(env.AWS, cfg.ScheduleGroup, cfg.ScheduleTargetARN, cfg.ScheduleRoleARN)
	}
	return schedule.New(scfg)
}
