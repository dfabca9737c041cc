package exportstore

import (
	"context"
	"net/http"
	"net/url"
	"sync"
	"testing"

	"github.com/canvasapp/companion/internal/testsupport/faultproxy"
	"github.com/canvasapp/companion/internal/testsupport/s3server"
)

// TestUploadsAreNotHashedTwice: S3 uploads go with UNSIGNED-PAYLOAD (the
// SDK would otherwise hash every part over plain HTTP just to sign it), and
// a changed byte is still caught by the read-back.
func TestUploadsAreNotHashedTwice(t *testing.T) {
	srv := s3server.Start(t, testBucket)
	u, err := url.Parse(srv.URL(testBucket, "p"))
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	proxy := faultproxy.Start(t, q.Get("endpoint"))
	q.Set("endpoint", proxy.URL)
	u.RawQuery = q.Encode()
	var mu sync.Mutex
	var signed []string
	proxy.Set(func(r *http.Request) bool {
		if r.Method == http.MethodPut {
			mu.Lock()
			signed = append(signed, r.Header.Get("X-Amz-Content-Sha256"))
			mu.Unlock()
		}
		return false
	}, faultproxy.Fault{})
	ctx := context.Background()
	s, err := Open(ctx, u.String(), Options{AccessKeyID: s3server.AccessKey, SecretAccessKey: s3server.SecretKey})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	up, err := s.Begin("", "ws-u", "exp-u")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := up.Add(ctx, "workspace.tar.gz", gen(3, 20<<20)); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(signed) < 3 {
		t.Fatalf("saw %d uploads (PUT) through the proxy, want the parts of a 20 MiB file", len(signed))
	}
	for _, h := range signed {
		if h != "UNSIGNED-PAYLOAD" {
			t.Fatalf("an upload was signed with payload hash %q, want UNSIGNED-PAYLOAD", h)
		}
	}
}
