package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"strings"
	"time"

	"github.com/canvasapp/companion/providers/wasm/modules/internal/api"
	"github.com/canvasapp/companion/providers/wasm/sdk"
)

// pidFile marks the agent-server the start script launched; a fresh
// container (a new sandbox, or one after a sleep) has none.
const pidFile = "/tmp/companion-agent-server.pid"

// startScript is the shell script that starts the agent-server in the
// background with companion's key, unless the one it started runs. The
// key and command go into single quotes, so neither may hold one.
func startScript(command, key string) (string, error) {
	if strings.ContainsAny(command, "'\n\r\x00") {
		return "", sdk.Errorf(sdk.Invalid, "agent_command may not contain single quotes or line breaks")
	}
	for _, r := range key {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_.~", r)) {
			return "", sdk.Errorf(sdk.Invalid, "the agent-server key holds characters that cannot be passed to the sandbox's shell")
		}
	}
	env := ""
	if key != "" {
		env = "OH_SESSION_API_KEYS_0='" + key + "' "
	}
	return "if [ -f " + pidFile + " ] && kill -0 \"$(cat " + pidFile + ")\" 2>/dev/null; then echo 'agent-server already running'; " +
		"else cd /workspace && " + env + "nohup " + command + " >/tmp/companion-agent-server.log 2>&1 & echo $! >" + pidFile + "; fi", nil
}

// execResult is what an exec's event stream said.
type execResult struct {
	code           int
	stdout, stderr []byte
}

// tail is the end of the command's output, for an error message.
func (r execResult) tail() string {
	out := strings.TrimSpace(string(r.stderr))
	if out == "" {
		out = strings.TrimSpace(string(r.stdout))
	}
	if out == "" {
		return "no output"
	}
	if len(out) > 300 {
		out = "…" + out[len(out)-300:]
	}
	return strings.ToValidUTF8(strings.Join(strings.Fields(out), " "), "?")
}

// outputCap bounds what an exec's output keeps (the host caps the whole
// response already).
const outputCap = 64 << 10

// execute runs argv in sandbox id: POST /v1/sandbox/{id}/exec, answered
// as an SSE stream of stdout/stderr (base64), then exit {exit_code} or
// error {error, code} (§2.3).
func execute(ctx context.Context, id string, argv []string) (execResult, error) {
	body, _ := json.Marshal(map[string]any{"argv": argv, "timeout_ms": 30000})
	resp, err := sdk.HTTP(ctx).Do(sdk.Request{Upstream: api.Upstream, Method: "POST", Path: "/v1/sandbox/" + api.PathID(id) + "/exec",
		Headers: map[string]string{"Content-Type": "application/json", "Accept": "text/event-stream"}, Body: body})
	if err != nil {
		return execResult{}, err
	}
	if resp.Status < 200 || resp.Status > 299 {
		e := api.ErrorFrom("the Cloudflare Sandbox bridge", resp, time.Now())
		adjust(resp, e)
		return execResult{}, e
	}
	if ct := strings.ToLower(resp.Header("Content-Type")); !strings.HasPrefix(ct, "text/event-stream") {
		return execResult{}, sdk.Errorf(sdk.Unavailable, "the Cloudflare Sandbox bridge answered exec in sandbox %s with Content-Type %q, not an event stream; is api_url your bridge Worker?", id, clipped(ct))
	}
	return parseEvents(id, resp.Body)
}

// parseEvents reads an exec's event stream. A stream that ends without
// exit or error (cut, or not the bridge's) is an error, as is an event
// companion cannot read.
func parseEvents(id string, stream []byte) (execResult, error) {
	var res execResult
	sc := bufio.NewScanner(bytes.NewReader(stream))
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	event, data := "", []string{}
	bad := func(what string) error {
		return sdk.Errorf(sdk.Unavailable, "the Cloudflare Sandbox bridge sent an exec event companion cannot read in sandbox %s (%s)", id, what)
	}
	for sc.Scan() {
		line := sc.Text()
		if line != "" {
			if v, ok := strings.CutPrefix(line, "event:"); ok {
				event = strings.TrimSpace(v)
			} else if v, ok := strings.CutPrefix(line, "data:"); ok {
				data = append(data, strings.TrimPrefix(v, " "))
			}
			continue
		}
		payload := strings.Join(data, "\n")
		name := event
		event, data = "", data[:0]
		switch name {
		case "":
		case "stdout", "stderr":
			chunk, err := base64.StdEncoding.DecodeString(payload)
			if err != nil {
				return res, bad(name + " is not base64")
			}
			dst := &res.stdout
			if name == "stderr" {
				dst = &res.stderr
			}
			if room := outputCap - len(*dst); room > 0 {
				*dst = append(*dst, chunk[:min(room, len(chunk))]...)
			}
		case "exit":
			var v struct {
				ExitCode *int `json:"exit_code"`
			}
			if json.Unmarshal([]byte(payload), &v) != nil || v.ExitCode == nil {
				return res, bad("exit without an exit_code")
			}
			res.code = *v.ExitCode
			return res, nil
		case "error":
			var v struct {
				Error string `json:"error"`
				Code  string `json:"code"`
			}
			json.Unmarshal([]byte(payload), &v)
			return res, sdk.Errorf(sdk.Unavailable, "exec in Cloudflare sandbox %s failed: %s (%s)", id, clipped(api.First(v.Error, "no message")), clipped(api.First(v.Code, "no code")))
		}
	}
	if err := sc.Err(); err != nil {
		return res, bad(err.Error())
	}
	return res, sdk.Errorf(sdk.Unavailable, "the Cloudflare Sandbox bridge's exec stream for sandbox %s ended before the command's exit; companion will retry", id)
}

func clipped(s string) string {
	s = strings.ToValidUTF8(s, "?")
	if len(s) > 100 {
		return s[:100] + "…"
	}
	return s
}
