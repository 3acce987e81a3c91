package resources

import "github.com/conveyor/conveyor/internal/job"

// The tiers and environments moved to internal/job (a job's tier is a
// job.Tier, not a string cast back). These aliases keep the code that still
// names them here compiling while it moves; new code uses job.Tier and
// job.Env.

// Tier is job.Tier.
//
// Deprecated: use job.Tier.
type Tier = job.Tier

// Env is job.Env.
//
// Deprecated: use job.Env.
type Env = job.Env

// Deprecated: use job.High, job.Medium, job.Low and job.Local.
const (
	High   = job.High
	Medium = job.Medium
	Low    = job.Low
	Local  = job.Local
)
