package uibridge

import (
	"bytes"
	"embed"
	"fmt"
	"io/fs"
	"net/http"
	"path"
	"sort"
	"time"
)

// web holds the embedded page: plain HTML, CSS and ES modules, served as
// they are (no build step).
//
//go:embed web
var web embed.FS

// PageCSP is the Content-Security-Policy of the page and its assets.
// Scripts and styles come only from companion itself (no inline script or
// style attribute can run), the page may only talk to its own origin
// ('self' covers ws:// to the same host and port in CSP 3), and it cannot
// be framed, post forms, or change its base URL.
const PageCSP = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
	"connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

// pageAsset is one embedded file, read once at start.
type pageAsset struct {
	body  []byte
	ctype string
}

// pageAssets are the embedded files by URL path: "/" is index.html, every
// other file is served under its own name. Nothing else under "/" is
// served (no directory listings, no fallbacks).
func pageAssets() map[string]pageAsset {
	out := map[string]pageAsset{}
	err := fs.WalkDir(web, "web", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := web.ReadFile(p)
		if err != nil {
			return err
		}
		// Not left to package mime, whose first use reads the OS's MIME
		// tables (milliseconds of the first answer, and a type that would
		// depend on the machine).
		var ctype string
		switch path.Ext(p) {
		case ".js":
			ctype = "text/javascript; charset=utf-8"
		case ".html":
			ctype = "text/html; charset=utf-8"
		case ".css":
			ctype = "text/css; charset=utf-8"
		default:
			return fmt.Errorf("%s: no content type for %q files; add one here", p, path.Ext(p))
		}
		rel := p[len("web"):]
		if rel == "/index.html" {
			rel = "/"
		}
		out[rel] = pageAsset{body: b, ctype: ctype}
		return nil
	})
	if err != nil {
		panic("uibridge: reading the embedded page: " + err.Error())
	}
	return out
}

// pageRoutes serves the page. It sits outside /v1/, so the gate lets it
// load without a token (Host and Origin are still checked): the page
// holds no data and no secret; everything it shows comes from /v1/ with
// the token it is given in its URL fragment.
func (s *Server) pageRoutes(rt *router) {
	assets := pageAssets()
	names := make([]string, 0, len(assets))
	for n := range assets {
		names = append(names, n)
	}
	sort.Strings(names)
	started := time.Now()
	for _, name := range names {
		a := assets[name]
		pattern := "GET " + name
		if name == "/" {
			pattern = "GET /{$}"
		}
		rt.handle(pattern, func(w http.ResponseWriter, r *http.Request) {
			setPageHeaders(w.Header())
			w.Header().Set("Content-Type", a.ctype)
			// no-cache, not no-store: the browser may keep a copy but
			// must revalidate, so a new companion's page is never mixed
			// with an old one's modules.
			w.Header().Set("Cache-Control", "no-cache")
			http.ServeContent(w, r, "", started, bytes.NewReader(a.body))
		})
	}
}

// setPageHeaders sets the security headers every page answer carries.
func setPageHeaders(h http.Header) {
	h.Set("Content-Security-Policy", PageCSP)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Cross-Origin-Opener-Policy", "same-origin")
	h.Set("Cross-Origin-Resource-Policy", "same-origin")
	h.Set("Permissions-Policy", "camera=(), microphone=(), geolocation=(), usb=()")
}
