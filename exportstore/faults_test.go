package exportstore

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/canvasapp/companion/internal/testsupport/faultproxy"
	"github.com/canvasapp/companion/internal/testsupport/s3server"
)

// s3Error is an S3 error body as versitygw writes it.
func s3Error(code, msg string) string {
	return `<?xml version="1.0" encoding="UTF-8"?><Error><Code>` + code + `</Code><Message>` + msg + `</Message></Error>`
}

// objectWrite matches requests that write an object's data.
func objectWrite(r *http.Request) bool {
	return r.Method == http.MethodPut || r.Method == http.MethodPost
}

// objectRead matches GETs of an object (not a listing).
func objectRead(r *http.Request) bool {
	return r.Method == http.MethodGet && strings.Count(strings.Trim(r.URL.Path, "/"), "/") > 0
}

// faultStore opens the S3 backend through a fault proxy with short
// limits.
func faultStore(t *testing.T) (*Store, *Store, *faultproxy.Proxy) {
	b := s3Backend(t)
	direct := b.open(t)
	p := faultproxy.Start(t, b.s3.Endpoint)
	u, _ := url.Parse(b.url)
	q := u.Query()
	q.Set("endpoint", p.URL)
	u.RawQuery = q.Encode()
	o := b.opts
	o.OpTimeout, o.StallTimeout = time.Second, time.Second
	s, err := Open(context.Background(), u.String(), o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s, direct, p
}

// bounded is a context the test gives each call: generous, so that when
// a call fails it is the store's own limit that ended it, not this one.
func bounded(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func ownLimit(t *testing.T, ctx context.Context, err error, kind error) {
	t.Helper()
	if err == nil {
		t.Fatal("the call succeeded through a fault")
	}
	if ctx.Err() != nil {
		t.Fatalf("the test's own deadline ended the call: %v", err)
	}
	wantKind(t, err, kind)
}

func TestStoreFaultsAreClassified(t *testing.T) {
	t.Run("5xx on open", func(t *testing.T) {
		b := s3Backend(t)
		p := faultproxy.Start(t, b.s3.Endpoint)
		p.Set(faultproxy.All, faultproxy.Fault{Status: 503, Body: s3Error("ServiceUnavailable", "Please reduce your request rate."), ContentType: "application/xml"})
		u := strings.Replace(b.url, url.QueryEscape(b.s3.Endpoint), url.QueryEscape(p.URL), 1)
		ctx := bounded(t)
		_, err := Open(ctx, u, Options{AccessKeyID: s3server.AccessKey, SecretAccessKey: s3server.SecretKey, OpTimeout: 5 * time.Second})
		ownLimit(t, ctx, err, ErrUnavailable)
		noSecret(t, err, s3server.SecretKey)
	})
	t.Run("stall on open", func(t *testing.T) {
		b := s3Backend(t)
		p := faultproxy.Start(t, b.s3.Endpoint)
		p.Set(faultproxy.All, faultproxy.Fault{Stall: true})
		u := strings.Replace(b.url, url.QueryEscape(b.s3.Endpoint), url.QueryEscape(p.URL), 1)
		ctx := bounded(t)
		_, err := Open(ctx, u, Options{AccessKeyID: s3server.AccessKey, SecretAccessKey: s3server.SecretKey, OpTimeout: time.Second, StallTimeout: time.Second})
		ownLimit(t, ctx, err, ErrUnavailable)
	})
	for _, tc := range []struct {
		name  string
		match func(*http.Request) bool
		fault faultproxy.Fault
		kind  error
		size  int64
	}{
		{"stalled upload", objectWrite, faultproxy.Fault{Stall: true}, ErrUnavailable, 1 << 20},
		{"stalled multipart upload", objectWrite, faultproxy.Fault{Stall: true}, ErrUnavailable, 12 << 20},
		{"stalled read-back", objectRead, faultproxy.Fault{Stall: true}, ErrUnavailable, 1 << 20},
		{"5xx upload", objectWrite, faultproxy.Fault{Status: 500, Body: s3Error("InternalError", "We encountered an internal error."), ContentType: "application/xml"}, ErrUnavailable, 1 << 20},
		{"store full", objectWrite, faultproxy.Fault{Status: 507, Body: s3Error("InsufficientStorage", "No space left on device."), ContentType: "application/xml"}, ErrNoSpace, 1 << 20},
		{"denied write", objectWrite, faultproxy.Fault{Status: 403, Body: s3Error("AccessDenied", "Access Denied."), ContentType: "application/xml"}, ErrDenied, 1 << 20},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, direct, p := faultStore(t)
			s.opts.PartSize = 5 << 20
			ctx := bounded(t)
			up, err := s.Begin("", "ws", "faulty")
			if err != nil {
				t.Fatal(err)
			}
			p.Set(tc.match, tc.fault)
			_, err = up.Add(ctx, "workspace.tar.gz", gen(3, tc.size))
			ownLimit(t, ctx, err, tc.kind)
			t.Logf("error: %v", err)
			if p.Hits() == 0 {
				t.Fatal("the fault was never hit")
			}
			if !strings.Contains(err.Error(), "workspace.tar.gz") {
				t.Fatalf("error does not name the object: %v", err)
			}
			noSecret(t, err, s3server.SecretKey)
			p.Set(nil, faultproxy.Fault{})
			if refs, err := direct.List(ctx, "", "ws"); err != nil || len(refs) != 0 {
				t.Fatalf("after the fault: list %v, %v", refs, err)
			}
			// The abort already removed what it could; a sweep finds
			// nothing it may not delete.
			if _, err := direct.Sweep(ctx, func(Ref) bool { return false }); err != nil {
				t.Fatal(err)
			}
			if _, err := direct.ReadRange(ctx, up.Ref(), "workspace.tar.gz", 0, 1); !errors.Is(err, ErrNotFound) {
				t.Fatalf("failed upload's object: %v", err)
			}
		})
	}
}
