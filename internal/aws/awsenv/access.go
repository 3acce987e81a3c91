package awsenv

import (
	"fmt"
	"net/url"
	"reflect"
	"sort"
	"strings"
)

// Access is one authorisation a request needs — the action it is authorised
// as, on which resource ARN, with which condition keys (a KMS call's
// encryption context, the prefix of an S3 list): IAM evaluates each of a
// request's accesses, and the request fails if any is denied. Recorder
// records them per function, so that a test can hold every request a
// function made against that function's role (docs/iam.md).
type Access struct {
	// Action is the IAM action, "dynamodb:Query".
	Action string `json:"action"`
	// Resource is the ARN it is authorised on; empty when it could not be
	// derived from the request (Unknown says why).
	Resource string `json:"resource"`
	// Context holds the condition keys the request carries that policies
	// may test: kms:EncryptionContext:<key>, s3:prefix,
	// iam:PassedToService.
	Context map[string]string `json:"context,omitempty"`
	// Unknown says why Resource is empty: an operation this package does
	// not know. A conformance test fails on it rather than guess.
	Unknown string `json:"unknown,omitempty"`
}

// Request is what Accesses reads of one request.
type Request struct {
	// Service is the SDK's service id ("DynamoDB", "Secrets Manager").
	Service string
	// Operation is the SDK's operation name ("TransactWriteItems").
	Operation string
	// Input and Output are the operation's input and output structs
	// (pointers); Output may be nil when the request failed.
	Input, Output any
	// NotFound is set when the request failed with an HTTP 404.
	NotFound bool
	// Region and Account complete ARNs that the input names by name only.
	Region, Account string
}

// servicePrefix is the IAM service prefix of each SDK service id.
var servicePrefix = map[string]string{
	"DynamoDB":         "dynamodb",
	"DynamoDB Streams": "dynamodb",
	"SQS":              "sqs",
	"S3":               "s3",
	"KMS":              "kms",
	"EventBridge":      "events",
	"Lambda":           "lambda",
	"Scheduler":        "scheduler",
	"Secrets Manager":  "secretsmanager",
	"STS":              "sts",
}

// Accesses returns the authorisations r needs, as IAM evaluates them:
// a DynamoDB transaction item by item (PutItem, UpdateItem, DeleteItem,
// ConditionCheckItem, GetItem), a batch table by table, an SQS batch as
// its single action, S3's HeadObject as GetObject (and, when the key is
// missing, ListBucket on the bucket: without it S3 answers 403, not 404),
// a KMS call with its encryption context and the key it used, a schedule
// with the role it passes.
func Accesses(r Request) []Access {
	prefix, ok := servicePrefix[r.Service]
	if !ok {
		return []Access{{Action: strings.ToLower(strings.ReplaceAll(r.Service, " ", "")) + ":" + r.Operation,
			Unknown: "service " + r.Service + " is not known to awsclient"}}
	}
	a := arns{region: r.Region, account: r.Account}
	in, out := reflect.ValueOf(r.Input), reflect.ValueOf(r.Output)
	var acc []Access
	switch prefix {
	case "dynamodb":
		acc = a.dynamodb(r.Operation, in)
	case "sqs":
		acc = a.sqs(r.Operation, in)
	case "s3":
		acc = a.s3(r.Operation, in, r.NotFound)
	case "kms":
		acc = a.kms(r.Operation, in, out)
	case "events":
		acc = a.events(r.Operation, in)
	case "lambda":
		acc = a.lambda(r.Operation, in)
	case "scheduler":
		acc = a.scheduler(r.Operation, in)
	case "secretsmanager":
		acc = a.secrets(r.Operation, in, out)
	}
	if len(acc) == 0 {
		acc = []Access{{Action: prefix + ":" + r.Operation, Unknown: "awsclient does not know the resource of " + r.Service + " " + r.Operation}}
	}
	for i := range acc {
		if acc[i].Resource == "" && acc[i].Unknown == "" {
			acc[i].Unknown = "the request names no resource awsclient can read"
		}
	}
	return dedupe(acc)
}

