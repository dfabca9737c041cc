package exportstore

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"syscall"
	"testing"

	"github.com/aws/smithy-go"
	"google.golang.org/api/googleapi"
)

// The classes of errors no test server produces on demand.
func TestClassify(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want error
	}{
		{&smithy.GenericAPIError{Code: "InsufficientStorage", Message: "No space left on device."}, ErrNoSpace},
		{&smithy.GenericAPIError{Code: "InternalError", Message: "write: no space left on device"}, ErrNoSpace},
		{&smithy.GenericAPIError{Code: "QuotaExceeded"}, ErrNoSpace},
		{&smithy.GenericAPIError{Code: "InvalidAccessKeyId"}, ErrDenied},
		{&smithy.GenericAPIError{Code: "ExpiredToken"}, ErrDenied},
		{&smithy.GenericAPIError{Code: "NoSuchBucket"}, ErrNoBucket},
		{&smithy.GenericAPIError{Code: "SlowDown"}, ErrUnavailable},
		{&googleapi.Error{Code: http.StatusNotFound, Message: "The specified bucket does not exist."}, ErrNoBucket},
		{&googleapi.Error{Code: http.StatusNotFound, Message: "No such object: bucket/x"}, nil},
		{&googleapi.Error{Code: http.StatusForbidden, Message: "denied"}, ErrDenied},
		{&googleapi.Error{Code: http.StatusServiceUnavailable}, ErrUnavailable},
		{&os.PathError{Op: "write", Path: "/x", Err: syscall.ENOSPC}, ErrNoSpace},
		{&os.PathError{Op: "open", Path: "/x", Err: syscall.EACCES}, ErrDenied},
		{context.DeadlineExceeded, ErrUnavailable},
		{errors.New("something else"), nil},
	} {
		got := classify(context.Background(), fmt.Errorf("op: %w", tc.err))
		if k := kindOf(got); k != tc.want {
			t.Errorf("%v: class %v; want %v", tc.err, k, tc.want)
		}
	}
}
