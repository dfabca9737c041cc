package metrics_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/canvasapp/companion/core"
	"github.com/canvasapp/companion/metrics"
)

// record tells the writer the pattern the mux chose, as the bridge does.
func record(mux *http.ServeMux) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mux.ServeHTTP(w, r)
		w.(interface{ SetRoute(string) }).SetRoute(r.Pattern)
	})
}

func handler(t *testing.T, m *metrics.Metrics) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/workspaces/{id}", func(w http.ResponseWriter, r *http.Request) {
		if r.PathValue("id") == "boom" {
			http.Error(w, "boom", http.StatusInternalServerError)
			return
		}
		w.Write([]byte("ok"))
	})
	mux.HandleFunc("GET /hijack", func(w http.ResponseWriter, r *http.Request) {
		c, rw, err := w.(http.Hijacker).Hijack()
		if err != nil {
			t.Errorf("hijack through the middleware: %v", err)
			return
		}
		rw.WriteString("HTTP/1.1 101 Switching Protocols\r\nConnection: close\r\n\r\n")
		rw.Flush()
		c.Close()
	})
	gate := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/refused" {
			w.WriteHeader(http.StatusUnauthorized) // before routing, as the gate
			return
		}
		record(mux).ServeHTTP(w, r)
	})
	return m.Middleware(gate)
}

