package iamcheck

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/conveyor/conveyor/internal/aws/awsenv"
)

// Evaluator runs infra/iam/simulate.mjs.
type Evaluator struct {
	// Script is the path of simulate.mjs.
	Script string
	// Modules is the node_modules directory holding the pinned
	// @cloud-copilot/iam-simulate.
	Modules string
}

// Decision is the evaluator's answer to one request.
type Decision struct {
	Result string `json:"result"`
	Detail string `json:"detail"`
}

// Allowed reports whether the request is allowed.
func (d Decision) Allowed() bool { return d.Result == "Allowed" }

// Request is one request as the evaluator takes it.
type Request struct {
	Role           string            `json:"role"`
	Principal      string            `json:"principal"`
	Action         string            `json:"action"`
	Resource       string            `json:"resource"`
	Account        string            `json:"account"`
	Context        map[string]string `json:"context"`
	ResourcePolicy string            `json:"resourcePolicy,omitempty"`
}

// Evaluate answers each request against the roles' policies and the
// resource policies, in order.
func (e Evaluator) Evaluate(identity map[string][]map[string]any, resource map[string]map[string]any, reqs []Request) ([]Decision, error) {
	in, err := json.Marshal(map[string]any{"identityPolicies": identity, "resourcePolicies": resource, "requests": reqs})
	if err != nil {
		return nil, err
	}
	cmd := exec.Command("node", e.Script)
	cmd.Env = append(os.Environ(), "IAM_SIMULATE_MODULES="+e.Modules)
	cmd.Stdin = bytes.NewReader(in)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("node %s: %v: %s", e.Script, err, stderr.String())
	}
	var ds []Decision
	if err := json.Unmarshal(out, &ds); err != nil {
		return nil, fmt.Errorf("reading the evaluator's answer: %w", err)
	}
	if len(ds) != len(reqs) {
		return nil, fmt.Errorf("the evaluator answered %d of %d requests", len(ds), len(reqs))
	}
	return ds, nil
}

// Finding is a request a role does not allow.
type Finding struct {
	Function, Action, Resource string
	Context                    map[string]string
	// Operations are the SDK operations that needed it.
	Operations []string
	Decision   Decision
}

func (f Finding) String() string {
	s := fmt.Sprintf("%s: %s on %s", f.Function, f.Action, f.Resource)
	if len(f.Context) > 0 {
		s += " with " + pairs(f.Context)
	}
	s += fmt.Sprintf(" (%s) is %s", strings.Join(f.Operations, ", "), f.Decision.Result)
	if f.Decision.Detail != "" {
		s += ": " + f.Decision.Detail
	}
	return s
}

// Denied evaluates every recorded call against its function's role in t
// and returns those not allowed, one per function, action, resource and
// context, sorted. A call whose resource the recorder could not derive,
// or a function the template has no role for, is a finding too.
func Denied(ev Evaluator, t *Template, account string, calls []awsenv.Call) ([]Finding, error) {
	type key struct{ fn, action, resource, ctx string }
	ops := map[key][]string{}
	var order []key
	var reqs []Request
	var findings []Finding
	for _, c := range calls {
		ctx := pairs(c.Context)
		k := key{c.Function, c.Action, c.Resource, ctx}
		if _, seen := ops[k]; !seen {
			order = append(order, k)
			role, ok := t.Roles[c.Function]
			switch {
			case c.Unknown != "":
				findings = append(findings, Finding{Function: c.Function, Action: c.Action, Decision: Decision{Result: "Unknown", Detail: c.Unknown}})
			case !ok:
				findings = append(findings, Finding{Function: c.Function, Action: c.Action, Resource: c.Resource, Decision: Decision{Result: "NoRole"}})
			default:
				rc := map[string]string{"aws:SecureTransport": "true", "aws:PrincipalAccount": account, "aws:PrincipalArn": role.ARN}
				for k, v := range c.Context {
					rc[k] = v
				}
				reqs = append(reqs, Request{Role: c.Function, Principal: role.ARN, Action: c.Action, Resource: c.Resource, Account: account,
					Context: rc, ResourcePolicy: t.ResourcePolicyFor(c.Resource)})
			}
		}
		if !slices.Contains(ops[k], c.Operation) {
			ops[k] = append(ops[k], c.Operation)
		}
	}
	identity := map[string][]map[string]any{}
	for fn, r := range t.Roles {
		identity[fn] = r.Policies
	}
	ds, err := ev.Evaluate(identity, t.ResourcePolicies, reqs)
	if err != nil {
		return nil, err
	}
	for i, r := range reqs {
		if ds[i].Allowed() {
			continue
		}
		var ctx map[string]string
		for k, v := range r.Context {
			if strings.HasPrefix(k, "aws:") {
				continue
			}
			if ctx == nil {
				ctx = map[string]string{}
			}
			ctx[k] = v
		}
		findings = append(findings, Finding{Function: r.Role, Action: r.Action, Resource: r.Resource, Context: ctx,
			Operations: ops[key{r.Role, r.Action, r.Resource, pairs(ctx)}], Decision: ds[i]})
	}
	sort.Slice(findings, func(i, j int) bool { return findings[i].String() < findings[j].String() })
	return findings, nil
}

