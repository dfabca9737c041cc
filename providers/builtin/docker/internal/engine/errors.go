package engine

import (
	"errors"
	"net/http"
)

// Error is the engine's answer to a failed call: its HTTP status and
// message.
type Error struct {
	StatusCode int
	Message    string
}

func (e *Error) Error() string { return e.Message }

// ConnError means the engine could not be reached at all: nothing listens
// at the address, the socket is not ours to open, the name does not
// resolve, or a TLS endpoint was spoken to in plain HTTP.
type ConnError struct {
	Host string
	Err  error
}

func (e *ConnError) Error() string {
	return "cannot connect to the Docker Engine at " + e.Host + ": " + e.Err.Error()
}

func (e *ConnError) Unwrap() error { return e.Err }

func status(err error) int {
	var e *Error
	if errors.As(err, &e) {
		return e.StatusCode
	}
	return 0
}

// IsNotFound: no such container, image or volume.
func IsNotFound(err error) bool { return status(err) == http.StatusNotFound }

// IsConflict: a name in use, a removal already in progress, a running
// container that cannot be removed without force.
func IsConflict(err error) bool { return status(err) == http.StatusConflict }

// IsInvalid: a request the engine (or the version negotiation) rejects.
func IsInvalid(err error) bool { return status(err) == http.StatusBadRequest }

// IsUnavailable: the engine is up but cannot serve (e.g. shutting down).
func IsUnavailable(err error) bool { return status(err) == http.StatusServiceUnavailable }

// IsPermission: the engine (an authorization plugin, a registry) refused.
func IsPermission(err error) bool {
	s := status(err)
	return s == http.StatusUnauthorized || s == http.StatusForbidden
}

// IsConnectionFailed: the engine could not be reached.
func IsConnectionFailed(err error) bool {
	var e *ConnError
	return errors.As(err, &e)
}
