package core

import (
	"errors"
	"fmt"
	"time"
)

// ErrorKind classifies a failure so that callers (the HTTP layer, the
// reconciler's backoff) can react without parsing messages.
type ErrorKind string

const (
	KindNotFound     ErrorKind = "not_found"
	KindConflict     ErrorKind = "conflict"
	KindRateLimited  ErrorKind = "rate_limited"
	KindUnauthorized ErrorKind = "unauthorized"
	KindUnavailable  ErrorKind = "unavailable"
	KindInvalid      ErrorKind = "invalid"
	KindInternal     ErrorKind = "internal"
)

// Error is the error type core and every provider adapter return. Message is
// safe to show to a person: it never contains a token or a box key.
type Error struct {
	Kind    ErrorKind
	Message string
	// RetryAfter is set for KindRateLimited (and may be for KindUnavailable)
	// when the provider said how long to wait.
	RetryAfter time.Duration
	// State is the workspace's current state, set on conflicts caused by an
	// illegal transition so the caller can show it.
	State State
	// Err is the underlying cause, for logs; it is not shown to people.
	Err error
}

func (e *Error) Error() string {
	if e.Err != nil && e.Message == "" {
		return string(e.Kind) + ": " + e.Err.Error()
	}
	return e.Message
}

func (e *Error) Unwrap() error { return e.Err }

// Errorf returns an *Error of the given kind with a formatted message.
func Errorf(kind ErrorKind, format string, args ...any) *Error {
	return &Error{Kind: kind, Message: fmt.Sprintf(format, args...)}
}

// KindOf returns the kind of err: the Kind of the first *Error in its chain,
// KindInternal for any other non-nil error, and "" for nil.
func KindOf(err error) ErrorKind {
	if err == nil {
		return ""
	}
	var e *Error
	if errors.As(err, &e) {
		return e.Kind
	}
	return KindInternal
}

// IsKind reports whether err is an *Error of kind k.
func IsKind(err error, k ErrorKind) bool { return err != nil && KindOf(err) == k }

// RetryAfterOf returns the wait the provider asked for, or 0.
func RetryAfterOf(err error) time.Duration {
	var e *Error
	if errors.As(err, &e) {
		return e.RetryAfter
	}
	return 0
}
