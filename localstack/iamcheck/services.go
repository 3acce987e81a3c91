package iamcheck

import (
	"fmt"
	"sort"
	"strings"

	"github.com/conveyor/conveyor/internal/config"
)

// ServiceAccess is a request an AWS service makes for the stack, as the
// template wires it: CloudWatch publishing an alarm to its topic (and
// using the topic's key), EventBridge Scheduler assuming a schedule's role
// and invoking its target with it, S3 invoking a function with a bucket
// notification, EventBridge invoking a rule's target, Lambda assuming a
// function's role and, with that role, sending a failed asynchronous
// invocation to its destination or polling an event source mapping's
// queue or stream. Nothing of this is a function's own request, so the
// recorded calls never show it; no emulator checks it either.
type ServiceAccess struct {
	// Use says what the request is for, naming the resource that makes it.
	Use string
	// Principal is the service principal (cloudwatch.amazonaws.com), or
	// the ARN of the role the service acts with.
	Principal string
	// Role is the logical ID of that role, "" for a service principal.
	Role string
	// Action and Resource are what IAM authorises.
	Action, Resource string
	// Context holds the request's condition keys besides the ones every
	// request carries (aws:SecureTransport, the principal's).
	Context map[string]string
}

func (a ServiceAccess) String() string {
	s := fmt.Sprintf("%s (%s): %s on %s", a.Principal, a.Use, a.Action, a.Resource)
	if len(a.Context) > 0 {
		s += " with " + pairs(a.Context)
	}
	return s
}

// ServiceFinding is a service's request that the policies do not allow.
type ServiceFinding struct {
	Access   ServiceAccess
	Decision Decision
}

func (f ServiceFinding) String() string {
	s := f.Access.String() + " is " + f.Decision.Result
	if f.Decision.Detail != "" {
		s += ": " + f.Decision.Detail
	}
	return s
}

// DeniedServices evaluates every service access of t (t.Services) with
// the real evaluator, against the resource's policy (a topic's, a key's, a
// function's permissions, a role's trust policy for sts:AssumeRole) and,
// when the service acts with a role, that role's policies; it returns
// those not allowed, sorted.
func DeniedServices(ev Evaluator, t *Template, account string) ([]ServiceFinding, error) {
	identity := map[string][]map[string]any{}
	for id, r := range t.RolesByID {
		identity[id] = r.Policies
	}
	policies := map[string]map[string]any{}
	for name, p := range t.ResourcePolicies {
		policies[name] = p
	}
	for arn, p := range t.TrustPolicies {
		policies["trust "+arn] = p
	}
	reqs := make([]Request, 0, len(t.Services))
	for _, a := range t.Services {
		rc := map[string]string{"aws:SecureTransport": "true"}
		if a.Role != "" {
			rc["aws:PrincipalAccount"] = account
			rc["aws:PrincipalArn"] = a.Principal
		} else {
			rc["aws:PrincipalServiceName"] = a.Principal
		}
		for k, v := range a.Context {
			rc[k] = v
		}
		policy := t.ResourcePolicyFor(a.Resource)
		if a.Action == "sts:AssumeRole" {
			policy = ""
			if _, ok := t.TrustPolicies[a.Resource]; ok {
				policy = "trust " + a.Resource
			}
		}
		reqs = append(reqs, Request{Role: a.Role, Principal: a.Principal, Action: a.Action, Resource: a.Resource, Account: account,
			Context: rc, ResourcePolicy: policy})
	}
	ds, err := ev.Evaluate(identity, policies, reqs)
	if err != nil {
		return nil, err
	}
	var out []ServiceFinding
	for i, a := range t.Services {
		if !ds[i].Allowed() {
			out = append(out, ServiceFinding{Access: a, Decision: ds[i]})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].String() < out[j].String() })
	return out, nil
}

// Service principals.
const (
	PrincipalCloudWatch  = "cloudwatch.amazonaws.com"
	PrincipalScheduler   = "scheduler.amazonaws.com"
	PrincipalS3          = "s3.amazonaws.com"
	PrincipalEventBridge = "events.amazonaws.com"
	PrincipalLambda      = "lambda.amazonaws.com"
)

// services collects a template's service accesses.
type services struct {
	r   *resolver
	t   *Template
	out []ServiceAccess
}

func (s *services) add(a ServiceAccess) {
	if a.Role != "" {
		role := s.t.RolesByID[a.Role]
		if role == nil {
			return
		}
		a.Principal = role.ARN
	}
	s.out = append(s.out, a)
}

// source is the condition keys of a request a service makes for resource
// source in the stack's account.
func (s *services) source(arn string) map[string]string {
	return map[string]string{"aws:SourceAccount": s.r.m.Account, "aws:SourceArn": arn}
}