// arns builds ARNs in one account and region.
type arns struct{ region, account string }

func (a arns) arn(service, resource string) string {
	return "arn:aws:" + service + ":" + a.region + ":" + a.account + ":" + resource
}

func (a arns) table(name string) string {
	if strings.HasPrefix(name, "arn:") {
		return name
	}
	return a.arn("dynamodb", "table/"+name)
}

// dynamodb: the table (or index) each part of the request touches.
func (a arns) dynamodb(op string, in reflect.Value) []Access {
	switch op {
	case "TransactWriteItems":
		var acc []Access
		for _, item := range each(field(in, "TransactItems")) {
			for part, action := range map[string]string{"Put": "PutItem", "Update": "UpdateItem", "Delete": "DeleteItem", "ConditionCheck": "ConditionCheckItem"} {
				if p := field(item, part); p.IsValid() && !(p.Kind() == reflect.Pointer && p.IsNil()) {
					acc = append(acc, Access{Action: "dynamodb:" + action, Resource: a.table(str(p, "TableName"))})
				}
			}
		}
		return acc
	case "TransactGetItems":
		var acc []Access
		for _, item := range each(field(in, "TransactItems")) {
			acc = append(acc, Access{Action: "dynamodb:GetItem", Resource: a.table(str(field(item, "Get"), "TableName"))})
		}
		return acc
	case "BatchGetItem", "BatchWriteItem":
		var acc []Access
		for _, t := range keys(field(in, "RequestItems")) {
			acc = append(acc, Access{Action: "dynamodb:" + op, Resource: a.table(t)})
		}
		return acc
	}
	if s := str(in, "StreamArn"); s != "" {
		return []Access{{Action: "dynamodb:" + op, Resource: s}}
	}
	t := str(in, "TableName")
	if t == "" {
		return nil
	}
	res := a.table(t)
	if ix := str(in, "IndexName"); ix != "" {
		res += "/index/" + ix
	}
	return []Access{{Action: "dynamodb:" + op, Resource: res}}
}

// sqsAction is the IAM action of SQS operations named otherwise: a batch
// is authorised as its single action.
var sqsAction = map[string]string{
	"SendMessageBatch":             "SendMessage",
	"DeleteMessageBatch":           "DeleteMessage",
	"ChangeMessageVisibilityBatch": "ChangeMessageVisibility",
}

func (a arns) sqs(op string, in reflect.Value) []Access {
	action := op
	if s, ok := sqsAction[op]; ok {
		action = s
	}
	switch op {
	case "StartMessageMoveTask":
		// SQS moves the messages with the caller's permissions: it receives,
		// deletes and reads the attributes of the source, and sends to the
		// destination (the source's own redrive source when unset).
		src := str(in, "SourceArn")
		acc := []Access{{Action: "sqs:StartMessageMoveTask", Resource: src}}
		for _, x := range []string{"ReceiveMessage", "DeleteMessage", "GetQueueAttributes"} {
			acc = append(acc, Access{Action: "sqs:" + x, Resource: src})
		}
		if dst := str(in, "DestinationArn"); dst != "" {
			acc = append(acc, Access{Action: "sqs:SendMessage", Resource: dst})
		}
		return acc
	case "ListMessageMoveTasks":
		return []Access{{Action: "sqs:" + op, Resource: str(in, "SourceArn")}}
	case "GetQueueUrl":
		owner := str(in, "QueueOwnerAWSAccountId")
		if owner == "" {
			owner = a.account
		}
		return []Access{{Action: "sqs:GetQueueUrl", Resource: "arn:aws:sqs:" + a.region + ":" + owner + ":" + str(in, "QueueName")}}
	}
	u := str(in, "QueueUrl")
	if u == "" {
		return nil
	}
	return []Access{{Action: "sqs:" + action, Resource: a.queue(u)}}
}

