// Package iamcheck holds the functions' AWS requests, as recorded by
// internal/aws/awsclient, against their roles in the synthesized CloudFormation
// templates, with a real IAM policy evaluator (@cloud-copilot/iam-simulate,
// run by infra/iam/simulate.mjs): every request must be allowed, and every
// action a role grants must be used by some request or listed, with its
// reason, in infra/iam/unexercised.yaml. On the static side, every SDK
// operation a function's code can reach (Reach), recorded or not, must be
// allowed or listed, with its reason, in infra/iam/reachable.yaml. No
// emulator enforces IAM; this is what stands in for it (docs/iam.md).
package iamcheck

import (
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"strings"

	"github.com/conveyor/conveyor/internal/resources"
)

// Mapping places a cloud environment's template in the local stack's
// account, region and names, so that its policies name the very ARNs the
// local functions' requests were recorded with.
type Mapping struct {
	// Cloud is the environment the template was synthesized for.
	Cloud resources.Definition
	// Local is the definition the local stack was provisioned from.
	Local resources.Definition
	// Account and Region are the local stack's (the emulator's).
	Account, Region string
	// KMSKeyARN is the local key behind Local.KMSAlias: the template's key
	// of that alias resolves to it.
	KMSKeyARN string
	// LocalEnv is the configuration the local stack gives its functions. A
	// role the template passes to a function by ARN in a variable (the
	// role EventBridge Scheduler assumes) resolves to that variable's
	// local value: its cloud name is generated at deploy time.
	LocalEnv map[string]string
}

// Role is a function's execution role as the template defines it.
type Role struct {
	// Function is the function's name (resources.Func…).
	Function string
	// LogicalID is the role's logical id; ARN its ARN in the local account.
	LogicalID, ARN string
	// Policies are the role's policy documents (its inline policies and the
	// AWS::IAM::Policy resources attached to it), resolved.
	Policies []map[string]any
	// Managed are the managed policies' ARNs attached to it: their
	// documents are not in the template, so the check refuses them.
	Managed []string
}

// Template is a synthesized template resolved into the local stack's ARNs.
type Template struct {
	// Roles by function.
	Roles map[string]*Role
	// ResourcePolicies are the resource policies by the ARN of the resource
	// they are attached to (bucket, queue, key, topic, function), resolved.
	// A function's is made of its AWS::Lambda::Permission resources, as
	// Lambda renders them.
	ResourcePolicies map[string]map[string]any
	// RolesByID is every role of the template by logical ID: the
	// functions' (the same as in Roles) and those services assume
	// (EventBridge Scheduler's).
	RolesByID map[string]*Role
	// TrustPolicies are the roles' trust policies by role ARN, resolved.
	TrustPolicies map[string]map[string]any
	// Services are the requests AWS services make on the stack's behalf
	// (ServiceAccesses), resolved.
	Services []ServiceAccess
}

type cfnResource struct {
	Type       string         `json:"Type"`
	Properties map[string]any `json:"Properties"`
}

type cfnTemplate struct {
	Resources map[string]cfnResource `json:"Resources"`
}

// LoadTemplate reads and resolves the template at path.
func LoadTemplate(path string, m Mapping) (*Template, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return ParseTemplate(raw, m)
}

// ParseTemplate resolves a synthesized template: every Ref, Fn::GetAtt,
// Fn::Join, Fn::Select, Fn::Split and pseudo parameter its roles' and
// resource policies use, then every cloud name renamed to the local one.
func ParseTemplate(raw []byte, m Mapping) (*Template, error) {
	var t cfnTemplate
	if err := json.Unmarshal(raw, &t); err != nil {
		return nil, fmt.Errorf("reading the template: %w", err)
	}
	r := newResolver(t, m)
	out := &Template{Roles: map[string]*Role{}, ResourcePolicies: map[string]map[string]any{},
		RolesByID: map[string]*Role{}, TrustPolicies: map[string]map[string]any{}}
	if err := out.addRoles(r); err != nil {
		return nil, err
	}
	if err := r.attachPolicies(out.RolesByID); err != nil {
		return nil, err
	}
	if err := out.addResourcePolicies(r); err != nil {
		return nil, err
	}
	services, err := serviceAccesses(r, out)
	if err != nil {
		return nil, err
	}
	out.Services = services
	return out, nil
}