// serviceAccesses derives every service access the template wires
// (ServiceAccess), resolved into the local names like the roles.
func serviceAccesses(r *resolver, t *Template) ([]ServiceAccess, error) {
	s := &services{r: r, t: t}
	steps := []func() error{s.alarms, s.schedules, s.userSchedules, s.bucketNotifications, s.rules, s.asyncDestinations, s.eventSources, s.functionRoles}
	for _, step := range steps {
		if err := step(); err != nil {
			return nil, err
		}
	}
	return s.out, nil
}

// targetAction is what a service does to deliver to target: invoke a
// function, send to a queue, publish to a topic, put on a bus.
func targetAction(target string) string {
	parts := strings.SplitN(target, ":", 4)
	if len(parts) < 3 {
		return ""
	}
	return map[string]string{"lambda": "lambda:InvokeFunction", "sqs": "sqs:SendMessage", "sns": "sns:Publish",
		"events": "events:PutEvents", "states": "states:StartExecution"}[parts[2]]
}

// str resolves v into a local string.
func (s *services) str(v any) (string, error) {
	x, err := s.r.resolve(v)
	if err != nil {
		return "", err
	}
	return s.r.rename(fmt.Sprint(x)), nil
}

// topics are the template's topics by local ARN, with their key's ARN
// ("" when not encrypted with a key).
func (s *services) topics() (map[string]string, error) {
	out := map[string]string{}
	for _, id := range s.r.t.ids("AWS::SNS::Topic") {
		arn, err := s.r.getAtt(id, "TopicArn")
		if err != nil {
			return nil, err
		}
		key := ""
		if k, ok := s.r.t.Resources[id].Properties["KmsMasterKeyId"]; ok {
			if key, err = s.str(k); err != nil {
				return nil, fmt.Errorf("topic %s's key: %w", id, err)
			}
			if !strings.HasPrefix(key, "arn:") {
				// An alias (alias/aws/sns) or a key id.
				key = s.r.arn("kms", key)
			}
		}
		out[s.r.rename(arn)] = key
	}
	return out, nil
}

// alarms: CloudWatch publishes each alarm's state changes to the topics of
// its actions, as the alarm (aws:SourceArn), and, for a topic encrypted
// with a key, has SNS use that key on its behalf (a data key per message).
// A topic outside the template (configured by ARN) has its policy outside
// too: it is not checked here.
func (s *services) alarms() error {
	topics, err := s.topics()
	if err != nil {
		return err
	}
	for _, id := range s.r.t.ids("AWS::CloudWatch::Alarm") {
		p := s.r.t.Resources[id].Properties
		name, err := s.r.name(id, "AlarmName")
		if err != nil {
			return err
		}
		name = s.r.rename(name)
		alarm := s.r.arn("cloudwatch", "alarm:"+name)
		seen := map[string]bool{}
		for _, prop := range []string{"AlarmActions", "OKActions", "InsufficientDataActions"} {
			for _, v := range asList(p[prop]) {
				topic, err := s.str(v)
				if err != nil {
					return fmt.Errorf("alarm %s: %w", id, err)
				}
				key, ok := topics[topic]
				if !ok || seen[topic] {
					continue
				}
				seen[topic] = true
				use := "alarm " + name + " notifies its topic"
				s.add(ServiceAccess{Use: use, Principal: PrincipalCloudWatch, Action: "sns:Publish", Resource: topic, Context: s.source(alarm)})
				if key == "" {
					continue
				}
				ctx := s.source(alarm)
				ctx["kms:EncryptionContext:aws:sns:topicArn"] = topic
				for _, action := range []string{"kms:GenerateDataKey", "kms:Decrypt"} {
					s.add(ServiceAccess{Use: use + " (the topic's key)", Principal: PrincipalCloudWatch, Action: action, Resource: key, Context: ctx})
				}
			}
		}
	}
	return nil
}

// scheduleGroup is the local ARN of schedule group name.
func (s *services) scheduleGroup(name string) string {
	return s.r.arn("scheduler", "schedule-group/"+name)
}

// viaRole adds what a service acting with role roleID does: it assumes the
// role (its trust policy, as source), then delivers to target with it.
func (s *services) viaRole(use, principal, roleID, source, target string) error {
	role := s.t.RolesByID[roleID]
	if role == nil {
		return fmt.Errorf("%s: the role %s is not in the template", use, roleID)
	}
	s.add(ServiceAccess{Use: use + " (assumes its role)", Principal: principal, Action: "sts:AssumeRole", Resource: role.ARN, Context: s.source(source)})
	if action := targetAction(target); action != "" {
		s.add(ServiceAccess{Use: use, Role: roleID, Action: action, Resource: target})
	}
	return nil
}

