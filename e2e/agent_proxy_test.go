package e2e

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"io"
	"math/rand/v2"
	"mime/multipart"
	"net/http"
	"strings"
	"testing"
	"time"
)

// agentReq sends a request through the agent proxy of workspace id
// (path below the agent-server's root) with the launch token and extra
// headers, and returns status, headers and body.
func (p *proc) agentReq(method, id, path string, body string, hdr map[string]string) (int, http.Header, []byte) {
	p.t.Helper()
	var r io.Reader
	if body != "" {
		r = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, p.ready.URL+"/v1/workspaces/"+id+"/agent"+path, r)
	if err != nil {
		p.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+p.ready.Token)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		p.t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, raw
}

// connectResult is POST /v1/workspaces/{id}/connect's answer.
type connectResult struct {
	Connect struct {
		Workspace workspace `json:"workspace"`
		Woke      bool      `json:"woke"`
		AgentPath string    `json:"agent_path"`
	} `json:"connect"`
}

// TestAgentProxyDocker: through the binary and a Docker box, the agent
// in the box is reached through companion alone: connect answers the
// proxy's path; conversations are listed and made through it (companion
// attaches the box's key, the caller's own key is not passed on); a path
// that climbs out is refused; a paused box is refused until a connect
// wakes it; the box's key appears in no answer.
func TestAgentProxyDocker(t *testing.T) {
	p := start(t, options{dataDir: t.TempDir(), args: []string{"--docker-image", boxImage(t), "--docker-scope", dockerScope(t)}})
	ws := p.createRunning("agent")["agent"]
	key := boxKey(t, ws.BoxID)

	var c connectResult
	p.must(200, "POST", "/v1/workspaces/"+ws.ID+"/connect", nil, &c)
	if c.Connect.Woke || c.Connect.AgentPath != "/v1/workspaces/"+ws.ID+"/agent" || c.Connect.Workspace.State != "running" {
		t.Fatalf("connect: %+v", c)
	}
	var answers []string
	check := func(what string, want int, code int, h http.Header, raw []byte) {
		t.Helper()
		answers = append(answers, fmt.Sprint(h), string(raw))
		if code != want {
			t.Fatalf("%s: %d %s, want %d", what, code, raw, want)
		}
	}
	code, h, raw := p.agentReq("POST", ws.ID, "/api/conversations", `{"agent":{"llm":{"model":"m"}},"title":"through companion"}`,
		map[string]string{"X-Session-API-Key": "not-the-key"})
	check("start a conversation", 201, code, h, raw)
	code, h, raw = p.agentReq("GET", ws.ID, "/api/conversations/search?limit=10", "", nil)
	check("search", 200, code, h, raw)
	if !strings.Contains(string(raw), "through companion") {
		t.Errorf("search does not list the conversation: %s", raw)
	}
	code, h, raw = p.agentReq("GET", ws.ID, "/server_info", "", nil)
	check("server_info", 200, code, h, raw)
	p.bigFileThroughAgent(ws.ID, 48<<20)

	code, _, raw = p.agentReq("GET", ws.ID, "/%2e%2e/%2e%2e/v1/workspaces", "", nil)
	if code != 400 {
		t.Errorf("a path that climbs out: %d %s, want 400", code, raw)
	}
	code, _, raw = p.agentReq("GET", "ws_nope", "/server_info", "", nil)
	if code != 404 {
		t.Errorf("an unknown workspace: %d %s, want 404", code, raw)
	}

	p.must(202, "POST", "/v1/workspaces/"+ws.ID+"/pause", nil, nil)
	p.waitState(ws.ID, "paused", time.Minute)
	code, _, raw = p.agentReq("GET", ws.ID, "/server_info", "", nil)
	if code != 409 || !strings.Contains(string(raw), "connect") {
		t.Errorf("a paused workspace: %d %s, want 409 naming connect", code, raw)
	}
	p.must(200, "POST", "/v1/workspaces/"+ws.ID+"/connect", nil, &c)
	if !c.Connect.Woke || c.Connect.Workspace.State != "running" {
		t.Fatalf("connect to a paused box: %+v", c)
	}
	code, h, raw = p.agentReq("GET", ws.ID, "/api/conversations/search", "", nil)
	check("search after the wake", 200, code, h, raw)
	for _, a := range answers {
		if strings.Contains(a, key) {
			t.Fatalf("the box's key appears in an answer: %s", a)
		}
	}
	if strings.Contains(p.stderr.String(), key) {
		t.Fatal("the box's key appears in companion's log")
	}
}

// bigFileThroughAgent uploads size bytes into the box through the proxy
// (multipart, streamed from a pipe: the request has no length) and
// downloads them back through it, checking the SHA-256 both ways.
func (p *proc) bigFileThroughAgent(id string, size int64) {
	p.t.Helper()
	pr, pw := io.Pipe()
	mw := multipart.NewWriter(pw)
	sent := sha256.New()
	go func() {
		part, err := mw.CreateFormFile("file", "big.bin")
		if err == nil {
			_, err = io.CopyN(io.MultiWriter(part, sent), rand.NewChaCha8([32]byte{7}), size)
		}
		if err == nil {
			err = mw.Close()
		}
		pw.CloseWithError(err)
	}()
	req, _ := http.NewRequest("POST", p.ready.URL+"/v1/workspaces/"+id+"/agent/api/file/upload?path=/workspace/big.bin", pr)
	req.Header.Set("Authorization", "Bearer "+p.ready.Token)
	req.Header.Set("Content-Type", mw.FormDataContentType())
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		p.t.Fatal(err)
	}
	raw, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		p.t.Fatalf("upload of %d bytes through companion: %d %s", size, resp.StatusCode, raw)
	}
	req, _ = http.NewRequest("GET", p.ready.URL+"/v1/workspaces/"+id+"/agent/api/file/download?path=/workspace/big.bin", nil)
	req.Header.Set("Authorization", "Bearer "+p.ready.Token)
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		p.t.Fatal(err)
	}
	defer resp.Body.Close()
	got := sha256.New()
	n, err := io.Copy(got, resp.Body)
	if err != nil || resp.StatusCode != 200 || n != size || !bytes.Equal(got.Sum(nil), sent.Sum(nil)) {
		p.t.Fatalf("download through companion: %d, %d of %d bytes, %v, same hash %v", resp.StatusCode, n, size, err, bytes.Equal(got.Sum(nil), sent.Sum(nil)))
	}
}
