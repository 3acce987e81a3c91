package job

import (
	"fmt"
	"strings"
)

// Env names a deployment environment.
type Env string

// The environments Conveyor is deployed to. Local is the offline stack.
const (
	Local   Env = "local"
	Staging Env = "staging"
	ProdRU  Env = "prod-ru"
	ProdEN  Env = "prod-en"
)

// Envs lists every environment, local first.
var Envs = []Env{Local, Staging, ProdRU, ProdEN}

// CloudEnvs lists the environments that get a CDK stack.
var CloudEnvs = []Env{Staging, ProdRU, ProdEN}

// ParseEnv returns the Env named s, or an error naming the valid ones.
func ParseEnv(s string) (Env, error) { return parseName("environment", Envs, s) }

// Production reports whether the environment serves real users; production
// tables get deletion protection and retained resources.
func (e Env) Production() bool { return e == ProdRU || e == ProdEN }

// Tier is a priority tier; each has its own FIFO queue and DLQ.
type Tier string

// The four tiers.
const (
	High   Tier = "high"
	Medium Tier = "medium"
	Low    Tier = "low"
	System Tier = "system"
)

// Tiers lists every tier, highest priority first.
var Tiers = []Tier{High, Medium, Low, System}

// PublishTiers are the tiers whose queues the publisher consumes.
var PublishTiers = []Tier{High, Medium, Low}

// ParseTier returns the Tier named s, or an error naming the valid ones.
func ParseTier(s string) (Tier, error) { return parseName("tier", Tiers, s) }

// parseName returns the value of all spelled s, or an error naming them
// ("unknown tier "x" (want one of high, medium, low, system)").
func parseName[T ~string](kind string, all []T, s string) (T, error) {
	names := make([]string, len(all))
	for i, v := range all {
		if string(v) == s {
			return v, nil
		}
		names[i] = string(v)
	}
	return "", fmt.Errorf("unknown %s %q (want one of %s)", kind, s, strings.Join(names, ", "))
}

// TierForPlan maps a user's plan to the tier its jobs run in. Unknown plans
// run in the low tier.
func TierForPlan(plan string) Tier {
	switch plan {
	case "enterprise", "corporate":
		return High
	case "standard", "pro":
		return Medium
	default:
		return Low
	}
}