// newResolver returns t's resolver under m, with the local ARN of every
// role a function is given by ARN in its environment.
func newResolver(t cfnTemplate, m Mapping) *resolver {
	r := &resolver{t: t, m: m, roles: map[string]string{}}
	for _, id := range t.ids("AWS::Lambda::Function") {
		vars := asMap(asMap(t.Resources[id].Properties["Environment"])["Variables"])
		for name, v := range vars {
			if target, ok := getAttTarget(v); ok && t.Resources[target].Type == "AWS::IAM::Role" && m.LocalEnv[name] != "" {
				r.roles[target] = m.LocalEnv[name]
			}
		}
	}
	return r
}

// addRoles adds every role of the template to t.RolesByID, with its
// inline and managed policies and its trust policy, and each mapped
// function's to t.Roles.
func (t *Template) addRoles(r *resolver) error {
	m := r.m
	for _, id := range r.t.ids("AWS::IAM::Role") {
		arn, err := r.getAtt(id, "Arn")
		if err != nil {
			return err
		}
		role := &Role{LogicalID: id, ARN: arn}
		rp := r.t.Resources[id].Properties
		for _, p := range asList(rp["Policies"]) {
			doc, err := r.resolve(asMap(p)["PolicyDocument"])
			if err != nil {
				return fmt.Errorf("role %s: %w", id, err)
			}
			role.Policies = append(role.Policies, r.renamed(doc).(map[string]any))
		}
		for _, mp := range asList(rp["ManagedPolicyArns"]) {
			s, err := r.resolve(mp)
			if err != nil {
				return err
			}
			role.Managed = append(role.Managed, fmt.Sprint(s))
		}
		if doc := rp["AssumeRolePolicyDocument"]; doc != nil {
			d, err := r.resolve(doc)
			if err != nil {
				return fmt.Errorf("trust policy of role %s: %w", id, err)
			}
			t.TrustPolicies[arn] = r.renamed(d).(map[string]any)
		}
		t.RolesByID[id] = role
	}
	for _, fn := range m.Cloud.Functions {
		id, res, ok := r.t.find("AWS::Lambda::Function", "FunctionName", m.Cloud.Prefix+"-"+fn)
		if !ok {
			return fmt.Errorf("the template has no function %s-%s", m.Cloud.Prefix, fn)
		}
		roleID, ok := getAttTarget(res.Properties["Role"])
		if !ok || t.RolesByID[roleID] == nil {
			return fmt.Errorf("function %s (%s): its Role is not a Fn::GetAtt of a role in the template", fn, id)
		}
		role := t.RolesByID[roleID]
		role.Function = fn
		t.Roles[fn] = role
	}
	return nil
}

// attachPolicies appends every AWS::IAM::Policy of the template to the
// roles in byRole (by logical ID) it names.
func (r *resolver) attachPolicies(byRole map[string]*Role) error {
	for _, id := range r.t.ids("AWS::IAM::Policy") {
		p := r.t.Resources[id].Properties
		for _, ref := range asList(p["Roles"]) {
			role, ok := byRole[refTarget(ref)]
			if !ok {
				continue
			}
			doc, err := r.resolve(p["PolicyDocument"])
			if err != nil {
				return fmt.Errorf("policy %s: %w", id, err)
			}
			role.Policies = append(role.Policies, r.renamed(doc).(map[string]any))
		}
	}
	return nil
}

