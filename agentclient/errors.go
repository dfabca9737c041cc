package agentclient

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Class sorts a failed call the way the delete pipeline must treat it
// (issue 7, after the archiver seed): a positive "nothing here", a capture
// that cannot be confirmed, something worth retrying, or a permanent refusal.
type Class int

const (
	// ClassPermanent is any other refusal (a bad request of ours, 403, ...).
	ClassPermanent Class = iota
	// ClassNothingToArchive is a 400 from the archive route: the path exists
	// but holds nothing it can archive (not a directory, not a git repo for
	// git-delta). A delete may proceed.
	ClassNothingToArchive
	// ClassUnconfirmed is 401 (key refused) or 404 (path or conversation
	// missing): the capture did not happen and the box is not known to be
	// empty, so a required export must block.
	ClassUnconfirmed
	// ClassRetryable is 422, 429, any 5xx, or a network failure.
	ClassRetryable
)

func (c Class) String() string {
	switch c {
	case ClassNothingToArchive:
		return "nothing to archive"
	case ClassUnconfirmed:
		return "capture unconfirmed"
	case ClassRetryable:
		return "retryable"
	}
	return "permanent"
}

// Sentinels for errors.Is; every error this package returns for a failed
// call is an *Error matching exactly one of them.
var (
	ErrNothingToArchive = errors.New("agent-server: nothing to archive")
	ErrUnconfirmed      = errors.New("agent-server: capture unconfirmed")
	ErrRetryable        = errors.New("agent-server: retryable failure")
	ErrPermanent        = errors.New("agent-server: request refused")
)

// Error is a failed call. Status is 0 for a network failure (Err set).
type Error struct {
	Op     string // e.g. "GET /api/file/archive"
	Status int
	// Detail is the server's {"detail": ...} text when it sent one, cut
	// short; the agent-server never echoes the session key.
	Detail string
	// RetryAfter is the server's Retry-After, zero when absent or invalid.
	RetryAfter time.Duration
	Class      Class
	Err        error
}

func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString(e.Op)
	b.WriteString(": ")
	if e.Status == 0 {
		b.WriteString("network: ")
		if e.Err != nil {
			b.WriteString(e.Err.Error())
		}
	} else {
		fmt.Fprintf(&b, "HTTP %d", e.Status)
		if e.Detail != "" {
			b.WriteString(" ")
			b.WriteString(strconv.Quote(e.Detail))
		}
		if e.Err != nil {
			b.WriteString(": ")
			b.WriteString(e.Err.Error())
		}
	}
	fmt.Fprintf(&b, " (%s", e.Class)
	if e.RetryAfter > 0 {
		fmt.Fprintf(&b, ", retry after %s", e.RetryAfter)
	}
	b.WriteString(")")
	return b.String()
}

func (e *Error) Unwrap() error { return e.Err }

func (e *Error) Is(target error) bool {
	switch target {
	case ErrNothingToArchive:
		return e.Class == ClassNothingToArchive
	case ErrUnconfirmed:
		return e.Class == ClassUnconfirmed
	case ErrRetryable:
		return e.Class == ClassRetryable
	case ErrPermanent:
		return e.Class == ClassPermanent
	}
	return false
}

// classify maps a status to its class. archive says whether the route is
// the archive one: only there does 400 mean "nothing to archive".
func classify(status int, archive bool) Class {
	switch {
	case status == http.StatusBadRequest && archive:
		return ClassNothingToArchive
	case status == http.StatusUnauthorized || status == http.StatusNotFound:
		return ClassUnconfirmed
	case status == http.StatusUnprocessableEntity || status == http.StatusTooManyRequests || status >= 500:
		return ClassRetryable
	}
	return ClassPermanent
}

// parseRetryAfter reads delay-seconds or an HTTP date (RFC 9110 10.2.3).
func parseRetryAfter(v string, now time.Time) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0
	}
	if n, err := strconv.ParseInt(v, 10, 64); err == nil {
		if n <= 0 {
			return 0
		}
		return time.Duration(min(n, 24*3600)) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil && t.After(now) {
		return t.Sub(now)
	}
	return 0
}
