package iamcheck

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/conveyor/conveyor/internal/aws/awsenv"
	"github.com/conveyor/conveyor/internal/resources"
)

// FunctionStandIns are the local stack's stand-ins a deployed function's
// main selects only under the local stack (config Env local): the graph
// from the function's main does not enter them, so their requests are not
// held against the role (the scenario records and checks them, as the
// function's own).
var FunctionStandIns = []string{
	"github.com/conveyor/conveyor/internal/handler.AdminLocal",
	"github.com/conveyor/conveyor/internal/handler.APILocal",
}

// FunctionsReach is the ReachConfig of the deployed functions under root
// (the module's root): every functions/<name> main, built as `make build`
// builds it, its local stand-ins and the local stack's packages not
// entered.
func FunctionsReach(root string) ReachConfig {
	return ReachConfig{Dir: root, Patterns: []string{"./functions/..."}, Tags: resources.LambdaBuildTags,
		StandIns: FunctionStandIns, LocalPrefix: "github.com/conveyor/conveyor/localstack/"}
}

// Unrecorded is a reachable action no recorded request of its function
// made, and that its role does not allow on any resource it was evaluated
// on.
type Unrecorded struct {
	Function, Action string
	// Operation is the SDK call that needs the action, with its shortest
	// path from the function's main.
	Operation Operation
	// On are the resources (and condition keys) it was evaluated on, each
	// with the evaluator's answer; empty when the role grants the action on
	// no resource and no resource policy of its service exists.
	On []Evaluated
}

// Evaluated is one resource an unrecorded action was evaluated on.
type Evaluated struct {
	Resource string
	Context  map[string]string
	// From says where the resource comes from: "recorded by <function>"
	// or "granted by the role".
	From     string
	Decision Decision
}

func (u Unrecorded) String() string {
	s := fmt.Sprintf("%s: %s (%s) is reachable, never recorded, and ", u.Function, u.Action, u.Operation.Call)
	if len(u.On) == 0 {
		s += "granted on no resource"
	} else {
		var on []string
		for _, e := range u.On {
			r := e.Resource
			if len(e.Context) > 0 {
				r += " with " + pairs(e.Context)
			}
			on = append(on, fmt.Sprintf("%s (%s): %s", r, e.From, e.Decision.Result))
		}
		s += "denied on " + strings.Join(on, "; ")
	}
	return s + "\n    " + u.Operation.ChainString()
}

// ReachableDenied holds every action of the reachable operations against
// its function's role in t, and returns those allowed on none of the
// resources it is evaluated on (denied), sorted by function and action,
// and those it evaluated and found allowed on some (allowed): the
// reachable actions the static side alone vouches for.
//
// An action the function's recorded calls made is left to Denied, which
// evaluates it on the very resources it was made on. Any other is
// evaluated on every resource it may name: those (with the condition
// keys) the other functions' recorded calls made it on — the stack's
// resources that action is used on, whichever function's code path
// reaches it —, those the role's own Allow statements name for it
// (wildcards filled in, no condition key), and those with a resource
// policy of its service. The action is reported when its role allows it
// on none of them: a call the function can make that, in AWS, is denied
// wherever it goes. Which resource an unrecorded call would name is not
// known statically; allowed on one, the action is not reported.
func ReachableDenied(ev Evaluator, t *Template, account string, ops []Operation, calls []awsenv.Call) (denied []Unrecorded, allowed []Grant, err error) {
	type fa struct{ fn, action string }
	recorded := map[fa]bool{}
	type onRes struct {
		resource string
		ctx      map[string]string
		from     string
	}
	byAction := map[string][]onRes{}
	seenRes := map[string]bool{}
	for _, c := range calls {
		recorded[fa{c.Function, c.Action}] = true
		if c.Resource == "" {
			continue
		}
		k := c.Function + "\x00" + c.Action + "\x00" + c.Resource + "\x00" + pairs(c.Context)
		if !seenRes[k] {
			seenRes[k] = true
			byAction[c.Action] = append(byAction[c.Action], onRes{c.Resource, c.Context, "recorded by " + c.Function})
		}
	}

	var out []*Unrecorded
	var reqs []Request
	var owner []int // reqs[i] belongs to out[owner[i]]
	var from []onRes
	done := map[fa]bool{}
	for _, op := range ops {
		for _, action := range op.Actions {
			k := fa{op.Function, action}
			if recorded[k] || done[k] {
				continue
			}
			done[k] = true
			u := &Unrecorded{Function: op.Function, Action: action, Operation: op}
			role, ok := t.Roles[op.Function]
			if !ok {
				u.On = []Evaluated{{From: "the template", Decision: Decision{Result: "NoRole"}}}
				out = append(out, u)
				continue
			}
			var on []onRes
			for _, r := range byAction[action] {
				if r.from != "recorded by "+op.Function {
					on = append(on, r)
				}
			}
			for _, r := range roleResources(role, action) {
				on = append(on, onRes{r, nil, "granted by the role"})
			}
			for _, r := range resourcePolicyResources(t, action) {
				on = append(on, onRes{r, nil, "its resource policy"})
			}
			out = append(out, u)
			for _, r := range on {
				rc := map[string]string{"aws:SecureTransport": "true", "aws:PrincipalAccount": account, "aws:PrincipalArn": role.ARN}
				for k, v := range r.ctx {
					rc[k] = v
				}
				reqs = append(reqs, Request{Role: op.Function, Principal: role.ARN, Action: action, Resource: r.resource, Account: account,
					Context: rc, ResourcePolicy: t.ResourcePolicyFor(r.resource)})
				owner = append(owner, len(out)-1)
				from = append(from, r)
			}
		}
	}
	if len(reqs) > 0 {
		identity := map[string][]map[string]any{}
		for fn, r := range t.Roles {
			identity[fn] = r.Policies
		}
		ds, err := ev.Evaluate(identity, t.ResourcePolicies, reqs)
		if err != nil {
			return nil, nil, err
		}
		isAllowed := map[int]bool{}
		for i, d := range ds {
			if d.Allowed() {
				isAllowed[owner[i]] = true
				continue
			}
			u := out[owner[i]]
			u.On = append(u.On, Evaluated{Resource: from[i].resource, Context: from[i].ctx, From: from[i].from, Decision: d})
		}
		var kept []*Unrecorded
		for i, u := range out {
			if isAllowed[i] {
				allowed = append(allowed, Grant{u.Function, u.Action})
			} else {
				kept = append(kept, u)
			}
		}
		out = kept
	}
	for _, u := range out {
		denied = append(denied, *u)
	}
	sort.Slice(denied, func(i, j int) bool {
		if denied[i].Function != denied[j].Function {
			return denied[i].Function < denied[j].Function
		}
		return denied[i].Action < denied[j].Action
	})
	sort.Slice(allowed, func(i, j int) bool {
		if allowed[i].Function != allowed[j].Function {
			return allowed[i].Function < allowed[j].Function
		}
		return allowed[i].Action < allowed[j].Action
	})
	return denied, allowed, nil
}