// Grant is an action a function's role allows. A KMS action scoped to
// purposes is one grant per purpose: "kms:Decrypt (purpose webhook-signing)".
type Grant struct{ Function, Action string }

// PurposeKey is the condition key that scopes KMS grants to the purposes
// of the secrets a function seals or opens (internal/envelope).
const PurposeKey = "kms:EncryptionContext:purpose"

// IsSealing reports whether action is one the sealer calls, which every
// role must scope with PurposeKey.
func IsSealing(action string) bool { return action == "kms:Decrypt" || action == "kms:GenerateDataKey" }

func withPurpose(action, purpose string) string { return action + " (purpose " + purpose + ")" }

// used is the grant a call exercises.
func used(c awsenv.Call) Grant {
	if p, ok := c.Context[PurposeKey]; ok && IsSealing(c.Action) {
		return Grant{c.Function, withPurpose(c.Action, p)}
	}
	return Grant{c.Function, c.Action}
}

// Unscoped returns the roles' Allow statements that grant a sealing KMS
// action without a StringEquals condition on PurposeKey: such a role may
// open (or seal) every kind of secret, whatever it needs.
func Unscoped(t *Template) []Grant {
	var out []Grant
	for fn, r := range t.Roles {
		for _, p := range r.Policies {
			for _, st := range asList(p["Statement"]) {
				s := asMap(st)
				if s["Effect"] != "Allow" || len(asList(asMap(asMap(s["Condition"])["StringEquals"])[PurposeKey])) > 0 {
					continue
				}
				for _, a := range asList(s["Action"]) {
					if IsSealing(fmt.Sprint(a)) {
						out = append(out, Grant{fn, fmt.Sprint(a)})
					}
				}
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Function+out[i].Action < out[j].Function+out[j].Action })
	return out
}

// Granted is every action each role allows (Allow statements' actions,
// lowercase service prefixes kept as written).
func Granted(t *Template) []Grant {
	var out []Grant
	for fn, r := range t.Roles {
		seen := map[string]bool{}
		for _, p := range r.Policies {
			for _, st := range asList(p["Statement"]) {
				s := asMap(st)
				if s["Effect"] != "Allow" {
					continue
				}
				purposes := asList(asMap(asMap(s["Condition"])["StringEquals"])[PurposeKey])
				for _, a := range asList(s["Action"]) {
					names := []string{fmt.Sprint(a)}
					if IsSealing(fmt.Sprint(a)) && len(purposes) > 0 {
						names = nil
						for _, p := range purposes {
							names = append(names, withPurpose(fmt.Sprint(a), fmt.Sprint(p)))
						}
					}
					for _, a := range names {
						if !seen[a] {
							seen[a] = true
							out = append(out, Grant{fn, a})
						}
					}
				}
			}
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Function != out[j].Function {
			return out[i].Function < out[j].Function
		}
		return out[i].Action < out[j].Action
	})
	return out
}

// AllowList is infra/iam/unexercised.yaml: the granted actions no request
// of the conformance run uses, each with why it is granted all the same.
type AllowList []AllowEntry

// AllowEntry is one reason, for some actions of some functions.
type AllowEntry struct {
	// Functions are function names, or ["all"] for every function.
	Functions []string `yaml:"functions"`
	Actions   []string `yaml:"actions"`
	Reason    string   `yaml:"reason"`
	// Sometimes marks actions the scenario reaches or not depending on
	// timing: listed, they are never stale (still granted, always).
	Sometimes bool `yaml:"sometimes"`
	// Envs are the environments whose templates grant the actions (their
	// configuration decides, e.g. tracing); empty: every environment.
	Envs []string `yaml:"envs"`
}

// For is the list's entries that apply to environment env.
func (l AllowList) For(env string) AllowList {
	var out AllowList
	for _, e := range l {
		if len(e.Envs) == 0 || slices.Contains(e.Envs, env) {
			out = append(out, e)
		}
	}
	return out
}

// ReadAllowList parses the allow-list file.
func ReadAllowList(path string) (AllowList, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var l AllowList
	if err := yaml.Unmarshal(raw, &l); err != nil {
		return nil, fmt.Errorf("%s: %w", filepath.Base(path), err)
	}
	for i, e := range l {
		if strings.TrimSpace(e.Reason) == "" || len(e.Functions) == 0 || len(e.Actions) == 0 {
			return nil, fmt.Errorf("%s: entry %d needs functions, actions and a reason", filepath.Base(path), i+1)
		}
	}
	return l, nil
}

// covers reports the entry's reason for fn's action, if it lists it.
func (l AllowList) covers(fn, action string) (string, bool) {
	for _, e := range l {
		if (slices.Contains(e.Functions, fn) || slices.Equal(e.Functions, []string{"all"})) && slices.Contains(e.Actions, action) {
			return e.Reason, true
		}
	}
	return "", false
}

// Unexercised is the other direction of the check. It returns the granted
// actions that no call used and the allow-list does not give a reason
// for (missing), the allow-list's pairs that are not granted-and-unused
// (stale: the list must stay exact), and the granted-and-unused actions
// with their reasons (listed).
func Unexercised(t *Template, calls []awsenv.Call, functions []string, l AllowList) (missing, stale []Grant, listed map[Grant]string) {
	exercised := map[Grant]bool{}
	for _, c := range calls {
		// A purpose-scoped grant is exercised per purpose; an unscoped one
		// (itself a finding of Unscoped) by any purpose.
		exercised[used(c)] = true
		exercised[Grant{c.Function, c.Action}] = true
	}
	granted := map[Grant]bool{}
	listed = map[Grant]string{}
	for _, g := range Granted(t) {
		granted[g] = true
		if exercised[g] {
			continue
		}
		if reason, ok := l.covers(g.Function, g.Action); ok {
			listed[g] = reason
		} else {
			missing = append(missing, g)
		}
	}
	l.each(functions, func(e AllowEntry, g Grant) {
		if !granted[g] || (exercised[g] && !e.Sometimes) {
			stale = append(stale, g)
		}
	})
	return missing, stale, listed
}

// each calls fn for every grant l's entries name, "all" standing for
// functions.
func (l AllowList) each(functions []string, fn func(e AllowEntry, g Grant)) {
	for _, e := range l {
		fns := e.Functions
		if slices.Equal(fns, []string{"all"}) {
			fns = functions
		}
		for _, f := range fns {
			for _, a := range e.Actions {
				fn(e, Grant{f, a})
			}
		}
	}
}

func pairs(m map[string]string) string {
	ks := make([]string, 0, len(m))
	for k, v := range m {
		ks = append(ks, k+"="+v)
	}
	sort.Strings(ks)
	return strings.Join(ks, ",")
}

// ReadCalls reads every *.jsonl log in dir.
func ReadCalls(dir string) ([]awsenv.Call, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.jsonl"))
	if err != nil {
		return nil, err
	}
	var all []awsenv.Call
	for _, f := range files {
		fh, err := os.Open(f)
		if err != nil {
			return nil, err
		}
		calls, err := awsenv.Read(fh)
		fh.Close()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", f, err)
		}
		all = append(all, calls...)
	}
	return all, nil
}
