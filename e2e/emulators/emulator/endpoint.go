package emulator

import (
	"fmt"
	"net/http"
	"strconv"
)

// Endpoint is how a box's port is reached through its provider's proxy:
// the URL and the per-box headers the proxy wants. A credential the
// caller holds anyway (an account's API token) is not repeated here.
type Endpoint struct {
	URL     string            `json:"url"`
	Headers map[string]string `json:"headers,omitempty"`
}

// PortParam reads ?port= (1-65535) for the endpoint admin routes; absent
// means 8000, the agent-server's port.
func PortParam(r *http.Request) (int, error) {
	v := r.URL.Query().Get("port")
	if v == "" {
		return 8000, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > 65535 {
		return 0, fmt.Errorf("port %q: want 1-65535", v)
	}
	return n, nil
}