// addResourcePolicies adds the resource policies of the template's
// buckets, queues and keys, by their local ARNs.
func (t *Template) addResourcePolicies(r *resolver) error {
	for _, id := range r.t.ids("AWS::S3::BucketPolicy") {
		p := r.t.Resources[id].Properties
		arn, err := r.getAtt(refTarget(p["Bucket"]), "Arn")
		if err != nil {
			return fmt.Errorf("bucket policy %s: %w", id, err)
		}
		if err := t.addResourcePolicy(r, r.rename(arn), p["PolicyDocument"]); err != nil {
			return err
		}
	}
	for _, id := range r.t.ids("AWS::SQS::QueuePolicy") {
		p := r.t.Resources[id].Properties
		for _, q := range asList(p["Queues"]) {
			arn, err := r.getAtt(refTarget(q), "Arn")
			if err != nil {
				return fmt.Errorf("queue policy %s: %w", id, err)
			}
			if err := t.addResourcePolicy(r, r.rename(arn), p["PolicyDocument"]); err != nil {
				return err
			}
		}
	}
	for _, id := range r.t.ids("AWS::KMS::Key") {
		arn, err := r.getAtt(id, "Arn")
		if err != nil {
			return err
		}
		if err := t.addResourcePolicy(r, arn, r.t.Resources[id].Properties["KeyPolicy"]); err != nil {
			return err
		}
	}
	for _, id := range r.t.ids("AWS::SNS::TopicPolicy") {
		p := r.t.Resources[id].Properties
		for _, topic := range asList(p["Topics"]) {
			arn, err := r.resolve(topic)
			if err != nil {
				return fmt.Errorf("topic policy %s: %w", id, err)
			}
			if err := t.addResourcePolicy(r, r.rename(fmt.Sprint(arn)), p["PolicyDocument"]); err != nil {
				return err
			}
		}
	}
	return t.addFunctionPolicies(r)
}

// addFunctionPolicies adds each function's resource-based policy, made of
// the template's AWS::Lambda::Permission resources that name it, one
// statement each, as Lambda renders them (a source account and a source
// ARN become conditions).
func (t *Template) addFunctionPolicies(r *resolver) error {
	statements := map[string][]any{}
	var order []string
	for _, id := range r.t.ids("AWS::Lambda::Permission") {
		p := r.t.Resources[id].Properties
		fn, err := r.functionARN(p["FunctionName"])
		if err != nil {
			return fmt.Errorf("permission %s: %w", id, err)
		}
		st := map[string]any{"Sid": id, "Effect": "Allow", "Action": p["Action"], "Resource": fn}
		switch principal := fmt.Sprint(p["Principal"]); {
		case principal == "*":
			st["Principal"] = "*"
		case strings.HasSuffix(principal, ".amazonaws.com"):
			st["Principal"] = map[string]any{"Service": principal}
		default:
			st["Principal"] = map[string]any{"AWS": p["Principal"]}
		}
		cond := map[string]any{}
		add := func(op, key string, v any) {
			if cond[op] == nil {
				cond[op] = map[string]any{}
			}
			cond[op].(map[string]any)[key] = v
		}
		if v, ok := p["SourceAccount"]; ok {
			add("StringEquals", "AWS:SourceAccount", v)
		}
		if v, ok := p["SourceArn"]; ok {
			add("ArnLike", "AWS:SourceArn", v)
		}
		if v, ok := p["FunctionUrlAuthType"]; ok {
			add("StringEquals", "lambda:FunctionUrlAuthType", v)
		}
		if v, ok := p["InvokedViaFunctionUrl"]; ok {
			add("Bool", "lambda:InvokedViaFunctionUrl", fmt.Sprint(v))
		}
		if len(cond) > 0 {
			st["Condition"] = cond
		}
		if _, seen := statements[fn]; !seen {
			order = append(order, fn)
		}
		statements[fn] = append(statements[fn], st)
	}
	for _, fn := range order {
		doc := map[string]any{"Version": "2012-10-17", "Statement": statements[fn]}
		if err := t.addResourcePolicy(r, fn, doc); err != nil {
			return err
		}
	}
	return nil
}

