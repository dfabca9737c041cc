// Package metrics exposes companion's metrics in the Prometheus text
// format: the golden signals of every HTTP route, the stream, what the
// service does (through core.Observer) and the domain's state, read from
// core at scrape time (a prometheus.Collector over
// core.Service.MetricsSnapshot). Labels are bounded: routes by pattern,
// providers, states, steps and outcomes, never a workspace id or a user.
package metrics

import (
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/canvasapp/companion/core"
)

// Metrics holds companion's metrics and the registry they are served
// from.
type Metrics struct {
	reg *prometheus.Registry

	requests *prometheus.CounterVec
	errors   *prometheus.CounterVec
	duration *prometheus.HistogramVec
	inFlight prometheus.Gauge

	actions     *prometheus.CounterVec
	deleteSteps *prometheus.CounterVec
	deletes     *prometheus.CounterVec
	retDeletes  *prometheus.CounterVec
	retWarnings *prometheus.CounterVec
	exports     *prometheus.CounterVec
	exportBytes *prometheus.CounterVec

	wasmCalls    *prometheus.CounterVec
	wasmDuration *prometheus.HistogramVec

	provCalls    *prometheus.CounterVec
	provDuration *prometheus.HistogramVec

	webhooksOnce    sync.Once
	webhookAttempts *prometheus.CounterVec // webhooks.go

	routesMu sync.RWMutex
	routes   map[routeKey]*routeSeries
}

// New returns companion's metrics on a registry of their own, with the Go
// runtime's and the process's.
func New() *Metrics {
	m := &Metrics{reg: prometheus.NewRegistry(), routes: map[routeKey]*routeSeries{}}
	m.requests = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "companion_http_requests_total",
		Help: "HTTP requests answered, by route pattern, method and status class (2xx, 3xx, 4xx, 5xx).",
	}, []string{"route", "method", "status"})
	m.errors = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "companion_http_request_errors_total",
		Help: "HTTP requests answered with a server error (5xx), by route pattern and method.",
	}, []string{"route", "method"})
	m.duration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "companion_http_request_duration_seconds",
		Help:    "Time to answer an HTTP request (up to the handler's return; a stream's whole life for GET /v1/ws), by route pattern and method.",
		Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30},
	}, []string{"route", "method"})
	m.inFlight = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "companion_http_requests_in_flight",
		Help: "HTTP requests being answered now (open streams included).",
	})
	m.actions = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "companion_actions_total",
		Help: "Audited actions (create, pause, resume, delete, export, adopt, retention_warn, ...) by provider, outcome (started, ok, failed, blocked, warned, skipped, other) and who asked (person, reconciler, retention, recovery, guard).",
	}, []string{"action", "provider", "outcome", "by"})
	m.deleteSteps = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "companion_delete_steps_total",
		Help: "Delete pipeline steps journaled and started, by step.",
	}, []string{"step"})
	m.deletes = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "companion_deletes_total",
		Help: "Deletes finished, by provider and outcome (ok, failed, blocked).",
	}, []string{"provider", "outcome"})
	m.retDeletes = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "companion_retention_deletions_total",
		Help: "Deletes the retention scheduler finished, by provider and outcome (ok, failed, blocked).",
	}, []string{"provider", "outcome"})
	m.retWarnings = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "companion_retention_warnings_total",
		Help: "Retention warnings sent (a workspace will be deleted soon), by provider.",
	}, []string{"provider"})
	m.exports = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "companion_exports_total",
		Help: "Exports finished, by provider and outcome (ok, failed).",
	}, []string{"provider", "outcome"})
	m.exportBytes = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "companion_export_bytes_total",
		Help: "Bytes of the exports verified, by provider.",
	}, []string{"provider"})
	m.wasmCalls = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "companion_wasm_calls_total",
		Help: "Calls into provider Wasm modules, by module, operation and outcome (ok, error: the provider's answer, time_budget and memory_budget: the module exceeded its budget and was stopped, fault: any other failure of the module).",
	}, []string{"module", "op", "outcome"})
	m.wasmDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "companion_wasm_call_duration_seconds",
		Help:    "Time of a call into a provider Wasm module (the provider's answer included), by module and operation.",
		Buckets: []float64{.001, .005, .01, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60},
	}, []string{"module", "op"})
	m.provCalls = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "companion_provider_calls_total",
		Help: "Calls of provider adapters (built-in and Wasm modules), by provider, operation (list, get, create, suspend, resume, delete, ...) and outcome (ok, or the error's kind: not_found, unavailable, rate_limited, ...).",
	}, []string{"provider", "op", "outcome"})
	m.provDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "companion_provider_call_duration_seconds",
		Help:    "Time of a provider adapter's call, by provider and operation.",
		Buckets: []float64{.001, .005, .01, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120},
	}, []string{"provider", "op"})
	m.reg.MustRegister(m.provCalls, m.provDuration)
	m.reg.MustRegister(m.requests, m.errors, m.duration, m.inFlight, m.actions, m.deleteSteps, m.deletes, m.retDeletes,
		m.retWarnings, m.exports, m.exportBytes, m.wasmCalls, m.wasmDuration,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// Registry is where the metrics are registered, for collectors of other
// parts (Domain, Stream).
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// Handler serves the metrics in the Prometheus text format. It is not
// gated: mount it behind the bridge's gate or on --metrics-listen.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{ErrorLog: nil})
}

