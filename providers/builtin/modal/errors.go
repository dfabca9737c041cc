package modal

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/canvasapp/companion/core"
	modalsdk "github.com/modal-labs/modal-client/go"
	pb "github.com/modal-labs/modal-client/go/proto/modal_proto"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// maxMessage caps how much of Modal's own message goes into an error a
// person sees: a hostile or broken server may send megabytes.
const maxMessage = 300

// wrap turns an SDK or gRPC error into a *core.Error that says what
// failed. secret (the token secret) is cut out in case it was echoed.
func wrap(err error, op, boxID string, secrets ...string) error {
	if err == nil {
		return nil
	}
	var ce *core.Error
	if errors.As(err, &ce) {
		return err
	}
	subject := "box " + boxID
	if boxID == "" {
		subject = "Modal"
	}
	e := &core.Error{Err: err}
	msg := err.Error()
	if st, ok := status.FromError(err); ok {
		msg = st.Message()
	}
	msg = clip(redact(msg, secrets...))
	var nf modalsdk.NotFoundError
	var re modalsdk.ResourceExhaustedError
	var inv modalsdk.InvalidError
	var ae modalsdk.AlreadyExistsError
	var te modalsdk.TimeoutError
	var ste modalsdk.SandboxTimeoutError
	switch {
	case errors.As(err, &nf):
		e.Kind, e.Message = core.KindNotFound, subject+" not found at Modal"
	case errors.As(err, &re):
		e.Kind, e.Message = core.KindRateLimited, op+" "+subject+": Modal has no capacity right now: "+msg
	case errors.As(err, &inv):
		e.Kind, e.Message = core.KindInvalid, op+" "+subject+": "+msg
	case errors.As(err, &ae):
		e.Kind, e.Message = core.KindConflict, op+" "+subject+": "+msg
	case errors.As(err, &te), errors.As(err, &ste), errors.Is(err, context.DeadlineExceeded):
		e.Kind, e.Message = core.KindUnavailable, "Modal did not answer in time ("+op+" "+subject+")"
	case errors.Is(err, context.Canceled):
		e.Kind, e.Message = core.KindUnavailable, op+" "+subject+": canceled"
	default:
		e.Kind, e.Message, e.RetryAfter = grpcKind(err, op, subject, msg)
	}
	if r := redact(err.Error(), secrets...); r != err.Error() {
		e.Err = errors.New(r)
	}
	return e
}

// grpcKind maps a gRPC status code to a kind and message.
func grpcKind(err error, op, subject, msg string) (core.ErrorKind, string, time.Duration) {
	st, ok := status.FromError(err)
	if !ok {
		return core.KindInternal, op + " " + subject + ": " + msg, 0
	}
	switch st.Code() {
	case codes.NotFound:
		return core.KindNotFound, subject + " not found at Modal", 0
	case codes.Unauthenticated:
		return core.KindUnauthorized, "Modal refused the token (" + op + "): check the account's token id and secret", 0
	case codes.PermissionDenied:
		return core.KindUnauthorized, op + " " + subject + ": Modal denied it: " + msg, 0
	case codes.ResourceExhausted:
		return core.KindRateLimited, op + " " + subject + ": Modal asks to slow down: " + msg, retryAfter(st)
	case codes.Unavailable:
		return core.KindUnavailable, "Modal is unavailable (" + op + " " + subject + "): " + msg, retryAfter(st)
	case codes.DeadlineExceeded:
		return core.KindUnavailable, "Modal did not answer in time (" + op + " " + subject + ")", 0
	case codes.InvalidArgument, codes.FailedPrecondition, codes.OutOfRange:
		return core.KindInvalid, op + " " + subject + ": " + msg, 0
	case codes.AlreadyExists, codes.Aborted:
		return core.KindConflict, op + " " + subject + ": " + msg, 0
	}
	return core.KindInternal, op + " " + subject + ": Modal error (" + st.Code().String() + "): " + msg, 0
}

// retryAfter reads Modal's RPCRetryPolicy detail (retry_after_secs).
func retryAfter(st *status.Status) time.Duration {
	for _, d := range st.Details() {
		if p, ok := d.(*pb.RPCRetryPolicy); ok && p.GetRetryAfterSecs() > 0 {
			return time.Duration(float64(p.GetRetryAfterSecs()) * float64(time.Second))
		}
	}
	return 0
}

func redact(s string, secrets ...string) string {
	for _, x := range secrets {
		if x != "" {
			s = strings.ReplaceAll(s, x, "[redacted]")
		}
	}
	return s
}

func clip(s string) string {
	s = strings.ToValidUTF8(s, "?")
	if len(s) > maxMessage {
		return s[:maxMessage] + "…"
	}
	return s
}
