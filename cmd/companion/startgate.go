package main

import (
	"encoding/json"
	"net/http"
	"sync"
	"sync/atomic"
)

// startGate serves HTTP from the moment companion listens, before the
// handler exists: the workspaces are loaded after the ready line (loading
// takes time in proportion to the store), and a request that arrives
// meanwhile waits for them rather than seeing a partial or empty set.
type startGate struct {
	once  sync.Once
	ready chan struct{}
	h     http.Handler // set before ready closes; nil when starting failed
	// checks answers /readyz once set (setReady); /healthz and /readyz
	// never wait for the gate.
	checks atomic.Pointer[readyChecker]
	base   string // --base-path
}

// setReady lets /readyz run c's checks (until then it answers 503,
// starting).
func (g *startGate) setReady(c *readyChecker) { g.checks.Store(c) }

// newStartGate returns a gate whose probes are under basePath ("" or
// "/prefix", as every route).
func newStartGate(basePath string) *startGate {
	return &startGate{ready: make(chan struct{}), base: basePath}
}

// open lets every waiting and later request through to h; a nil h answers
// 503 (companion failed to start and is stopping).
func (g *startGate) open(h http.Handler) {
	g.once.Do(func() {
		g.h = h
		close(g.ready)
	})
}

func (g *startGate) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var checks *readyChecker
	select {
	case <-g.ready:
		if g.h != nil {
			checks = g.checks.Load()
		}
	default:
	}
	if probe(w, r, g.base, checks) {
		return
	}
	select {
	case <-g.ready:
	case <-r.Context().Done():
		return
	}
	if g.h == nil {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusServiceUnavailable)
		_ = json.NewEncoder(w).Encode(map[string]any{"error": map[string]string{
			"code": "unavailable", "message": "companion could not finish starting and is stopping; see its log",
		}})
		return
	}
	g.h.ServeHTTP(w, r)
}
