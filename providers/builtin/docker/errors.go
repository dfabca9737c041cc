package docker

import (
	"context"
	"errors"
	"io"
	"net"
	"strings"
	"syscall"

	"github.com/canvasapp/companion/core"
	"github.com/canvasapp/companion/providers/builtin/docker/internal/engine"
)

// wrap turns an engine error into a *core.Error whose message says what
// failed and, where it can, what to do. The engine's own message is
// included: it does not carry a container's environment.
func (p *Provider) wrap(err error, op, boxID string) error {
	return p.wrapSecret(err, op, boxID, "")
}

// wrapSecret is wrap for a call that handed the engine secret (creating a
// container passes the box key in its environment): secret is cut out of
// the message and the cause, in case the engine echoed it.
func (p *Provider) wrapSecret(err error, op, boxID, secret string) error {
	if err == nil {
		return nil
	}
	var ce *core.Error
	if errors.As(err, &ce) {
		return err
	}
	subject := "box " + boxID
	if boxID == "" {
		subject = "Docker Engine"
	}
	msg := err.Error()
	e := &core.Error{Err: err}
	var nerr net.Error
	switch {
	case engine.IsConnectionFailed(err) && strings.Contains(msg, "permission denied"):
		e.Kind = core.KindUnavailable
		e.Message = "Docker Engine at " + p.host + " refused this user (permission denied): add the user to the docker group or set DOCKER_HOST"
	case engine.IsConnectionFailed(err):
		e.Kind = core.KindUnavailable
		e.Message = "Docker Engine is not reachable at " + p.host + ": start Docker or set DOCKER_HOST"
	case errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &nerr) && nerr.Timeout()):
		e.Kind = core.KindUnavailable
		e.Message = "Docker Engine at " + p.host + " did not answer in time (" + op + " " + subject + ")"
	case errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET) ||
		errors.Is(err, syscall.EPIPE) || errors.As(err, new(*net.OpError)):
		// The engine went away mid-request (restarted, stopped).
		e.Kind = core.KindUnavailable
		e.Message = "Docker Engine at " + p.host + " dropped the connection (" + op + " " + subject + "): is Docker restarting?"
	case errors.Is(err, context.Canceled):
		e.Kind = core.KindUnavailable
		e.Message = op + " " + subject + ": canceled"
	case engine.IsNotFound(err):
		e.Kind = core.KindNotFound
		e.Message = subject + " not found at the Docker Engine"
		if boxID == "" {
			e.Message = op + ": " + msg
		}
	case engine.IsConflict(err):
		e.Kind = core.KindConflict
		e.Message = op + " " + subject + ": " + msg
	case engine.IsInvalid(err):
		e.Kind = core.KindInvalid
		e.Message = op + " " + subject + ": " + msg
	case engine.IsUnavailable(err):
		e.Kind = core.KindUnavailable
		e.Message = op + " " + subject + ": Docker Engine unavailable: " + msg
	case engine.IsPermission(err):
		e.Kind = core.KindUnauthorized
		e.Message = op + " " + subject + ": " + msg
	default:
		e.Kind = core.KindInternal
		e.Message = op + " " + subject + ": Docker Engine error: " + msg
	}
	if secret != "" && strings.Contains(err.Error(), secret) {
		e.Message = strings.ReplaceAll(e.Message, secret, "[redacted]")
		e.Err = errors.New(strings.ReplaceAll(err.Error(), secret, "[redacted]"))
	}
	return e
}
