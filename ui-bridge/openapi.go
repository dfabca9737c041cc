package uibridge

import (
	"bytes"
	_ "embed"
	"net/http"
	"time"
)

// openAPI is the OpenAPI 3.1 document of every route (openapi.json, next
// to API.md). It is written by hand and checked against reality by the
// e2e suite (internal/testsupport/apicontract); a new route goes there too.
//
//go:embed openapi.json
var openAPI []byte

// OpenAPIPath serves the document. It needs no credential (the gate
// still checks Host and Origin): the contract holds no data and no
// secret, it is the same file as in the repository, and tools read it
// before they hold a token.
const OpenAPIPath = "/v1/openapi.json"

// OpenAPI returns the embedded document.
func OpenAPI() []byte { return bytes.Clone(openAPI) }

var openAPIETag = embeddedETag(openAPI)

func (s *Server) serveOpenAPI(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Cache-Control", "no-cache")
	h.Set("ETag", openAPIETag())
	http.ServeContent(w, r, "openapi.json", time.Time{}, bytes.NewReader(openAPI))
}
