package resources

import "github.com/conveyor/conveyor/internal/job"

// The tiers and environments moved to internal/job (a job's tier is a
// job.Tier, not a string cast back). These deprecated aliases keep the code
// that still names them here compiling while it moves (localstack/cmd/bench,
// and branches written before the move); new code uses job's names. Delete
// this file once `grep -rn 'resources\.\(Tier\|Env\|High\|…\)'` finds
// nothing.

// Tier is job.Tier.
//
// Deprecated: use job.Tier.
type Tier = job.Tier

// Env is job.Env.
//
// Deprecated: use job.Env.
type Env = job.Env

// Deprecated: use job's tiers and environments.
const (
	High    = job.High
	Medium  = job.Medium
	Low     = job.Low
	System  = job.System
	Local   = job.Local
	Staging = job.Staging
	ProdRU  = job.ProdRU
	ProdEN  = job.ProdEN
)

// Deprecated: use job.Tiers, job.PublishTiers, job.Envs and job.CloudEnvs.
var (
	Tiers        = job.Tiers
	PublishTiers = job.PublishTiers
	Envs         = job.Envs
	CloudEnvs    = job.CloudEnvs
)

// ParseTier is job.ParseTier.
//
// Deprecated: use job.ParseTier.
func ParseTier(s string) (Tier, error) { return job.ParseTier(s) }

// ParseEnv is job.ParseEnv.
//
// Deprecated: use job.ParseEnv.
func ParseEnv(s string) (Env, error) { return job.ParseEnv(s) }

// TierForPlan is job.TierForPlan.
//
// Deprecated: use job.TierForPlan.
func TierForPlan(plan string) Tier { return job.TierForPlan(plan) }
