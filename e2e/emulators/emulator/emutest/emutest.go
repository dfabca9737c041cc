// Package emutest holds what the emulators' own tests share: a client that
// sends one credential header with every request and returns the whole
// response.
package emutest

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
)

// Client calls an emulator under test.
type Client struct {
	T   *testing.T
	URL string // the server's base URL
	// Header and Value are the credential sent with every request, e.g.
	// "Authorization" and "Bearer tok".
	Header, Value string
	// JSON sets Content-Type: application/json on requests with a body.
	JSON bool
}

// Response is one answer, read in full.
type Response struct {
	Status int
	Header http.Header
	Body   []byte
}

// Decode unmarshals the body into v or fails the test.
func (r Response) Decode(t *testing.T, v any) {
	t.Helper()
	if err := json.Unmarshal(r.Body, v); err != nil {
		t.Fatalf("decoding %s: %v", r.Body, err)
	}
}

// Call sends a request. hdr are key/value pairs applied after the
// credential; an empty value removes that header.
func (c *Client) Call(method, path, body string, hdr ...string) Response {
	c.T.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, c.URL+path, rd)
	if err != nil {
		c.T.Fatal(err)
	}
	req.Header.Set(c.Header, c.Value)
	if body != "" && c.JSON {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		if hdr[i+1] == "" {
			req.Header.Del(hdr[i])
		} else {
			req.Header.Set(hdr[i], hdr[i+1])
		}
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		c.T.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return Response{resp.StatusCode, resp.Header, b}
}

// Want fails the test unless r has the given status.
func (c *Client) Want(r Response, status int) Response {
	c.T.Helper()
	if r.Status != status {
		c.T.Fatalf("status %d, want %d: %s", r.Status, status, r.Body)
	}
	return r
}
