package exportstore

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/canvasapp/companion/internal/testsupport/faultproxy"
	"github.com/canvasapp/companion/internal/testsupport/gcsserver"
)

// The Google client retries 5xx and stalls on its own for as long as its
// context lasts; the store's limits end it.
func TestGCSFaultsAreClassified(t *testing.T) {
	gcsWrite := func(r *http.Request) bool { return r.Method == http.MethodPost || r.Method == http.MethodPut }
	gcsRead := func(r *http.Request) bool { return r.Method == http.MethodGet && r.URL.Query().Get("alt") == "media" }
	for _, tc := range []struct {
		name  string
		match func(*http.Request) bool
		fault faultproxy.Fault
		open  bool
	}{
		{"5xx on open", faultproxy.All, faultproxy.Fault{Status: 503, Body: `{"error":{"code":503,"message":"backend unavailable"}}`, ContentType: "application/json"}, true},
		{"stall on open", faultproxy.All, faultproxy.Fault{Stall: true}, true},
		{"stalled upload", gcsWrite, faultproxy.Fault{Stall: true}, false},
		{"5xx upload", gcsWrite, faultproxy.Fault{Status: 503, Body: `{"error":{"code":503,"message":"backend unavailable"}}`, ContentType: "application/json"}, false},
		{"stalled read-back", gcsRead, faultproxy.Fault{Stall: true}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := gcsserver.Start(t, testBucket)
			p := faultproxy.Start(t, srv.Endpoint)
			u := strings.Replace(srv.URL(testBucket, "exports"), url.QueryEscape(srv.Endpoint), url.QueryEscape(p.URL), 1)
			o := Options{OpTimeout: time.Second, StallTimeout: time.Second}
			ctx := bounded(t)
			if tc.open {
				p.Set(tc.match, tc.fault)
				_, err := Open(ctx, u, o)
				ownLimit(t, ctx, err, ErrUnavailable)
				t.Logf("error: %v", err)
				return
			}
			s, err := Open(ctx, u, o)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			up, err := s.Begin("", "ws", "faulty")
			if err != nil {
				t.Fatal(err)
			}
			p.Set(tc.match, tc.fault)
			_, err = up.Add(ctx, "workspace.tar.gz", gen(3, 1<<20))
			ownLimit(t, ctx, err, ErrUnavailable)
			t.Logf("error: %v", err)
			if p.Hits() == 0 {
				t.Fatal("the fault was never hit")
			}
			p.Set(nil, faultproxy.Fault{})
			if refs, err := s.List(context.Background(), "", "ws"); err != nil || len(refs) != 0 {
				t.Fatalf("after the fault: list %v, %v", refs, err)
			}
		})
	}
}
