package cloudflare

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"path"
	"regexp"
	"strings"

	"github.com/canvasapp/companion/e2e/emulators/emulator"
)

// execBody is POST /v1/sandbox/:id/exec (§2.3).
type execBody struct {
	Argv      []string `json:"argv"`
	TimeoutMS int      `json:"timeout_ms"`
	Cwd       string   `json:"cwd"`
}

// agentKeyRE reads the key a start script gives the agent-server.
var agentKeyRE = regexp.MustCompile(`OH_SESSION_API_KEYS_0='([^']*)'`)

// exec runs argv in the container and streams SSE events: stdout/stderr
// (base64 chunks), then exit {"exit_code":N}. The container's shell knows
// a few commands: true, echo, and a start script that launches the
// agent-server in the background (sh -c with "nohup", and the key as
// OH_SESSION_API_KEYS_0='<key>'); a second start finds it running. Any
// other command is not found (127).
func (s *Server) exec(w http.ResponseWriter, r *http.Request, c *Container) {
	var b execBody
	if err := emulator.DecodeJSON(r, &b); err != nil {
		fail(w, http.StatusBadRequest, "Invalid JSON body: "+err.Error(), "invalid_request")
		return
	}
	if len(b.Argv) == 0 {
		fail(w, http.StatusBadRequest, "argv must be a non-empty array of strings", "invalid_request")
		return
	}
	if b.Cwd != "" {
		clean := path.Clean(path.Join("/workspace", b.Cwd))
		if clean != "/workspace" && !strings.HasPrefix(clean, "/workspace/") {
			fail(w, http.StatusForbidden, "cwd must resolve inside /workspace", "invalid_request")
			return
		}
	}
	stdout, stderr, code := s.run(c, b.Argv)
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	event := func(name string, data string) {
		fmt.Fprintf(w, "event: %s\ndata: %s\n\n", name, data)
		http.NewResponseController(w).Flush()
	}
	if stdout != "" {
		event("stdout", base64.StdEncoding.EncodeToString([]byte(stdout)))
	}
	if stderr != "" {
		event("stderr", base64.StdEncoding.EncodeToString([]byte(stderr)))
	}
	exit, _ := json.Marshal(map[string]int{"exit_code": code})
	event("exit", string(exit))
}

// run is the container's shell.
func (s *Server) run(c *Container, argv []string) (stdout, stderr string, code int) {
	if len(argv) == 3 && argv[0] == "sh" && argv[1] == "-c" {
		script := argv[2]
		if strings.Contains(script, "nohup ") {
			key := ""
			if strings.Contains(script, "OH_SESSION_API_KEYS_0=") {
				m := agentKeyRE.FindStringSubmatch(script)
				if m == nil {
					return "", "sh: syntax error: unterminated quoted string\n", 2
				}
				key = m[1]
			}
			s.mu.Lock()
			defer s.mu.Unlock()
			cur := s.containers[c.SandboxID]
			if cur == nil || cur.ID != c.ID {
				return "", "container stopped\n", 137
			}
			if cur.Agent {
				return "agent-server already running\n", "", 0
			}
			cur.Agent, cur.AgentKey = true, key
			return "agent-server started\n", "", 0
		}
		argv = strings.Fields(script)
	}
	switch argv[0] {
	case "true":
		return "", "", 0
	case "false":
		return "", "", 1
	case "echo":
		return strings.Join(argv[1:], " ") + "\n", "", 0
	}
	return "", "sh: " + argv[0] + ": not found\n", 127
}
