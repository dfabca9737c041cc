// Command proc is the process-per-call model the benchmarks compare
// against: one process per op, JSON on stdin, JSON on stdout (the shape of
// DevPod-style provider plugins). It answers list as the good module does
// with mode=static.
package main

import (
	"encoding/json"
	"os"
)

type box struct {
	ID        string            `json:"id"`
	Name      string            `json:"name,omitempty"`
	State     string            `json:"state"`
	Labels    map[string]string `json:"labels,omitempty"`
	CreatedAt string            `json:"created_at,omitempty"`
	PausedAt  string            `json:"paused_at,omitempty"`
	Size      *struct {
		Bytes  int64  `json:"bytes"`
		Source string `json:"source"`
	} `json:"size,omitempty"`
}

func main() {
	var in struct {
		Account struct {
			ID     string            `json:"id"`
			Config map[string]string `json:"config"`
		} `json:"account"`
	}
	if err := json.NewDecoder(os.Stdin).Decode(&in); err != nil {
		json.NewEncoder(os.Stdout).Encode(map[string]any{"error": map[string]string{"kind": "invalid", "message": err.Error()}})
		os.Exit(1)
	}
	three := box{ID: "b-3", Name: "three", State: "running"}
	three.Size = &struct {
		Bytes  int64  `json:"bytes"`
		Source string `json:"source"`
	}{1 << 30, "provider_api:used"}
	boxes := []box{
		{ID: "b-1", Name: "one", State: "running", Labels: map[string]string{"companion.workspace": "ws-1"}, CreatedAt: "2025-01-01T00:00:00Z"},
		{ID: "b-2", Name: "two", State: "paused", PausedAt: "2025-01-02T00:00:00Z"},
		three,
	}
	json.NewEncoder(os.Stdout).Encode(map[string]any{"ok": map[string]any{"boxes": boxes}})
}
