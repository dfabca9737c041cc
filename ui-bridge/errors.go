package uibridge

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"log/slog"
	"math"
	"net/http"
	"strconv"
	"time"

	"github.com/canvasapp/companion/core"
)

// Error codes that are not core error kinds.
const (
	codeInvalidJSON          = "invalid_json"
	codeBodyTooLarge         = "body_too_large"
	codeBodyTimeout          = "body_timeout"
	codeUnsupportedMedia     = "unsupported_media_type"
	codeMethodNotAllowed     = "method_not_allowed"
	codeRouteNotFound        = "not_found"
	codeUnauthorized         = "unauthorized"
	codeForbidden            = "forbidden"
	codeForbiddenHost        = "forbidden_host"
	codeForbiddenOrigin      = "forbidden_origin"
	codeCrossSite            = "cross_site_request"
	codeProviderUnauthorized = "provider_unauthorized"
	codeInvalidSince         = "invalid_since"
	codeSubprotocolRequired  = "subprotocol_required"
	codeInternal             = "internal"
	codeModuleRejected       = "module_rejected"
	codeModuleFailed         = "provider_module_failed"
)

// moduleFault is implemented by errors a provider module caused (see
// providers/wasm.ModuleError); the HTTP layer names the module instead of
// answering 500.
type moduleFault interface {
	ModuleFault() (module, op, field string)
}

// writeJSON writes v as the response body with status.
func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		// Every value written here is made of plain fields.
		panic("uibridge: encoding a response: " + err.Error())
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	w.Write(append(b, '\n'))
}

// writeErrorCode answers with an error of the given status and code.
func writeErrorCode(w http.ResponseWriter, status int, code, message string) {
	writeJSON(w, status, ErrorResponse{Error: ErrorDetail{Code: code, Message: message}})
}

// writeError answers with err translated by its core.ErrorKind. Messages of
// core errors are safe to show; anything else is logged and replaced by a
// generic text carrying a reference to the log line.
func (s *Server) writeError(w http.ResponseWriter, r *http.Request, err error) {
	status, body, retryAfter := s.translate(r, err)
	if retryAfter > 0 {
		w.Header().Set("Retry-After", strconv.FormatInt(int64(math.Ceil(retryAfter.Seconds())), 10))
	}
	writeJSON(w, status, body)
}

func (s *Server) translate(r *http.Request, err error) (int, ErrorResponse, time.Duration) {
	var ce *core.Error
	var mf moduleFault
	if errors.As(err, &ce) && ce.Message != "" && errors.As(err, &mf) {
		if status, body, ok := s.moduleError(r, ce, mf); ok {
			return status, body, ce.RetryAfter
		}
	}
	if !errors.As(err, &ce) || ce.Kind == core.KindInternal || ce.Kind == "" {
		return http.StatusInternalServerError, s.internal(r, err), 0
	}
	msg := ce.Message
	if msg == "" {
		// An error without a person-facing message may carry details
		// that belong in the log only.
		s.log.Warn("request failed", "method", r.Method, "path", r.URL.Path, "kind", ce.Kind, "err", err)
		msg = genericMessage(ce.Kind)
	}
	d := ErrorDetail{Code: string(ce.Kind), Message: msg}
	var status int
	var retry time.Duration
	switch ce.Kind {
	case core.KindNotFound:
		status = http.StatusNotFound
	case core.KindConflict:
		status = http.StatusConflict
		d.State = string(ce.State)
	case core.KindInvalid:
		status = http.StatusBadRequest
	case core.KindRateLimited:
		status = http.StatusTooManyRequests
		// Retry-After is always sent on 429 so clients need no default.
		retry = max(ce.RetryAfter, time.Second)
	case core.KindUnavailable:
		status = http.StatusServiceUnavailable
		retry = ce.RetryAfter
	case core.KindUnauthorized:
		// The person's companion token was fine; the provider refused
		// the account's credentials. 401 would tell the front end to
		// re-authenticate with companion, which would not help.
		status = http.StatusBadGateway
		d.Code = codeProviderUnauthorized
	default:
		return http.StatusInternalServerError, s.internal(r, err), 0
	}
	return status, ErrorResponse{Error: d}, retry
}

// moduleError answers an error a provider module caused: 422 for a module
// refused at inspect or install, 502 for one that failed at run time,
// naming the module, the operation and (when known) the manifest field.
// Other kinds (a timeout is unavailable) keep their status and gain the
// names.
func (s *Server) moduleError(r *http.Request, ce *core.Error, mf moduleFault) (int, ErrorResponse, bool) {
	module, op, field := mf.ModuleFault()
	d := ErrorDetail{Code: string(ce.Kind), Message: ce.Message, Module: module, Operation: op, Field: field}
	var status int
	switch ce.Kind {
	case core.KindInvalid:
		status, d.Code = http.StatusUnprocessableEntity, codeModuleRejected
	case core.KindInternal:
		status, d.Code = http.StatusBadGateway, codeModuleFailed
		s.log.Warn("provider module failed", "method", r.Method, "path", r.URL.Path, "module", module, "op", op, "err", ce.Message)
	case core.KindUnavailable:
		status = http.StatusServiceUnavailable
	default:
		return 0, ErrorResponse{}, false
	}
	return status, ErrorResponse{Error: d}, true
}

func (s *Server) internal(r *http.Request, err error) ErrorResponse {
	ref := newRef()
	s.log.Error("request failed", "method", r.Method, "path", r.URL.Path, "ref", ref, "err", err)
	return ErrorResponse{Error: ErrorDetail{Code: codeInternal, Message: "internal error (ref " + ref + "); the details are in companion's log"}}
}

func genericMessage(k core.ErrorKind) string {
	switch k {
	case core.KindNotFound:
		return "not found"
	case core.KindConflict:
		return "the request conflicts with the current state"
	case core.KindInvalid:
		return "invalid request"
	case core.KindRateLimited:
		return "the provider is rate limiting requests; retry later"
	case core.KindUnavailable:
		return "the provider is unavailable; retry later"
	case core.KindUnauthorized:
		return "the provider refused the account's credentials"
	}
	return "request failed"
}

// newRef is a short random id that ties an error answer to its log line.
func newRef() string {
	var b [6]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// logger returns l, or slog's default logger when l is nil.
func logger(l *slog.Logger) *slog.Logger {
	if l != nil {
		return l
	}
	return slog.Default()
}