func (t *Template) addResourcePolicy(r *resolver, arn string, doc any) error {
	if doc == nil {
		return nil
	}
	d, err := r.resolve(doc)
	if err != nil {
		return fmt.Errorf("resource policy of %s: %w", arn, err)
	}
	t.ResourcePolicies[arn] = r.renamed(d).(map[string]any)
	return nil
}

// ResourcePolicyFor is the name (the ARN) of the resource policy that
// governs resource, if any: an object's bucket's, a queue's, a key's.
func (t *Template) ResourcePolicyFor(resource string) string {
	if _, ok := t.ResourcePolicies[resource]; ok {
		return resource
	}
	if rest, ok := strings.CutPrefix(resource, "arn:aws:s3:::"); ok {
		bucket, _, _ := strings.Cut(rest, "/")
		if _, ok := t.ResourcePolicies["arn:aws:s3:::"+bucket]; ok {
			return "arn:aws:s3:::" + bucket
		}
	}
	return ""
}

// resolver evaluates the template's intrinsic functions.
type resolver struct {
	t cfnTemplate
	m Mapping
	// roles are the local ARNs of the roles functions are given by ARN.
	roles map[string]string
}

func (r *resolver) resolve(v any) (any, error) {
	switch x := v.(type) {
	case []any:
		out := make([]any, 0, len(x))
		for _, e := range x {
			y, err := r.resolve(e)
			if err != nil {
				return nil, err
			}
			out = append(out, y)
		}
		return out, nil
	case map[string]any:
		if len(x) == 1 {
			for k, arg := range x {
				if strings.HasPrefix(k, "Fn::") || k == "Ref" {
					return r.intrinsic(k, arg)
				}
			}
		}
		out := make(map[string]any, len(x))
		for k, e := range x {
			y, err := r.resolve(e)
			if err != nil {
				return nil, err
			}
			out[k] = y
		}
		return out, nil
	}
	return v, nil
}

func (r *resolver) intrinsic(name string, arg any) (any, error) {
	switch name {
	case "Ref":
		return r.ref(fmt.Sprint(arg))
	case "Fn::GetAtt":
		a := asList(arg)
		if len(a) != 2 {
			return nil, fmt.Errorf("Fn::GetAtt %v", arg)
		}
		return r.getAtt(fmt.Sprint(a[0]), fmt.Sprint(a[1]))
	case "Fn::Join":
		a := asList(arg)
		if len(a) != 2 {
			return nil, fmt.Errorf("Fn::Join %v", arg)
		}
		parts, err := r.resolve(a[1])
		if err != nil {
			return nil, err
		}
		var ss []string
		for _, p := range asList(parts) {
			ss = append(ss, fmt.Sprint(p))
		}
		return strings.Join(ss, fmt.Sprint(a[0])), nil
	case "Fn::Select":
		a := asList(arg)
		if len(a) != 2 {
			return nil, fmt.Errorf("Fn::Select %v", arg)
		}
		list, err := r.resolve(a[1])
		if err != nil {
			return nil, err
		}
		var i int
		if _, err := fmt.Sscan(fmt.Sprint(a[0]), &i); err != nil || i < 0 || i >= len(asList(list)) {
			return nil, fmt.Errorf("Fn::Select %v of %v", a[0], list)
		}
		return asList(list)[i], nil
	case "Fn::Split":
		a := asList(arg)
		if len(a) != 2 {
			return nil, fmt.Errorf("Fn::Split %v", arg)
		}
		s, err := r.resolve(a[1])
		if err != nil {
			return nil, err
		}
		var out []any
		for _, p := range strings.Split(fmt.Sprint(s), fmt.Sprint(a[0])) {
			out = append(out, p)
		}
		return out, nil
	}
	return nil, fmt.Errorf("the check cannot resolve %s", name)
}