// outcomeOf is the bounded outcome class of an audit entry's outcome
// ("ok (the box was already gone)" is ok, "failed: ..." failed).
func outcomeOf(s string) string {
	for _, o := range []string{"started", "ok", "failed", "blocked", "warned", "skipped"} {
		if strings.HasPrefix(s, o) {
			return o
		}
	}
	return "other"
}

// byOf is who asked, bounded: companion's own parts by name, any person
// as "person" (the actor of a person's request names them).
func byOf(actor string) string {
	switch actor {
	case core.ActorReconciler, core.ActorRetention, core.ActorRecovery, core.ActorGuard:
		return actor
	}
	return "person"
}

// Audited implements core.Observer.
func (m *Metrics) Audited(e core.AuditEntry) {
	outcome, by := outcomeOf(e.Outcome), byOf(e.Actor)
	m.actions.WithLabelValues(e.Action, e.Provider, outcome, by).Inc()
	switch e.Action {
	case core.AuditDelete:
		if outcome == "started" {
			return
		}
		m.deletes.WithLabelValues(e.Provider, outcome).Inc()
		if by == core.ActorRetention {
			m.retDeletes.WithLabelValues(e.Provider, outcome).Inc()
		}
	case core.AuditRetentionWarn:
		m.retWarnings.WithLabelValues(e.Provider).Inc()
	}
}

// DeleteStep implements core.Observer.
func (m *Metrics) DeleteStep(step string) { m.deleteSteps.WithLabelValues(step).Inc() }

// Exported implements core.Observer.
func (m *Metrics) Exported(rec core.ExportRecord) {
	if rec.State != core.ExportVerified {
		m.exports.WithLabelValues(rec.Provider, "failed").Inc()
		return
	}
	m.exports.WithLabelValues(rec.Provider, "ok").Inc()
	m.exportBytes.WithLabelValues(rec.Provider).Add(float64(rec.Bytes))
}

// ProviderCall counts one call of a provider adapter: outcome "ok", or
// the error's kind (bounded: core's kinds).
func (m *Metrics) ProviderCall(provider, op string, d time.Duration, err error) {
	outcome := "ok"
	if err != nil {
		outcome = string(core.KindOf(err))
	}
	m.provCalls.WithLabelValues(provider, op, outcome).Inc()
	m.provDuration.WithLabelValues(provider, op).Observe(d.Seconds())
}

// WasmCall counts one call into a provider module; outcome is one of
// those of companion_wasm_calls_total.
func (m *Metrics) WasmCall(module, op string, d time.Duration, outcome string) {
	m.wasmCalls.WithLabelValues(module, op, outcome).Inc()
	m.wasmDuration.WithLabelValues(module, op).Observe(d.Seconds())
}

// deleteSteps are the delete pipeline's steps (core), for Init.
var deleteSteps = []string{core.StepLock, core.StepRecheck, core.StepWake, core.StepExport, core.StepVerify,
	core.StepProviderDelete, core.StepMarkDeleted, core.StepRepause}

// wasmOps and wasmOutcomes are what Init creates Wasm call series for.
var (
	wasmOps      = []string{"list", "get", "create", "suspend", "resume", "delete"}
	wasmOutcomes = []string{"ok", "error", "time_budget", "memory_budget", "fault"}
)

// Init creates the series of the providers and modules known at start at
// zero, so that they exist (and rates start from zero) before anything
// happens: a dashboard or alert on retention deletions works on a
// server that has not deleted anything yet.
func (m *Metrics) Init(providers, modules []string) {
	for _, s := range deleteSteps {
		m.deleteSteps.WithLabelValues(s)
	}
	for _, p := range providers {
		for _, o := range []string{"ok", "failed", "blocked"} {
			m.deletes.WithLabelValues(p, o)
			m.retDeletes.WithLabelValues(p, o)
		}
		m.retWarnings.WithLabelValues(p)
		m.exports.WithLabelValues(p, "ok")
		m.exports.WithLabelValues(p, "failed")
		m.exportBytes.WithLabelValues(p)
		for _, op := range wasmOps {
			m.provCalls.WithLabelValues(p, op, "ok")
			m.provDuration.WithLabelValues(p, op)
		}
	}
	for _, mod := range modules {
		for _, op := range wasmOps {
			m.wasmDuration.WithLabelValues(mod, op)
			for _, o := range wasmOutcomes {
				m.wasmCalls.WithLabelValues(mod, op, o)
			}
		}
	}
}
