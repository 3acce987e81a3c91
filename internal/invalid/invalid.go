// Package invalid is the one error for input a caller must correct: which
// field is wrong and what is wrong with it. Every service that validates
// what a caller sent (jobs, kinds, schedules, uploads, accounts, webhooks,
// admin) returns it, and the HTTP layer maps it once, to a 400 naming the
// field. Its twin, UnusableError, is input well-formed in every part that
// cannot be used as it stands (an upload not confirmed, two times that
// contradict each other, a time too far ahead): a 422 with its code. It
// imports nothing of the project, so any package may use it.
package invalid

import (
	"errors"
	"fmt"
)

// FieldError is bad input, named by the JSON path (or query parameter) at
// fault: "params.title", "items[0].uploadId", "limit". Message says what is
// wrong in words that follow the field's name ("is required", "must be at
// most 200 characters").
type FieldError struct {
	// Field is the path of the offending value; empty when the whole
	// request is at fault.
	Field string
	// Message is human text, never an internal detail.
	Message string
}

// Error is the field and the message, "params.title is required".
func (e *FieldError) Error() string {
	if e.Field == "" {
		return e.Message
	}
	return e.Field + " " + e.Message
}

// Field returns a *FieldError about field.
func Field(field, message string) *FieldError {
	return &FieldError{Field: field, Message: message}
}

// Fieldf returns a *FieldError about field with a formatted message.
func Fieldf(field, format string, args ...any) *FieldError {
	return &FieldError{Field: field, Message: fmt.Sprintf(format, args...)}
}

// As returns the *FieldError in err's tree, if there is one.
func As(err error) (*FieldError, bool) {
	var fe *FieldError
	if errors.As(err, &fe) && fe != nil {
		return fe, true
	}
	return nil, false
}

// UnusableError is well-formed input that cannot be used (422): Code names
// the reason in snake_case, Field the value at fault (or ""), Message says
// it to a person.
type UnusableError struct{ Code, Field, Message string }

func (e *UnusableError) Error() string { return e.Message }

// Unusable returns an *UnusableError.
func Unusable(field, code, message string) *UnusableError {
	return &UnusableError{Code: code, Field: field, Message: message}
}

// Under returns err with every field error in it moved under prefix (a
// schedule's job template: "job." + "params.title"); other errors, and nil,
// are returned as they are.
func Under(prefix string, err error) error {
	var ue *UnusableError
	if errors.As(err, &ue) && ue != nil && ue.Field != "" {
		return &UnusableError{Code: ue.Code, Field: prefix + "." + ue.Field, Message: ue.Message}
	}
	fe, ok := As(err)
	if !ok {
		return err
	}
	field := prefix
	if fe.Field != "" {
		field = prefix + "." + fe.Field
	}
	return &FieldError{Field: field, Message: fe.Message}
}