func (r *resolver) ref(id string) (any, error) {
	switch id {
	case "AWS::AccountId":
		return r.m.Account, nil
	case "AWS::Region":
		return r.m.Region, nil
	case "AWS::Partition":
		return "aws", nil
	case "AWS::URLSuffix":
		return "amazonaws.com", nil
	}
	res, ok := r.t.Resources[id]
	if !ok {
		return nil, fmt.Errorf("Ref to %s, which is not a resource of the template", id)
	}
	switch res.Type {
	case "AWS::SQS::Queue":
		name, err := r.name(id, "QueueName")
		return "https://sqs." + r.m.Region + ".amazonaws.com/" + r.m.Account + "/" + name, err
	case "AWS::SecretsManager::Secret":
		// A secret's ARN ends in six random characters.
		name, err := r.name(id, "Name")
		return r.arn("secretsmanager", "secret:"+name+"-??????"), err
	case "AWS::KMS::Key", "AWS::Lambda::EventSourceMapping", "AWS::IAM::Role":
		// Ids assigned at creation: the logical id stands for them.
		return id, nil
	case "AWS::SNS::Topic":
		return r.getAtt(id, "TopicArn")
	}
	for _, p := range []string{"TableName", "BucketName", "Name", "FunctionName", "AliasName", "LogGroupName", "EventBusName"} {
		if _, ok := res.Properties[p]; ok {
			return r.name(id, p)
		}
	}
	return nil, fmt.Errorf("the check cannot resolve Ref %s (%s)", id, res.Type)
}

func (r *resolver) getAtt(id, attr string) (string, error) {
	res, ok := r.t.Resources[id]
	if !ok {
		return "", fmt.Errorf("Fn::GetAtt of %s, which is not a resource of the template", id)
	}
	switch res.Type + "." + attr {
	case "AWS::DynamoDB::Table.Arn":
		n, err := r.name(id, "TableName")
		return r.arn("dynamodb", "table/"+n), err
	case "AWS::DynamoDB::Table.StreamArn":
		n, err := r.name(id, "TableName")
		return r.arn("dynamodb", "table/"+n+"/stream/*"), err
	case "AWS::SQS::Queue.Arn":
		n, err := r.name(id, "QueueName")
		return r.arn("sqs", n), err
	case "AWS::SQS::Queue.QueueName":
		return r.name(id, "QueueName")
	case "AWS::S3::Bucket.Arn":
		n, err := r.name(id, "BucketName")
		return "arn:aws:s3:::" + n, err
	case "AWS::KMS::Key.Arn":
		if r.isTokenKey(id) {
			return r.m.KMSKeyARN, nil
		}
		return r.arn("kms", "key/"+id), nil
	case "AWS::Events::EventBus.Arn":
		n, err := r.name(id, "Name")
		return r.arn("events", "event-bus/"+n), err
	case "AWS::Events::EventBus.Name":
		return r.name(id, "Name")
	case "AWS::Scheduler::ScheduleGroup.Arn":
		n, err := r.name(id, "Name")
		return r.arn("scheduler", "schedule-group/"+n), err
	case "AWS::Lambda::Function.Arn":
		n, err := r.name(id, "FunctionName")
		return r.arn("lambda", "function:"+n), err
	case "AWS::Lambda::EventSourceMapping.EventSourceMappingArn":
		return r.arn("lambda", "event-source-mapping:"+id), nil
	case "AWS::IAM::Role.Arn":
		if arn, ok := r.roles[id]; ok {
			return arn, nil
		}
		return "arn:aws:iam::" + r.m.Account + ":role/" + id, nil
	case "AWS::Logs::LogGroup.Arn":
		n, err := r.name(id, "LogGroupName")
		return r.arn("logs", "log-group:"+n+":*"), err
	case "AWS::SNS::Topic.TopicArn":
		n, err := r.name(id, "TopicName")
		if err != nil {
			n = id
		}
		return r.arn("sns", n), nil
	}
	return "", fmt.Errorf("the check cannot resolve Fn::GetAtt %s.%s (%s)", id, attr, res.Type)
}

