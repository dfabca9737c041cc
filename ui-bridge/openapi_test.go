package uibridge

import (
	"encoding/json"
	"net/http"
	"sort"
	"strings"
	"testing"

	"github.com/canvasapp/companion/webhooks"
)

// docPaths reads openapi.json's paths: template → methods (upper case).
func docPaths(t *testing.T) (map[string]map[string]bool, map[string]any) {
	t.Helper()
	var doc struct {
		Paths map[string]map[string]any `json:"paths"`
	}
	if err := json.Unmarshal(openAPI, &doc); err != nil {
		t.Fatalf("openapi.json is not JSON: %v", err)
	}
	out := map[string]map[string]bool{}
	for p, item := range doc.Paths {
		out[p] = map[string]bool{}
		for k := range item {
			switch k {
			case "get", "put", "post", "delete", "options", "head", "patch", "trace":
				out[p][strings.ToUpper(k)] = true
			}
		}
	}
	var raw map[string]any
	json.Unmarshal(openAPI, &raw)
	return out, raw
}

// TestOpenAPICoversRoutes checks that every route the bridge registers
// (every optional one turned on) is in openapi.json with its method, and
// that the document names no route the bridge lacks: adding a route
// without documenting it fails here, before any e2e test runs.
func TestOpenAPICoversRoutes(t *testing.T) {
	s := &Server{cfg: Config{
		Modules:  struct{ ModuleAdmin }{},
		Metrics:  http.NotFoundHandler(),
		Login:    &Login{Local: true, OIDC: &OIDCRoutes{Start: http.NotFoundHandler(), Callback: http.NotFoundHandler()}},
		Webhooks: &webhooks.Hooks{},
	}}
	rt := newRouter(http.NewServeMux())
	s.routes(rt)
	doc, raw := docPaths(t)

	// Served by cmd/companion ahead of the bridge, and the agent proxy
	// (rt.any, every method).
	outside := map[string]bool{"/readyz": true, "/v1/workspaces/{id}/agent/{path}": true}
	var assets []string
	registered := map[string]bool{}
	for path, m := range rt.paths {
		tmpl := path
		switch {
		case path == "/{$}":
			tmpl = "/"
		case !strings.Contains(path[1:], "/") && strings.Contains(path, ".") && !strings.HasPrefix(path, "/v1"):
			if _, isAsset := pageAssets()[path]; isAsset {
				assets = append(assets, path[1:])
				tmpl = "/{asset}"
			}
		}
		registered[tmpl] = true
		for method := range m.byMethod {
			if !doc[tmpl][method] {
				t.Errorf("route %s %s is not in openapi.json (add it there: see API.md, \"The OpenAPI document\")", method, path)
			}
		}
	}
	for tmpl, methods := range doc {
		if outside[tmpl] || registered[tmpl] {
			continue
		}
		for m := range methods {
			t.Errorf("openapi.json documents %s %s, which the bridge does not serve", m, tmpl)
		}
	}

	// The page's files are the enum of /{asset}.
	sort.Strings(assets)
	params := raw["paths"].(map[string]any)["/{asset}"].(map[string]any)["get"].(map[string]any)["parameters"].([]any)
	var enum []string
	for _, v := range params[0].(map[string]any)["schema"].(map[string]any)["enum"].([]any) {
		enum = append(enum, v.(string))
	}
	sort.Strings(enum)
	if strings.Join(enum, " ") != strings.Join(assets, " ") {
		t.Errorf("openapi.json's /{asset} enum is %q; the page's files are %q", enum, assets)
	}
}
