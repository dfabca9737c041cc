package exportstore

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"strings"
	"syscall"

	"cloud.google.com/go/storage"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/smithy-go"
	"gocloud.dev/gcerrors"
	"google.golang.org/api/googleapi"
)

// Classes of failure. Every error this package returns for a store
// operation matches (errors.Is) at most one of them; the error's text
// names the operation, the object and the cause, and never a credential.
var (
	// ErrBadURL matches a store URL that cannot be used (scheme, bucket,
	// query parameter); its text lists the accepted forms.
	ErrBadURL = errors.New("export store URL not usable")
	// ErrNoBucket matches a bucket (or file:// directory) that does not
	// exist.
	ErrNoBucket = errors.New("export store bucket does not exist")
	// ErrDenied matches credentials the store refused: unknown key,
	// wrong secret, expired token, or no permission on the bucket.
	ErrDenied = errors.New("export store refused the credentials")
	// ErrNoSpace matches a store that is full (a 507, a quota, a disk
	// full under an S3-compatible server or a file:// directory).
	ErrNoSpace = errors.New("export store is full")
	// ErrUnavailable matches a store that did not answer in time, could
	// not be reached, or answered with a server error (5xx) after the
	// driver's retries.
	ErrUnavailable = errors.New("export store unavailable")
	// ErrMismatch matches a read-back whose size or SHA-256 differs from
	// what was uploaded.
	ErrMismatch = errors.New("export read-back does not match")
	// ErrNotFound matches an export that is not committed (no
	// manifest.json) or a file that is not in it.
	ErrNotFound = errors.New("export or file not found in the store")
)

// classified is an error that also matches a class.
type classified struct {
	err  error
	kind error
}

func (c classified) Error() string   { return c.err.Error() + " (" + c.kind.Error() + ")" }
func (c classified) Unwrap() []error { return []error{c.err, c.kind} }
func withKind(err, kind error) error { return classified{err, kind} }

// redacted is an error whose text has the store's secrets replaced; it
// still unwraps to the original for errors.Is and errors.As.
type redacted struct {
	err  error
	text string
}

func (r redacted) Error() string { return r.text }
func (r redacted) Unwrap() error { return r.err }

// minSecret is the shortest secret redact looks for: a shorter one is no
// real key, and replacing it would garble every word that contains it.
const minSecret = 8

// redact replaces each secret in err's text (a driver may echo a key
// id, and nothing here must ever print a secret).
func redact(err error, secrets []string) error {
	if err == nil {
		return nil
	}
	text := err.Error()
	changed := false
	for _, s := range secrets {
		if len(s) >= minSecret && strings.Contains(text, s) {
			text, changed = strings.ReplaceAll(text, s, "[redacted]"), true
		}
	}
	if !changed {
		return err
	}
	return redacted{err, text}
}

// kindOf returns the class an error was tagged with, or nil.
func kindOf(err error) error {
	for _, k := range []error{ErrBadURL, ErrNoBucket, ErrDenied, ErrNoSpace, ErrUnavailable, ErrMismatch, ErrNotFound} {
		if errors.Is(err, k) {
			return k
		}
	}
	return nil
}

// classify tags err (already wrapped with its context) with its class,
// if one fits. ctx is the operation's context: a stall the watchdog
// detected is its cause.
func classify(ctx context.Context, err error) error {
	if err == nil || kindOf(err) != nil {
		return err
	}
	if ctx != nil {
		if cause := context.Cause(ctx); cause != nil && errors.Is(cause, ErrUnavailable) {
			return fmt.Errorf("%w; %w", err, cause)
		}
	}
	if k := kindFor(err); k != nil {
		return withKind(err, k)
	}
	return err
}

// kindFor finds the class of a driver, HTTP or OS error.
func kindFor(err error) error {
	// S3 (and S3-compatible) error codes.
	var ae smithy.APIError
	if errors.As(err, &ae) {
		if mentionsNoSpace(ae.ErrorMessage()) {
			return ErrNoSpace
		}
		switch ae.ErrorCode() {
		case "NoSuchBucket":
			return ErrNoBucket
		case "InvalidAccessKeyId", "SignatureDoesNotMatch", "InvalidToken", "ExpiredToken", "TokenRefreshRequired",
			"AccessDenied", "AllAccessDisabled", "InvalidSecurity", "AuthorizationHeaderMalformed",
			"AuthorizationQueryParametersError", "Forbidden", "XAdminUserNotFound":
			return ErrDenied
		case "InsufficientStorage", "StorageFull", "XMinioStorageFull", "XAdminInsufficientStorage", "QuotaExceeded",
			"XMinioAdminBucketQuotaExceeded", "EntityTooLarge":
			return ErrNoSpace
		case "ServiceUnavailable", "SlowDown", "InternalError", "RequestTimeout", "RequestTimeTooSkewed":
			if ae.ErrorCode() != "RequestTimeTooSkewed" {
				return ErrUnavailable
			}
		}
	}
	var re *awshttp.ResponseError
	if errors.As(err, &re) {
		if k := kindForStatus(re.HTTPStatusCode()); k != nil {
			return k
		}
	}
	// Google Cloud Storage's JSON API.
	if errors.Is(err, storage.ErrBucketNotExist) {
		return ErrNoBucket
	}
	var ge *googleapi.Error
	if errors.As(err, &ge) {
		if m := strings.ToLower(ge.Message); ge.Code == http.StatusNotFound && strings.Contains(m, "bucket") && !strings.Contains(m, "object") {
			return ErrNoBucket
		}
		if mentionsNoSpace(ge.Message) {
			return ErrNoSpace
		}
		if k := kindForStatus(ge.Code); k != nil {
			return k
		}
	}
	// Local files (file://) and the network.
	switch {
	case errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT):
		return ErrNoSpace
	case errors.Is(err, os.ErrPermission) || errors.Is(err, syscall.EROFS):
		return ErrDenied
	case errors.Is(err, context.DeadlineExceeded) || errors.Is(err, syscall.ECONNREFUSED) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE):
		return ErrUnavailable
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return ErrUnavailable
	}
	var oe *net.OpError
	if errors.As(err, &oe) {
		return ErrUnavailable
	}
	if mentionsNoSpace(err.Error()) {
		return ErrNoSpace
	}
	switch gcerrors.Code(err) {
	case gcerrors.PermissionDenied:
		return ErrDenied
	case gcerrors.DeadlineExceeded:
		return ErrUnavailable
	}
	return nil
}

func kindForStatus(code int) error {
	switch {
	case code == http.StatusUnauthorized || code == http.StatusForbidden:
		return ErrDenied
	case code == http.StatusInsufficientStorage || code == http.StatusRequestEntityTooLarge:
		return ErrNoSpace
	case code == http.StatusRequestTimeout || code == http.StatusTooManyRequests || code >= 500:
		return ErrUnavailable
	}
	return nil
}

// mentionsNoSpace recognises a full disk behind a server that reports it
// only in words (an S3-compatible server passing on ENOSPC as a 500).
func mentionsNoSpace(msg string) bool {
	m := strings.ToLower(msg)
	return strings.Contains(m, "no space left") || strings.Contains(m, "insufficient storage") ||
		strings.Contains(m, "disk quota exceeded") || strings.Contains(m, "storage full")
}

func isNotFound(err error) bool { return gcerrors.Code(err) == gcerrors.NotFound }
