package uibridge

import (
	"bytes"
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"net/http"
	"sync"
	"time"
)

// clientJS is the JavaScript client (client/companion.js), served so that
// a page or an Electron renderer can import the client matching this
// companion: `import {CompanionClient} from "http://127.0.0.1:PORT/client/companion.js"`.
//
//go:embed client/companion.js
var clientJS []byte

// clientJSETag names the embedded bytes, so a reload revalidates cheaply.
var clientJSETag = embeddedETag(clientJS)

// embeddedETag returns the ETag of embedded bytes b. It is computed at the
// first request, not at package init, which every start of the binary
// pays.
func embeddedETag(b []byte) func() string {
	return sync.OnceValue(func() string {
		sum := sha256.Sum256(b)
		return `"` + hex.EncodeToString(sum[:16]) + `"`
	})
}

// serveClientJS answers GET /client/companion.js. It needs no token (the
// code holds no secret, like the page itself); the gate still checks Host
// and Origin, and sets CORS for an allowed app origin that imports it.
func (s *Server) serveClientJS(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	// A module script is refused by browsers unless its type is JavaScript.
	h.Set("Content-Type", "text/javascript; charset=utf-8")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Cache-Control", "no-cache")
	h.Set("ETag", clientJSETag())
	http.ServeContent(w, r, "companion.js", time.Time{}, bytes.NewReader(clientJS))
}