// schedules: EventBridge Scheduler assumes each schedule's role (as its
// group, aws:SourceArn) and invokes the target with it; a failed
// invocation goes to the schedule's dead-letter queue with the same role.
func (s *services) schedules() error {
	for _, id := range s.r.t.ids("AWS::Scheduler::Schedule") {
		p := s.r.t.Resources[id].Properties
		name, err := s.r.name(id, "Name")
		if err != nil {
			return err
		}
		group := "default"
		if g, ok := p["GroupName"]; ok {
			if group, err = s.str(g); err != nil {
				return err
			}
		}
		tgt := asMap(p["Target"])
		target, err := s.str(tgt["Arn"])
		if err != nil {
			return fmt.Errorf("schedule %s: %w", id, err)
		}
		roleID, ok := getAttTarget(tgt["RoleArn"])
		if !ok {
			return fmt.Errorf("schedule %s: its target's RoleArn is not a role of the template", id)
		}
		use := "schedule " + s.r.rename(name) + " invokes its target"
		if err := s.viaRole(use, PrincipalScheduler, roleID, s.scheduleGroup(group), target); err != nil {
			return err
		}
		if dlq, ok := asMap(tgt["DeadLetterConfig"])["Arn"]; ok {
			arn, err := s.str(dlq)
			if err != nil {
				return err
			}
			s.add(ServiceAccess{Use: "schedule " + name + " sends a failed invocation to its dead-letter queue", Role: roleID, Action: "sqs:SendMessage", Resource: arn})
		}
	}
	return nil
}

// userSchedules: a function given a schedule group, a target and a role
// in its environment (internal/config: the schedules function) creates
// schedules at run time that pass that role to EventBridge Scheduler
// (iam:PassRole), which assumes it as the group and invokes the target.
func (s *services) userSchedules() error {
	for _, id := range s.r.t.ids("AWS::Lambda::Function") {
		p := s.r.t.Resources[id].Properties
		vars := asMap(asMap(p["Environment"])["Variables"])
		roleID, ok := getAttTarget(vars[config.VarScheduleRoleARN])
		if !ok {
			continue
		}
		target, err := s.str(vars[config.VarScheduleTargetARN])
		if err != nil {
			return err
		}
		group, err := s.str(vars[config.VarScheduleGroup])
		if err != nil {
			return err
		}
		fnRole, _ := getAttTarget(p["Role"])
		role := s.t.RolesByID[roleID]
		if role == nil {
			return fmt.Errorf("function %s: %s names no role of the template", id, config.VarScheduleRoleARN)
		}
		s.add(ServiceAccess{Use: "the schedules it creates in " + group + " pass their role", Role: fnRole, Action: "iam:PassRole", Resource: role.ARN,
			Context: map[string]string{"iam:PassedToService": PrincipalScheduler}})
		if err := s.viaRole("a schedule of "+group+" invokes its target", PrincipalScheduler, roleID, s.scheduleGroup(group), target); err != nil {
			return err
		}
	}
	return nil
}

// bucketNotifications: S3 delivers a bucket's events to functions, queues
// and topics as the bucket (aws:SourceArn), with the target's policy.
func (s *services) bucketNotifications() error {
	type kind struct{ list, arn string }
	kinds := []kind{
		{"LambdaFunctionConfigurations", "LambdaFunctionArn"}, {"LambdaConfigurations", "Function"},
		{"QueueConfigurations", "QueueArn"}, {"QueueConfigurations", "Queue"},
		{"TopicConfigurations", "TopicArn"}, {"TopicConfigurations", "Topic"},
	}
	add := func(bucketRef any, conf any) error {
		if conf == nil {
			return nil
		}
		name, err := s.str(bucketRef)
		if err != nil {
			return err
		}
		bucket := "arn:aws:s3:::" + strings.TrimPrefix(name, "arn:aws:s3:::")
		for _, k := range kinds {
			for _, c := range asList(asMap(conf)[k.list]) {
				v, ok := asMap(c)[k.arn]
				if !ok {
					continue
				}
				target, err := s.str(v)
				if err != nil {
					return err
				}
				s.add(ServiceAccess{Use: "bucket " + name + " notifies " + target, Principal: PrincipalS3, Action: targetAction(target), Resource: target,
					Context: s.source(bucket)})
			}
		}
		return nil
	}
	for _, id := range s.r.t.ids("Custom::S3BucketNotifications") {
		p := s.r.t.Resources[id].Properties
		if err := add(p["BucketName"], p["NotificationConfiguration"]); err != nil {
			return fmt.Errorf("notifications %s: %w", id, err)
		}
	}
	for _, id := range s.r.t.ids("AWS::S3::Bucket") {
		p := s.r.t.Resources[id].Properties
		if err := add(map[string]any{"Ref": id}, p["NotificationConfiguration"]); err != nil {
			return fmt.Errorf("bucket %s: %w", id, err)
		}
	}
	return nil
}