// queue turns a queue URL (https://sqs.<region>.amazonaws.com/<account>/<name>,
// or an emulator's http://host/<account>/<name>) into the queue's ARN.
func (a arns) queue(u string) string {
	p, err := url.Parse(u)
	if err != nil {
		return ""
	}
	parts := strings.Split(strings.Trim(p.Path, "/"), "/")
	if len(parts) != 2 {
		return ""
	}
	region := a.region
	if h := strings.Split(p.Hostname(), "."); len(h) >= 3 && h[0] == "sqs" && strings.HasSuffix(p.Hostname(), ".amazonaws.com") {
		region = h[1]
	}
	return "arn:aws:sqs:" + region + ":" + parts[0] + ":" + parts[1]
}

// s3Action is the IAM action of S3 operations named otherwise.
var s3Action = map[string]string{
	"HeadObject":    "GetObject",
	"ListObjectsV2": "ListBucket",
	"ListObjects":   "ListBucket",
	"HeadBucket":    "ListBucket",
}

func (a arns) s3(op string, in reflect.Value, notFound bool) []Access {
	bucket := str(in, "Bucket")
	if bucket == "" {
		return nil
	}
	bucketARN := "arn:aws:s3:::" + bucket
	action := op
	if s, ok := s3Action[op]; ok {
		action = s
	}
	switch op {
	case "ListObjectsV2", "ListObjects":
		return []Access{{Action: "s3:ListBucket", Resource: bucketARN, Context: map[string]string{"s3:prefix": str(in, "Prefix")}}}
	case "HeadBucket":
		return []Access{{Action: "s3:ListBucket", Resource: bucketARN}}
	case "DeleteObjects":
		var acc []Access
		for _, o := range each(field(field(in, "Delete"), "Objects")) {
			acc = append(acc, Access{Action: "s3:DeleteObject", Resource: bucketARN + "/" + str(o, "Key")})
		}
		return acc
	}
	key := str(in, "Key")
	if key == "" {
		return []Access{{Action: "s3:" + action, Resource: bucketARN}}
	}
	acc := []Access{{Action: "s3:" + action, Resource: bucketARN + "/" + key}}
	if notFound && (op == "HeadObject" || op == "GetObject") {
		// S3 answers a missing key with 404 only to a caller that may list
		// the bucket, evaluated with the key as the listing's prefix;
		// without it the answer is 403 AccessDenied.
		acc = append(acc, Access{Action: "s3:ListBucket", Resource: bucketARN, Context: map[string]string{"s3:prefix": key}})
	}
	return acc
}

func (a arns) kms(op string, in, out reflect.Value) []Access {
	// The key KMS used (its ARN, in the output) is what IAM authorises;
	// the input may name it by alias, or not at all (Decrypt).
	key := str(out, "KeyId")
	if key == "" {
		key = str(in, "KeyId")
	}
	switch {
	case key == "":
		return nil
	case strings.HasPrefix(key, "arn:"):
	case strings.HasPrefix(key, "alias/"):
		key = a.arn("kms", key)
	default:
		key = a.arn("kms", "key/"+key)
	}
	var ctx map[string]string
	if ec := field(in, "EncryptionContext"); ec.IsValid() && ec.Kind() == reflect.Map {
		for _, k := range ec.MapKeys() {
			if ctx == nil {
				ctx = map[string]string{}
			}
			ctx["kms:EncryptionContext:"+k.String()] = ec.MapIndex(k).String()
		}
	}
	return []Access{{Action: "kms:" + op, Resource: key, Context: ctx}}
}

func (a arns) events(op string, in reflect.Value) []Access {
	if op != "PutEvents" {
		if n := str(in, "EventBusName"); n != "" {
			return []Access{{Action: "events:" + op, Resource: a.bus(n)}}
		}
		return nil
	}
	var acc []Access
	for _, e := range each(field(in, "Entries")) {
		acc = append(acc, Access{Action: "events:PutEvents", Resource: a.bus(str(e, "EventBusName"))})
	}
	return acc
}