// isTokenKey reports whether key id is the one the definition's alias
// names (the key that seals secrets).
func (r *resolver) isTokenKey(id string) bool {
	for _, aid := range r.t.ids("AWS::KMS::Alias") {
		p := r.t.Resources[aid].Properties
		if p["AliasName"] != r.m.Cloud.KMSAlias {
			continue
		}
		if t, ok := getAttTarget(p["TargetKeyId"]); ok && t == id {
			return true
		}
		if refTarget(p["TargetKeyId"]) == id {
			return true
		}
	}
	return false
}

// name is a resource's name property, resolved (a bucket's name is joined
// with the account id); the logical id stands for the name CloudFormation
// generates for a resource that has none.
func (r *resolver) name(id, prop string) (string, error) {
	v, ok := r.t.Resources[id].Properties[prop]
	if !ok {
		return id, nil
	}
	s, err := r.resolve(v)
	if err != nil {
		return "", err
	}
	return fmt.Sprint(s), nil
}

func (r *resolver) arn(service, resource string) string {
	return "arn:aws:" + service + ":" + r.m.Region + ":" + r.m.Account + ":" + resource
}

// rename turns a cloud name inside s into the local one: the bucket (its
// cloud name carries the account id), then the environment's prefix.
func (r *resolver) rename(s string) string {
	cloudBucket := r.m.Cloud.Bucket.Name + "-" + r.m.Account
	s = strings.ReplaceAll(s, cloudBucket, r.m.Local.Bucket.Name)
	return strings.ReplaceAll(s, r.m.Cloud.Prefix, r.m.Local.Prefix)
}

// renamed applies rename to every string of a resolved document.
func (r *resolver) renamed(v any) any {
	switch x := v.(type) {
	case string:
		return r.rename(x)
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = r.renamed(e)
		}
		return out
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[r.rename(k)] = r.renamed(e)
		}
		return out
	}
	return v
}

func (t cfnTemplate) ids(typ string) []string {
	var out []string
	for id, r := range t.Resources {
		if r.Type == typ {
			out = append(out, id)
		}
	}
	sort.Strings(out)
	return out
}

func (t cfnTemplate) find(typ, prop, value string) (string, cfnResource, bool) {
	for _, id := range t.ids(typ) {
		if fmt.Sprint(t.Resources[id].Properties[prop]) == value {
			return id, t.Resources[id], true
		}
	}
	return "", cfnResource{}, false
}

func getAttTarget(v any) (string, bool) {
	a := asList(asMap(v)["Fn::GetAtt"])
	if len(a) != 2 {
		return "", false
	}
	return fmt.Sprint(a[0]), true
}

func refTarget(v any) string {
	if s, ok := asMap(v)["Ref"].(string); ok {
		return s
	}
	return ""
}

func asList(v any) []any {
	switch x := v.(type) {
	case []any:
		return x
	case nil:
		return nil
	}
	return []any{v}
}

func asMap(v any) map[string]any {
	m, _ := v.(map[string]any)
	return m
}

// functionARN is the local ARN of the function v names: a Fn::GetAtt of
// its Arn, a Ref (its name), or an ARN or name as a string.
func (r *resolver) functionARN(v any) (string, error) {
	s, err := r.resolve(v)
	if err != nil {
		return "", err
	}
	arn := fmt.Sprint(s)
	if !strings.HasPrefix(arn, "arn:") {
		arn = r.arn("lambda", "function:"+arn)
	}
	return r.rename(arn), nil
}

// functionRole is the logical ID of the role of the function v names (a
// Ref or Fn::GetAtt of a function of the template), "" if there is none.
func (r *resolver) functionRole(v any) string {
	id := refTarget(v)
	if id == "" {
		id, _ = getAttTarget(v)
	}
	if r.t.Resources[id].Type != "AWS::Lambda::Function" {
		return ""
	}
	role, _ := getAttTarget(r.t.Resources[id].Properties["Role"])
	return role
}
