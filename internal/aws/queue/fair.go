package queue

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
)

// Fairness chooses the message group of a job's message so that, inside a
// tier, one owner's backlog never holds back another owner's jobs.
//
// SQS FIFO delivers one message group in order and holds it while one of
// its messages is in flight, so the group bounds an owner's jobs in flight:
// each owner's jobs share a few groups ("slots"), one job per slot at a
// time, and every other owner's groups are delivered alongside. The slot of
// a job's first send is a hash of its id, and each later send (a retry, a
// restart, a resend) takes the owner's next slot: every message of an
// owner's job is in one of the owner's slots.
// An owner's slots come from its plan (PerPlan), or from PerOwner, which
// an operator sets for a named owner. Zero slots is a group per job: no cap
// and no fairness (a job's own retries still never block another job). A
// waiting job does not hold its slot: the consumer moves its message into
// the job's own group (Own) before it waits, and back into the slot when
// the wait is over, before the job runs (handler.ConsumeMessages).
type Fairness struct {
	// PerPlan is the number of slots of an owner on each plan; a plan not
	// listed has DefaultSlots.
	PerPlan map[string]int
	// PerOwner overrides PerPlan for named owners.
	PerOwner map[string]int
	// Webhooks is the number of slots each owner's webhook deliveries
	// share on the system tier (CONVEYOR_WEBHOOK_SLOTS); 0 is a group per
	// delivery: no cap, and no fairness between owners' webhooks.
	Webhooks int
}

// Defaults.
const (
	// DefaultSlots is the slots of an owner whose plan Fairness does not
	// name (and of jobs submitted before the plan was kept on the job).
	DefaultSlots = 2
	// ownGroupPrefix starts the group of a message moved out of its
	// owner's slot; ownerGroupPrefix the group of an owner's slot.
	ownerGroupPrefix = "o:"
)

// Slots is the number of message groups owner's jobs share.
func (f Fairness) Slots(owner, plan string) int {
	if n, ok := f.PerOwner[owner]; ok {
		return n
	}
	if n, ok := f.PerPlan[plan]; ok {
		return n
	}
	if f.PerPlan == nil && f.PerOwner == nil {
		return 0 // no fairness configured: a group per job
	}
	return DefaultSlots
}

// group is m's message group.
func (f Fairness) group(m Message) string {
	if m.DeliveryID != "" {
		return f.deliveryGroup(m)
	}
	if m.Own || m.Owner == "" {
		return dedupID(m)
	}
	n := f.Slots(m.Owner, m.Plan)
	if n <= 0 {
		return dedupID(m)
	}
	// Each send of a job goes to the owner's next slot: a retry, a restart
	// or a resend never queues behind the job's previous message, which
	// may still hold its slot (a run finishing its last call, a worker that
	// died keeps it in flight until its visibility timeout), and it stays
	// inside the owner's slots all the same.
	h := fnv.New32a()
	h.Write([]byte(m.JobID))
	return OwnerGroup(m.Owner, int((h.Sum32()+uint32(max(m.Send, 0)))%uint32(n)))
}

// deliveryGroup is the message group of a webhook delivery: one of its
// owner's Webhooks slots, chosen by its endpoint, so that every delivery to
// one endpoint shares one slot (one delivery to an endpoint in flight at a
// time: a slow endpoint holds one slot of its owner's, never all of them).
// Deliveries to jobs' own webhookUrl spread over the slots by job.
func (f Fairness) deliveryGroup(m Message) string {
	if m.Own || m.Owner == "" || f.Webhooks <= 0 {
		return dedupID(m)
	}
	key := "endpoint:" + m.Endpoint
	if m.Endpoint == "" {
		key = "job:" + m.JobID
	}
	return OwnerGroup(m.Owner, WebhookSlot(key, f.Webhooks))
}

// WebhookSlot is the slot, of n, of the deliveries keyed by key.
func WebhookSlot(key string, n int) int {
	h := fnv.New32a()
	h.Write([]byte(key))
	return int(h.Sum32() % uint32(max(n, 1)))
}

// OwnerGroup is the message group of owner's slot n. A group id is at most
// 128 characters: a long owner id is shortened to a hash of it.
func OwnerGroup(owner string, n int) string {
	if len(owner) > 96 || strings.ContainsFunc(owner, func(r rune) bool { return r < '!' || r > '~' }) {
		sum := sha256.Sum256([]byte(owner))
		owner = "#" + hex.EncodeToString(sum[:16])
	}
	return ownerGroupPrefix + owner + ":" + strconv.Itoa(n)
}

// IsOwnerGroup reports whether group is an owner's slot, shared by several
// jobs (a message there must not wait in the queue).
func IsOwnerGroup(group string) bool { return strings.HasPrefix(group, ownerGroupPrefix) }

// MessageSender is the part of the SQS client MoveOut uses.
type MessageSender interface {
	SendMessage(ctx context.Context, in *sqs.SendMessageInput, optFns ...func(*sqs.Options)) (*sqs.SendMessageOutput, error)
}

// MoveOut sends m's moved copy (Moved) to the queue at url, in its job's
// own group, naming slot, the owner's group it was received from: the
// consumer then deletes the original, which leaves the slot free. The copy
// is delivered at once and, not due, waits by its visibility in a group of
// its own; once due it goes back to slot (Readmit) before its job runs.
func MoveOut(ctx context.Context, client MessageSender, url string, m Message, slot string) error {
	moved := m.Moved()
	moved.Slot = slot
	if err := sendCopy(ctx, client, url, moved, dedupID(moved)); err != nil {
		return fmt.Errorf("moving job %s out of its owner's slot: %w", m.JobID, err)
	}
	return nil
}

// Readmit sends the copy of m, a moved message whose wait is over, back to
// the owner's slot it was moved out of (Readmitted): the consumer then
// deletes the original. No job of an owner runs outside its slots.
func Readmit(ctx context.Context, client MessageSender, url string, m Message) error {
	if !m.Waits() {
		return fmt.Errorf("readmitting job %s: the message names no slot", m.JobID)
	}
	back := m.Readmitted()
	if err := sendCopy(ctx, client, url, back, m.Slot); err != nil {
		return fmt.Errorf("readmitting job %s to its owner's slot: %w", m.JobID, err)
	}
	return nil
}

// sendCopy sends m to the queue at url in group, under m's own
// deduplication id.
func sendCopy(ctx context.Context, client MessageSender, url string, m Message, group string) error {
	if url == "" {
		return errors.New("no queue URL")
	}
	body, err := json.Marshal(m)
	if err != nil {
		return err
	}
	_, err = client.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(url), MessageBody: aws.String(string(body)),
		MessageGroupId: aws.String(group), MessageDeduplicationId: aws.String(dedupID(m))})
	return err
}