func (a arns) bus(name string) string {
	switch {
	case strings.HasPrefix(name, "arn:"):
		return name
	case name == "":
		name = "default"
	}
	return a.arn("events", "event-bus/"+name)
}

func (a arns) lambda(op string, in reflect.Value) []Access {
	if id := str(in, "UUID"); id != "" {
		return []Access{{Action: "lambda:" + op, Resource: a.arn("lambda", "event-source-mapping:"+id)}}
	}
	if fn := str(in, "FunctionName"); fn != "" {
		if !strings.HasPrefix(fn, "arn:") {
			fn = a.arn("lambda", "function:"+fn)
		}
		return []Access{{Action: "lambda:" + op, Resource: fn}}
	}
	return nil
}

func (a arns) scheduler(op string, in reflect.Value) []Access {
	name := str(in, "Name")
	if name == "" {
		return nil
	}
	group := str(in, "GroupName")
	if group == "" {
		group = "default"
	}
	acc := []Access{{Action: "scheduler:" + op, Resource: a.arn("scheduler", "schedule/"+group+"/"+name)}}
	if role := str(field(in, "Target"), "RoleArn"); role != "" {
		// A schedule's target role is passed to Scheduler, which assumes it.
		acc = append(acc, Access{Action: "iam:PassRole", Resource: role, Context: map[string]string{"iam:PassedToService": "scheduler.amazonaws.com"}})
	}
	return acc
}

func (a arns) secrets(op string, in, out reflect.Value) []Access {
	// A secret named by name has an ARN with a random suffix: the output's.
	id := str(out, "ARN")
	if id == "" {
		id = str(in, "SecretId")
	}
	if id == "" {
		return nil
	}
	if !strings.HasPrefix(id, "arn:") {
		return []Access{{Action: "secretsmanager:" + op, Unknown: fmt.Sprintf("secret %q is named without its ARN and the request failed", id)}}
	}
	return []Access{{Action: "secretsmanager:" + op, Resource: id}}
}

// field is v's field name, through pointers; the zero Value when v is not
// a struct or has no such field.
func field(v reflect.Value, name string) reflect.Value {
	for v.IsValid() && (v.Kind() == reflect.Pointer || v.Kind() == reflect.Interface) {
		if v.IsNil() {
			return reflect.Value{}
		}
		v = v.Elem()
	}
	if !v.IsValid() || v.Kind() != reflect.Struct {
		return reflect.Value{}
	}
	return v.FieldByName(name)
}

// str is v's string or *string field name ("" when absent or nil).
func str(v reflect.Value, name string) string {
	f := field(v, name)
	if f.IsValid() && f.Kind() == reflect.Pointer {
		if f.IsNil() {
			return ""
		}
		f = f.Elem()
	}
	if f.IsValid() && f.Kind() == reflect.String {
		return f.String()
	}
	return ""
}

// each is the elements of a slice value.
func each(v reflect.Value) []reflect.Value {
	if !v.IsValid() || v.Kind() != reflect.Slice {
		return nil
	}
	out := make([]reflect.Value, v.Len())
	for i := range out {
		out[i] = v.Index(i)
	}
	return out
}

// keys is the sorted string keys of a map value.
func keys(v reflect.Value) []string {
	if !v.IsValid() || v.Kind() != reflect.Map {
		return nil
	}
	var out []string
	for _, k := range v.MapKeys() {
		out = append(out, k.String())
	}
	sort.Strings(out)
	return out
}

func dedupe(acc []Access) []Access {
	seen := map[string]bool{}
	out := acc[:0]
	for _, x := range acc {
		k := x.key()
		if !seen[k] {
			seen[k] = true
			out = append(out, x)
		}
	}
	return out
}

// key identifies an access by everything IAM evaluates.
func (x Access) key() string {
	ks := make([]string, 0, len(x.Context))
	for k, v := range x.Context {
		ks = append(ks, k+"="+v)
	}
	sort.Strings(ks)
	return x.Action + " " + x.Resource + " " + strings.Join(ks, ",") + " " + x.Unknown
}
