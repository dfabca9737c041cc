package main

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/canvasapp/companion/core"
	"github.com/canvasapp/companion/db"
	"github.com/canvasapp/companion/secrets"
)

// Probes for orchestrators (Kubernetes liveness and readiness), answered
// before the bridge's gate: no Host check and no credential, since an
// orchestrator calls them by the pod's address, and they reveal nothing
// but which check fails (the reasons go to the log). They are under
// --base-path, as every route.
const (
	healthzPath = "/healthz"
	readyzPath  = "/readyz"
)

// readyChecker answers GET /readyz: the store reachable, its migrations
// done, the secret store answering.
type readyChecker struct {
	store   interface{ Ready(context.Context) error }
	secrets core.Secrets
	log     *slog.Logger
}

// readyTimeout bounds each check: a probe must answer, whatever hangs.
const readyTimeout = 3 * time.Second

// check runs the checks; failing names those that failed, in order.
func (c *readyChecker) check(ctx context.Context) (checks map[string]string, failing []string) {
	checks = map[string]string{"store": "ok", "migrations": "ok", "secrets": "ok"}
	fail := func(name, state string, err error) {
		checks[name] = state
		if state == "failing" {
			failing = append(failing, name)
			c.log.Warn("readiness check failed", "check", name, "err", err)
		}
	}
	sctx, cancel := context.WithTimeout(ctx, readyTimeout)
	err := c.store.Ready(sctx)
	cancel()
	switch {
	case errors.Is(err, db.ErrMigrationsPending):
		fail("migrations", "failing", err)
	case err != nil:
		fail("store", "failing", err)
		fail("migrations", "unknown", nil)
	}
	kctx, cancel := context.WithTimeout(ctx, readyTimeout)
	err = secrets.Answers(kctx, c.secrets)
	cancel()
	if err != nil {
		fail("secrets", "failing", err)
	}
	return checks, failing
}

// probe answers base+/healthz and base+/readyz; ok is false for any
// other path. ready is nil while companion starts.
func probe(w http.ResponseWriter, r *http.Request, base string, ready *readyChecker) (ok bool) {
	path, under := strings.CutPrefix(r.URL.Path, base)
	if !under || (path != healthzPath && path != readyzPath) {
		return false
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		writeProbe(w, http.StatusMethodNotAllowed, map[string]any{"error": map[string]string{
			"code": "method_not_allowed", "message": r.Method + " is not allowed here; allowed: GET, HEAD"}})
		return true
	}
	if path == healthzPath {
		writeProbe(w, http.StatusOK, map[string]string{"status": "ok", "version": version})
		return true
	}
	if ready == nil {
		writeProbe(w, http.StatusServiceUnavailable, map[string]any{"status": "unavailable", "failing": []string{"start"},
			"checks": map[string]string{"start": "starting"}})
		return true
	}
	checks, failing := ready.check(r.Context())
	if len(failing) > 0 {
		writeProbe(w, http.StatusServiceUnavailable, map[string]any{"status": "unavailable", "failing": failing, "checks": checks})
		return true
	}
	writeProbe(w, http.StatusOK, map[string]any{"status": "ready", "checks": checks})
	return true
}

func writeProbe(w http.ResponseWriter, status int, body any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(body)
}
