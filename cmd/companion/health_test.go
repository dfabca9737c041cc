package main

import (
	"net/http/httptest"
	"strings"
	"testing"
)

// The probes answer under the base path only, any method but GET and
// HEAD is 405, and /readyz is 503 "start" until the checks are set.
func TestProbePaths(t *testing.T) {
	for _, c := range []struct {
		method, path, base string
		handled            bool
		code               int
		body               string
	}{
		{"GET", "/healthz", "", true, 200, `"status":"ok"`},
		{"HEAD", "/healthz", "", true, 200, ""},
		{"POST", "/healthz", "", true, 405, "method_not_allowed"},
		{"GET", "/readyz", "", true, 503, `"failing":["start"]`},
		{"GET", "/api/companion/healthz", "/api/companion", true, 200, `"status":"ok"`},
		{"GET", "/healthz", "/api/companion", false, 0, ""},
		{"GET", "/v1/workspaces", "", false, 0, ""},
		{"GET", "/healthzz", "", false, 0, ""},
	} {
		w := httptest.NewRecorder()
		handled := probe(w, httptest.NewRequest(c.method, c.path, nil), c.base, nil)
		if handled != c.handled || (handled && (w.Code != c.code || !strings.Contains(w.Body.String(), c.body))) {
			t.Errorf("%s %s (base %q): handled %v, %d %s; want %v, %d with %s", c.method, c.path, c.base, handled, w.Code, w.Body, c.handled, c.code, c.body)
		}
	}
}
