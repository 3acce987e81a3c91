// Package envelope is the vocabulary of sealed secrets (account tokens,
// webhook signing keys): the Envelope stored in the table and the errors of
// opening one. They are sealed (package sealer) with KMS envelope
// encryption: a fresh AES-256 data key per record from GenerateDataKey, the
// secret sealed with AES-256-GCM under it, and only the KMS-encrypted data
// key stored beside the ciphertext. One context binds both layers — it is
// the KMS encryption context and the AES-GCM additional data — so a sealed
// value copied into another user's record, or used for another purpose,
// does not open. This package links no KMS client, so a function that
// only stores or reads records holding envelopes (the table's types) does
// not link one either.
package envelope

import "errors"

// Envelope is a sealed secret as stored. None of its fields is secret.
type Envelope struct {
	// KeyID is the ARN of the KMS key that encrypted the data key.
	KeyID string `dynamodbav:"keyId"`
	// EncryptedKey is the data key, encrypted by KMS under the context.
	EncryptedKey []byte `dynamodbav:"encKey"`
	// Nonce is the AES-GCM nonce (12 random bytes).
	Nonce []byte `dynamodbav:"nonce"`
	// Ciphertext is the sealed secret with its GCM tag.
	Ciphertext []byte `dynamodbav:"ct"`
}

// ErrOpen is returned when an envelope does not open: it was tampered with,
// or it is opened under another context than it was sealed with. It carries
// no detail of the secret.
var ErrOpen = errors.New("secrets: the sealed secret does not open")

// ErrNoContext is returned by Seal and Open when the context is empty: every
// secret must be bound to what it belongs to.
var ErrNoContext = errors.New("secrets: a context (e.g. user and purpose) is required")

// ContextPurpose is the encryption context key every sealed secret carries
// to say what it is for. The functions' IAM roles allow kms:Decrypt and
// kms:GenerateDataKey only for the purposes each function seals or opens
// (the kms:EncryptionContext:purpose condition, infra/stack), so a
// function that may open webhook signing keys cannot open account tokens.
const ContextPurpose = "purpose"

// The purposes of sealed secrets.
const (
	// PurposeAccountToken: a connected account's OAuth refresh and access
	// tokens (sealed by api and publisher, opened by publisher).
	PurposeAccountToken = "account-token"
	// PurposeWebhookSigning: a user's webhook signing secrets (sealed and
	// opened by api and system).
	PurposeWebhookSigning = "webhook-signing"
	// PurposeHTTPHeaders: the headers of an http job (sealed by api,
	// opened by publisher).
	PurposeHTTPHeaders = "http-headers"
	// PurposeScheduleTemplate: the secret values of a recurring
	// schedule's job template, such as an http job's headers (sealed by
	// schedules, opened by recovery when a tick submits the job).
	PurposeScheduleTemplate = "schedule-template"
)
