package e2e

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"os"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
)

// TestOpenAPIServed: GET /v1/openapi.json answers, without a credential,
// exactly the document in the repository, and kin-openapi loads and
// validates it as OpenAPI 3.1. A wrong Host is still refused.
func TestOpenAPIServed(t *testing.T) {
	p := start(t, options{dataDir: t.TempDir(), args: []string{"--docker-scope", "unused"}})
	want, err := os.ReadFile("../ui-bridge/openapi.json")
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.Get(p.ready.URL + "/v1/openapi.json")
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("GET /v1/openapi.json without a token: %d %q, want 200 application/json", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("the served document (%d bytes) differs from ui-bridge/openapi.json (%d bytes)", len(got), len(want))
	}
	doc, err := openapi3.NewLoader().LoadFromData(got)
	if err != nil {
		t.Fatalf("kin-openapi cannot load the served document: %v", err)
	}
	if !doc.IsOpenAPI31OrLater() || doc.OpenAPI != "3.1.0" {
		t.Errorf("openapi %q, want 3.1.0", doc.OpenAPI)
	}
	if err := doc.Validate(context.Background()); err != nil {
		t.Fatalf("the served document does not validate: %v", err)
	}

	// Revalidation: the ETag answers 304.
	req, _ := http.NewRequest("GET", p.ready.URL+"/v1/openapi.json", nil)
	req.Header.Set("If-None-Match", resp.Header.Get("ETag"))
	r2, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	r2.Body.Close()
	if r2.StatusCode != 304 {
		t.Errorf("If-None-Match with its ETag: %d, want 304", r2.StatusCode)
	}

	// The gate's Host check still applies (DNS rebinding).
	req, _ = http.NewRequest("GET", p.ready.URL+"/v1/openapi.json", nil)
	req.Host = "evil.example"
	r3, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	r3.Body.Close()
	if r3.StatusCode != 403 {
		t.Errorf("a foreign Host: %d, want 403", r3.StatusCode)
	}
}