// roleResources are the resources role's Allow statements name for
// action, their wildcards filled in (an ARN the statement matches).
func roleResources(role *Role, action string) []string {
	var out []string
	for _, p := range role.Policies {
		for _, st := range asList(p["Statement"]) {
			s := asMap(st)
			if s["Effect"] != "Allow" {
				continue
			}
			var names []string
			for _, a := range asList(s["Action"]) {
				names = append(names, fmt.Sprint(a))
			}
			if !grants(names, action) {
				continue
			}
			for _, r := range asList(s["Resource"]) {
				r := fill(fmt.Sprint(r))
				if !slices.Contains(out, r) {
					out = append(out, r)
				}
			}
		}
	}
	sort.Strings(out)
	return out
}

// resourcePolicyResources are the resources with a resource policy in t
// of action's service.
func resourcePolicyResources(t *Template, action string) []string {
	service, _, _ := strings.Cut(action, ":")
	var out []string
	for arn := range t.ResourcePolicies {
		if parts := strings.SplitN(arn, ":", 4); len(parts) == 4 && parts[2] == service {
			out = append(out, arn)
		}
	}
	sort.Strings(out)
	return out
}

// fill is an ARN the pattern matches: each wildcard a letter ("*" alone
// stays: any resource).
func fill(pattern string) string {
	if pattern == "*" {
		return pattern
	}
	return strings.NewReplacer("*", "x", "?", "x").Replace(pattern)
}

// Unreasoned splits ReachableDenied's findings by the list
// (infra/iam/reachable.yaml, for one environment): those it gives no
// reason for (unlisted), its pairs that are not a finding (stale: no
// longer reachable, now recorded, or now allowed — the list must stay
// exact), and the findings it gives a reason for (listed). functions
// stand for an entry's "all".
func (l AllowList) Unreasoned(found []Unrecorded, functions []string) (unlisted []Unrecorded, stale []Grant, listed map[Grant]string) {
	isFound := map[Grant]bool{}
	listed = map[Grant]string{}
	for _, u := range found {
		g := Grant{u.Function, u.Action}
		isFound[g] = true
		if reason, ok := l.covers(u.Function, u.Action); ok {
			listed[g] = reason
		} else {
			unlisted = append(unlisted, u)
		}
	}
	l.each(functions, func(_ AllowEntry, g Grant) {
		if !isFound[g] {
			stale = append(stale, g)
		}
	})
	return unlisted, stale, listed
}