// rules: EventBridge delivers a rule's events to each target as the rule
// (aws:SourceArn): with the target's policy, or with the target's role.
func (s *services) rules() error {
	for _, id := range s.r.t.ids("AWS::Events::Rule") {
		p := s.r.t.Resources[id].Properties
		name, err := s.r.name(id, "Name")
		if err != nil {
			return err
		}
		resource := "rule/" + name
		if bus, ok := p["EventBusName"]; ok {
			b, err := s.str(bus)
			if err != nil {
				return err
			}
			if b != "default" {
				resource = "rule/" + b + "/" + name
			}
		}
		rule := s.r.rename(s.r.arn("events", resource))
		for _, tg := range asList(p["Targets"]) {
			target, err := s.str(asMap(tg)["Arn"])
			if err != nil {
				return fmt.Errorf("rule %s: %w", id, err)
			}
			use := "rule " + s.r.rename(name) + " delivers to " + target
			if roleID, ok := getAttTarget(asMap(tg)["RoleArn"]); ok {
				if err := s.viaRole(use, PrincipalEventBridge, roleID, rule, target); err != nil {
					return err
				}
				continue
			}
			s.add(ServiceAccess{Use: use, Principal: PrincipalEventBridge, Action: targetAction(target), Resource: target, Context: s.source(rule)})
		}
	}
	return nil
}

// asyncDestinations: Lambda sends an asynchronous invocation's record to
// the function's on-success and on-failure destinations with the
// function's role.
func (s *services) asyncDestinations() error {
	for _, id := range s.r.t.ids("AWS::Lambda::EventInvokeConfig") {
		p := s.r.t.Resources[id].Properties
		role := s.r.functionRole(p["FunctionName"])
		fn, err := s.r.functionARN(p["FunctionName"])
		if err != nil {
			return err
		}
		dc := asMap(p["DestinationConfig"])
		for _, which := range []string{"OnFailure", "OnSuccess"} {
			d, ok := asMap(dc[which])["Destination"]
			if !ok {
				continue
			}
			dest, err := s.str(d)
			if err != nil {
				return fmt.Errorf("event invoke config %s: %w", id, err)
			}
			s.add(ServiceAccess{Use: "an asynchronous invocation of " + fn + " goes to its " + which + " destination", Role: role,
				Action: targetAction(dest), Resource: dest})
		}
	}
	return nil
}

// eventSources: an event source mapping polls its queue or reads its
// stream with the function's role, and sends what ran out of retries to
// its on-failure destination with it.
func (s *services) eventSources() error {
	for _, id := range s.r.t.ids("AWS::Lambda::EventSourceMapping") {
		p := s.r.t.Resources[id].Properties
		role := s.r.functionRole(p["FunctionName"])
		src, err := s.str(p["EventSourceArn"])
		if err != nil {
			return fmt.Errorf("event source mapping %s: %w", id, err)
		}
		use := "the event source mapping " + id + " reads " + src
		if base, ok := strings.CutSuffix(src, "/stream/*"); ok {
			// The stream's label is given at creation: a stand-in.
			src = base + "/stream/1970-01-01T00:00:00.000"
		}
		var actions []string
		switch {
		case strings.HasPrefix(src, "arn:aws:sqs:"):
			actions = []string{"sqs:ReceiveMessage", "sqs:DeleteMessage", "sqs:GetQueueAttributes"}
		case strings.HasPrefix(src, "arn:aws:dynamodb:"):
			actions = []string{"dynamodb:DescribeStream", "dynamodb:GetRecords", "dynamodb:GetShardIterator"}
		}
		for _, a := range actions {
			s.add(ServiceAccess{Use: use, Role: role, Action: a, Resource: src})
		}
		if d, ok := asMap(asMap(asMap(p["DestinationConfig"])["OnFailure"]))["Destination"]; ok {
			dest, err := s.str(d)
			if err != nil {
				return err
			}
			s.add(ServiceAccess{Use: "the event source mapping " + id + " sends what ran out of retries to its destination", Role: role,
				Action: targetAction(dest), Resource: dest})
		}
	}
	return nil
}

// functionRoles: Lambda assumes each function's role.
func (s *services) functionRoles() error {
	for _, id := range s.r.t.ids("AWS::Lambda::Function") {
		roleID, ok := getAttTarget(s.r.t.Resources[id].Properties["Role"])
		if !ok || s.t.RolesByID[roleID] == nil {
			continue
		}
		name, err := s.r.name(id, "FunctionName")
		if err != nil {
			return err
		}
		s.add(ServiceAccess{Use: "function " + s.r.rename(name) + " runs with its role", Principal: PrincipalLambda, Action: "sts:AssumeRole",
			Resource: s.t.RolesByID[roleID].ARN})
	}
	return nil
}