func TestMiddlewareLabelsByRoutePattern(t *testing.T) {
	m := metrics.New()
	srv := httptest.NewServer(handler(t, m))
	defer srv.Close()
	for _, p := range []string{"/v1/workspaces/ws_aaaaaaaa", "/v1/workspaces/ws_bbbbbbbb", "/v1/workspaces/boom", "/refused", "/hijack"} {
		resp, err := http.Get(srv.URL + p)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	req, _ := http.NewRequest("BREW", srv.URL+"/refused", nil)
	if resp, err := http.DefaultClient.Do(req); err == nil {
		resp.Body.Close()
	}
	want := `
# HELP companion_http_requests_total HTTP requests answered, by route pattern, method and status class (2xx, 3xx, 4xx, 5xx).
# TYPE companion_http_requests_total counter
companion_http_requests_total{method="GET",route="GET /hijack",status="1xx"} 1
companion_http_requests_total{method="GET",route="GET /v1/workspaces/{id}",status="2xx"} 2
companion_http_requests_total{method="GET",route="GET /v1/workspaces/{id}",status="5xx"} 1
companion_http_requests_total{method="GET",route="unrouted",status="4xx"} 1
companion_http_requests_total{method="other",route="unrouted",status="4xx"} 1
# HELP companion_http_request_errors_total HTTP requests answered with a server error (5xx), by route pattern and method.
# TYPE companion_http_request_errors_total counter
companion_http_request_errors_total{method="GET",route="GET /hijack"} 0
companion_http_request_errors_total{method="GET",route="GET /v1/workspaces/{id}"} 1
companion_http_request_errors_total{method="GET",route="unrouted"} 0
companion_http_request_errors_total{method="other",route="unrouted"} 0
`
	if err := testutil.GatherAndCompare(m.Registry(), strings.NewReader(want), "companion_http_requests_total", "companion_http_request_errors_total"); err != nil {
		t.Error(err)
	}
	if n := testutil.CollectAndCount(m.Registry(), "companion_http_request_duration_seconds"); n != 4 {
		t.Errorf("%d duration series, want 4", n)
	}
}

func TestObserverCountsActionsBounded(t *testing.T) {
	m := metrics.New()
	for _, e := range []core.AuditEntry{
		{Action: core.AuditDelete, Provider: "docker", Actor: "user:alice", WorkspaceID: "ws_1", Outcome: "started"},
		{Action: core.AuditDelete, Provider: "docker", Actor: "user:alice", WorkspaceID: "ws_1", Outcome: "ok (the box was already gone)"},
		{Action: core.AuditDelete, Provider: "docker", Actor: core.ActorRetention, WorkspaceID: "ws_2", Outcome: "blocked: the export failed"},
		{Action: core.AuditRetentionWarn, Provider: "daytona", Actor: core.ActorRetention, WorkspaceID: "ws_3", Outcome: "warned: deleted after 2026-01-01T00:00:00Z"},
	} {
		m.Audited(e)
	}
	m.DeleteStep(core.StepExport)
	m.Exported(core.ExportRecord{Provider: "docker", State: core.ExportVerified, Bytes: 2048})
	m.Exported(core.ExportRecord{Provider: "docker", State: core.ExportFailed})
	m.WasmCall("daytona", "list", 3*time.Millisecond, "time_budget")
	m.ProviderCall("docker", "get", time.Millisecond, core.Errorf(core.KindNotFound, "box ws_9 of alice is gone"))
	m.ProviderCall("docker", "get", time.Millisecond, nil)
	want := `
# HELP companion_actions_total Audited actions (create, pause, resume, delete, export, adopt, retention_warn, ...) by provider, outcome (started, ok, failed, blocked, warned, skipped, other) and who asked (person, reconciler, retention, recovery, guard).
# TYPE companion_actions_total counter
companion_actions_total{action="delete",by="person",outcome="ok",provider="docker"} 1
companion_actions_total{action="delete",by="person",outcome="started",provider="docker"} 1
companion_actions_total{action="delete",by="retention",outcome="blocked",provider="docker"} 1
companion_actions_total{action="retention_warn",by="retention",outcome="warned",provider="daytona"} 1
# HELP companion_deletes_total Deletes finished, by provider and outcome (ok, failed, blocked).
# TYPE companion_deletes_total counter
companion_deletes_total{outcome="blocked",provider="docker"} 1
companion_deletes_total{outcome="ok",provider="docker"} 1
# HELP companion_provider_calls_total Calls of provider adapters (built-in and Wasm modules), by provider, operation (list, get, create, suspend, resume, delete, ...) and outcome (ok, or the error's kind: not_found, unavailable, rate_limited, ...).
# TYPE companion_provider_calls_total counter
companion_provider_calls_total{op="get",outcome="not_found",provider="docker"} 1
companion_provider_calls_total{op="get",outcome="ok",provider="docker"} 1
# HELP companion_retention_deletions_total Deletes the retention scheduler finished, by provider and outcome (ok, failed, blocked).
# TYPE companion_retention_deletions_total counter
companion_retention_deletions_total{outcome="blocked",provider="docker"} 1
# HELP companion_retention_warnings_total Retention warnings sent (a workspace will be deleted soon), by provider.
# TYPE companion_retention_warnings_total counter
companion_retention_warnings_total{provider="daytona"} 1
# HELP companion_exports_total Exports finished, by provider and outcome (ok, failed).
# TYPE companion_exports_total counter
companion_exports_total{outcome="failed",provider="docker"} 1
companion_exports_total{outcome="ok",provider="docker"} 1
# HELP companion_export_bytes_total Bytes of the exports verified, by provider.
# TYPE companion_export_bytes_total counter
companion_export_bytes_total{provider="docker"} 2048
`
	if err := testutil.GatherAndCompare(m.Registry(), strings.NewReader(want), "companion_actions_total", "companion_deletes_total",
		"companion_retention_deletions_total", "companion_retention_warnings_total", "companion_exports_total", "companion_export_bytes_total",
		"companion_provider_calls_total"); err != nil {
		t.Error(err)
	}
	if n := testutil.CollectAndCount(m.Registry(), "companion_delete_steps_total"); n != 1 {
		t.Errorf("%d delete step series, want 1", n)
	}
	if n := testutil.CollectAndCount(m.Registry(), "companion_wasm_calls_total"); n != 1 {
		t.Errorf("%d wasm call series, want 1", n)
	}
	assertNoLabel(t, m, "ws_", "alice")
}

func TestDomainCollectorReadsTheSnapshotAtScrape(t *testing.T) {
	m := metrics.New()
	snap := core.MetricsSnapshot{
		Workspaces:       map[core.ProviderState]int{{Provider: "docker", State: "running"}: 2},
		StoredBytes:      map[string]int64{"docker": 100},
		ReclaimableBytes: map[string]int64{"docker": 1 << 30},
		MonthlyCost:      map[string]float64{"docker": 0.1},
		PausedAge:        map[string][]int{"docker": {1, 0, 0, 0, 2}},
		Accounts:         map[core.AccountState]int{core.AccountFailing: 1},
	}
	m.Domain(func() core.MetricsSnapshot { return snap })
	want := `
# HELP companion_workspaces Workspaces by provider and state.
# TYPE companion_workspaces gauge
companion_workspaces{provider="docker",state="running"} 2
# HELP companion_paused_workspaces Paused workspaces by provider and how long they have been paused: age is the upper bound (1d, 7d, 30d, 90d, older).
# TYPE companion_paused_workspaces gauge
companion_paused_workspaces{age="1d",provider="docker"} 1
companion_paused_workspaces{age="30d",provider="docker"} 0
companion_paused_workspaces{age="7d",provider="docker"} 0
companion_paused_workspaces{age="90d",provider="docker"} 0
companion_paused_workspaces{age="older",provider="docker"} 2
# HELP companion_accounts Provider accounts by the reconciler's state (failing: backing off before the next list).
# TYPE companion_accounts gauge
companion_accounts{state="failing"} 1
`
	if err := testutil.GatherAndCompare(m.Registry(), strings.NewReader(want), "companion_workspaces", "companion_paused_workspaces", "companion_accounts"); err != nil {
		t.Error(err)
	}
	// The next scrape reads the state anew.
	snap.Workspaces = map[core.ProviderState]int{{Provider: "docker", State: "paused"}: 1}
	want = `
# HELP companion_workspaces Workspaces by provider and state.
# TYPE companion_workspaces gauge
companion_workspaces{provider="docker",state="paused"} 1
`
	if err := testutil.GatherAndCompare(m.Registry(), strings.NewReader(want), "companion_workspaces"); err != nil {
		t.Error(err)
	}
}

// assertNoLabel fails if any label value of any series contains one of
// the words.
func assertNoLabel(t *testing.T, m *metrics.Metrics, words ...string) {
	t.Helper()
	mfs, err := m.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		for _, s := range mf.GetMetric() {
			for _, l := range s.GetLabel() {
				for _, w := range words {
					if strings.Contains(l.GetValue(), w) {
						t.Errorf("%s has label %s=%q, which holds %q", mf.GetName(), l.GetName(), l.GetValue(), w)
					}
				}
			}
		}
	}
}

// Init makes the series of known providers and modules exist at zero.
func TestInitCreatesZeroSeries(t *testing.T) {
	m := metrics.New()
	m.Init([]string{"docker", "daytona"}, []string{"daytona"})
	for name, want := range map[string]int{
		"companion_deletes_total":             6,
		"companion_retention_deletions_total": 6,
		"companion_retention_warnings_total":  2,
		"companion_exports_total":             4,
		"companion_wasm_calls_total":          30,
		"companion_delete_steps_total":        8,
	} {
		if n := testutil.CollectAndCount(m.Registry(), name); n != want {
			t.Errorf("%s: %d series, want %d", name, n, want)
		}
	}
}
