package main

import (
	"crypto/md5"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// serveFile answers one request with fileResponse.
func serveFile(t *testing.T, p, mediaType, name string, extra http.Header, hdr http.Header) *httptest.ResponseRecorder {
	t.Helper()
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r := httptest.NewRequest("GET", "/x", nil)
	r.Header = hdr
	w := httptest.NewRecorder()
	fileResponse(w, r, f, mediaType, name, extra)
	return w
}

func TestFileResponse(t *testing.T) {
	p := filepath.Join(t.TempDir(), "f")
	writeFile(t, p, "0123456789")
	mtime := time.Date(2026, 8, 22, 10, 0, 0, 500_000_000, time.UTC)
	os.Chtimes(p, mtime, mtime)
	sum := md5.Sum([]byte("1787392800.5-10")) // str(st_mtime) + "-" + str(st_size)
	etag := `"` + hex.EncodeToString(sum[:]) + `"`

	w := serveFile(t, p, "text/x-patch", "proj.patch", http.Header{"X-Archive-Base-Ref": {"auto"}}, http.Header{})
	for k, want := range map[string]string{
		"Content-Type":        "text/x-patch; charset=utf-8",
		"Content-Length":      "10",
		"Content-Disposition": `attachment; filename="proj.patch"`,
		"Accept-Ranges":       "bytes",
		"Last-Modified":       "Sat, 22 Aug 2026 10:00:00 GMT",
		"Etag":                etag,
		"X-Archive-Base-Ref":  "auto",
	} {
		if got := w.Header().Get(k); got != want {
			t.Errorf("%s: %q, want %q", k, got, want)
		}
	}
	if w.Code != 200 || w.Body.String() != "0123456789" {
		t.Errorf("whole file: %d %q", w.Code, w.Body.String())
	}
	for name, want := range map[string]string{
		"my proj.tar.gz": "attachment; filename*=utf-8''my%20proj.tar.gz",
		"résumé.pdf":     "attachment; filename*=utf-8''r%C3%A9sum%C3%A9.pdf",
		"a-b_c.~d":       `attachment; filename="a-b_c.~d"`,
		"":               `attachment; filename=""`,
	} {
		if got := contentDisposition(name); got != want {
			t.Errorf("contentDisposition(%q) = %q, want %q", name, got, want)
		}
	}

	// Ranges, as Starlette serves them.
	rng := func(spec string, extra ...string) *httptest.ResponseRecorder {
		h := http.Header{"Range": {spec}}
		if len(extra) > 0 {
			h.Set("If-Range", extra[0])
		}
		return serveFile(t, p, "application/octet-stream", "f", http.Header{"X-Archive-Repo-Root": {"x"}}, h)
	}
	if w := rng("bytes=2-4"); w.Code != 206 || w.Body.String() != "234" || w.Header().Get("Content-Range") != "bytes 2-4/10" ||
		w.Header().Get("Content-Length") != "3" {
		t.Errorf("one range: %d %q %v", w.Code, w.Body.String(), w.Header())
	}
	if w := rng("bytes=-3"); w.Code != 206 || w.Body.String() != "789" {
		t.Errorf("a suffix range: %d %q", w.Code, w.Body.String())
	}
	if w := rng("bytes=7-100"); w.Code != 206 || w.Body.String() != "789" {
		t.Errorf("an end past the file: %d %q", w.Code, w.Body.String())
	}
	w = rng("bytes=0-1, 8-, 1-2")
	b := w.Body.String()
	boundary, _ := strings.CutPrefix(w.Header().Get("Content-Type"), "multipart/byteranges; boundary=")
	if w.Code != 206 || len(boundary) != 26 || !strings.Contains(b, "Content-Range: bytes 0-2/10\r\n\r\n012\r\n") ||
		!strings.Contains(b, "Content-Range: bytes 8-9/10\r\n\r\n89\r\n") || !strings.HasSuffix(b, "--"+boundary+"--") ||
		w.Header().Get("Content-Length") != fmt.Sprint(len(b)) {
		t.Errorf("several ranges (overlapping ones merged): %d %v\n%q", w.Code, w.Header(), b)
	}
	if w := rng("bytes=10-"); w.Code != 416 || w.Header().Get("Content-Range") != "bytes */10" || w.Header().Get("X-Archive-Repo-Root") != "" {
		t.Errorf("past the end: %d %v", w.Code, w.Header())
	}
	for spec, msg := range map[string]string{
		"items=1-2": "Only support bytes range",
		"bytes=5-2": "Range header: start must be less than end",
		"bytes=x-y": "Range header: range must be requested",
		"bytes":     "Malformed range header.",
	} {
		if w := rng(spec); w.Code != 400 || w.Body.String() != msg || w.Header().Get("Content-Type") != "text/plain; charset=utf-8" {
			t.Errorf("%q: %d %q", spec, w.Code, w.Body.String())
		}
	}
	if w := rng("bytes=0-0", `"stale"`); w.Code != 200 || w.Body.String() != "0123456789" {
		t.Errorf("a stale If-Range gets the whole file: %d %q", w.Code, w.Body.String())
	}
	if w := rng("bytes=0-0", etag); w.Code != 206 || w.Body.String() != "0" {
		t.Errorf("a current If-Range gets the range: %d %q", w.Code, w.Body.String())
	}
}
