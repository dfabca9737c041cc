package exportstore

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
)

// Reader feeds http.ServeContent, so a download handler answers Range
// requests from the store.
func TestReaderServesHTTPRanges(t *testing.T) {
	eachBackend(t, func(t *testing.T, b *backend) {
		s := b.open(t)
		ctx := context.Background()
		data := readAllT(t, gen(9, 100_000))
		up, _ := s.Begin("", "ws", "serve")
		if _, err := up.Add(ctx, "workspace.tar.gz", bytes.NewReader(data)); err != nil {
			t.Fatal(err)
		}
		ref, err := up.Commit(ctx, []byte("{}"))
		if err != nil {
			t.Fatal(err)
		}
		for _, tc := range []struct {
			rng    string
			status int
			want   []byte
		}{
			{"", http.StatusOK, data},
			{"bytes=10-19", http.StatusPartialContent, data[10:20]},
			{"bytes=-5", http.StatusPartialContent, data[len(data)-5:]},
			{"bytes=99990-", http.StatusPartialContent, data[99990:]},
			{"bytes=200000-", http.StatusRequestedRangeNotSatisfiable, nil},
		} {
			r, err := s.Open(ctx, ref, "workspace.tar.gz")
			if err != nil {
				t.Fatal(err)
			}
			req := httptest.NewRequest(http.MethodGet, "/x", nil)
			if tc.rng != "" {
				req.Header.Set("Range", tc.rng)
			}
			w := httptest.NewRecorder()
			http.ServeContent(w, req, "workspace.tar.gz", r.ModTime(), r)
			r.Close()
			if w.Code != tc.status || (tc.want != nil && !bytes.Equal(w.Body.Bytes(), tc.want)) {
				t.Fatalf("Range %q: %d, %d bytes; want %d, %d bytes", tc.rng, w.Code, w.Body.Len(), tc.status, len(tc.want))
			}
		}
	})
}
