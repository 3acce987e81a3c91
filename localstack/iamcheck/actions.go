package iamcheck

import (
	"path"
	"strings"
)

// servicePrefix is the IAM service prefix of an SDK service package whose
// name is not its prefix.
var servicePrefix = map[string]string{
	"dynamodbstreams": "dynamodb",
	"eventbridge":     "events",
	"cloudwatchlogs":  "logs",
	"sfn":             "states",
}

// operationActions are the IAM actions of operations not authorised as
// themselves, by "<package>.<operation>" (internal/aws/awsenv's recorder
// derives the same from a request: docs/iam.md).
var operationActions = map[string][]string{
	// A batch is authorised as its single action.
	"sqs.SendMessageBatch":             {"sqs:SendMessage"},
	"sqs.DeleteMessageBatch":           {"sqs:DeleteMessage"},
	"sqs.ChangeMessageVisibilityBatch": {"sqs:ChangeMessageVisibility"},
	// SQS moves the messages with the caller's permissions.
	"sqs.StartMessageMoveTask": {"sqs:StartMessageMoveTask", "sqs:ReceiveMessage", "sqs:DeleteMessage", "sqs:GetQueueAttributes", "sqs:SendMessage"},
	// A missing key answers 404 only to a caller that may list the bucket
	// (403 otherwise): a read of a key that may be gone needs both.
	"s3.HeadObject":    {"s3:GetObject", "s3:ListBucket"},
	"s3.GetObject":     {"s3:GetObject", "s3:ListBucket"},
	"s3.ListObjectsV2": {"s3:ListBucket"},
	"s3.ListObjects":   {"s3:ListBucket"},
	"s3.HeadBucket":    {"s3:ListBucket"},
	"s3.DeleteObjects": {"s3:DeleteObject"},
	"s3.CopyObject":    {"s3:GetObject", "s3:PutObject"},
	// A multipart upload is authorised as the object's PutObject.
	"s3.CreateMultipartUpload":   {"s3:PutObject"},
	"s3.UploadPart":              {"s3:PutObject"},
	"s3.CompleteMultipartUpload": {"s3:PutObject"},
	"s3.ListParts":               {"s3:ListMultipartUploadParts"},
	// A transaction is authorised item by item, as the part each item has
	// (Reach names the parts the code builds); a TransactGetItems item is
	// a GetItem.
	"dynamodb.TransactWriteItems":                  nil,
	"dynamodb.TransactWriteItems (Put)":            {"dynamodb:PutItem"},
	"dynamodb.TransactWriteItems (Update)":         {"dynamodb:UpdateItem"},
	"dynamodb.TransactWriteItems (Delete)":         {"dynamodb:DeleteItem"},
	"dynamodb.TransactWriteItems (ConditionCheck)": {"dynamodb:ConditionCheckItem"},
	"dynamodb.TransactGetItems":                    {"dynamodb:GetItem"},
	// A schedule's target role is passed to Scheduler, which assumes it.
	"scheduler.CreateSchedule": {"scheduler:CreateSchedule", "iam:PassRole"},
	"scheduler.UpdateSchedule": {"scheduler:UpdateSchedule", "iam:PassRole"},
}

// OperationActions are the IAM actions an SDK call needs: "dynamodb.PutItem"
// → dynamodb:PutItem; a presigned request is the signer's action of the
// operation it signs ("s3.PresignPutObject" → s3:PutObject); the
// exceptions (batches, S3's reads and lists, transactions' items,
// schedules' roles) are operationActions.
func OperationActions(call string) []string {
	pkg, op, _ := strings.Cut(call, ".")
	if pkg == "s3" && strings.HasPrefix(op, "Presign") {
		op = strings.TrimPrefix(op, "Presign")
		call = pkg + "." + op
	}
	if a, ok := operationActions[call]; ok {
		return a
	}
	prefix := pkg
	if p, ok := servicePrefix[pkg]; ok {
		prefix = p
	}
	return []string{prefix + ":" + op}
}

// grants reports whether the granted actions (Granted's, for one role)
// allow action, by name: IAM's wildcards match, and a KMS action granted
// for some purposes counts (which purpose a call seals or opens is the
// recorded side's check).
func grants(granted []string, action string) bool {
	for _, g := range granted {
		if base, _, ok := strings.Cut(g, " (purpose "); ok {
			g = base
		}
		if ok, _ := path.Match(strings.ToLower(g), strings.ToLower(action)); ok {
			return true
		}
	}
	return false
}
