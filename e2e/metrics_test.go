package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/canvasapp/companion/internal/testsupport"
)

// TestMetricsServe drives companion serve (--auth local, SQLite) through
// requests, a pause and a delete, and reads GET /metrics as a Prometheus
// server would: refused without a credential (401) and to a user's full
// token (403), served to a metrics-scope token and to an admin's
// session, and on --metrics-listen without any. What it reads moved with
// what was done, has no workspace id or user name in any label, and has
// every metric the Grafana dashboard queries. /healthz and /readyz
// answer any Host, without a credential.
func TestMetricsServe(t *testing.T) {
	_, apiURL := daytonaAPI(t)
	data, dir := t.TempDir(), t.TempDir()
	key := genKey(t, dir, "secret-key")
	addUser(t, data, "root", "root-password-1") // the first user: the admin
	addUser(t, data, "bob", "bob-password-22")
	scraper := strings.TrimSpace(cli(t, "", "tokens", "create", "--user", "bob", "--scope", "metrics", "--data-dir", data))
	bobToken := strings.TrimSpace(cli(t, "", "tokens", "create", "--user", "bob", "--data-dir", data))
	if out := cli(t, "", "tokens", "list", "--user", "bob", "--data-dir", data); !regexpMatch(`\smetrics\s`, out) || !regexpMatch(`\sall\s`, out) {
		t.Fatalf("tokens list does not show the scopes:\n%s", out)
	}
	metricsPort := freePort(t)
	p := start(t, options{mode: "serve", dataDir: data, env: noKeyring, args: []string{"--auth", "local", "--secrets", "sealed",
		"--secret-key-file", key, "--docker-scope", dockerScope(t), "--metrics-listen", "127.0.0.1:" + metricsPort,
		// The emulated boxes cannot be exported: the delete blocks at once.
		"--export-budget", "2s"}})

	// Probes: any Host (an orchestrator calls the pod's address), no
	// credential. Ready once the workspaces are loaded.
	if code, body := get(t, p.ready.URL+"/healthz", "", "10.1.2.3:8080"); code != 200 || !strings.Contains(body, `"status":"ok"`) {
		t.Errorf("GET /healthz = %d %s, want 200 ok", code, body)
	}
	testsupport.Poll(t, 30*time.Second, func() error {
		code, body := get(t, p.ready.URL+"/readyz", "", "10.1.2.3:8080")
		if code != 200 || !strings.Contains(body, `"status":"ready"`) || !strings.Contains(body, `"secrets":"ok"`) {
			return fmt.Errorf("GET /readyz = %d %s, want 200 ready", code, body)
		}
		return nil
	})

	bob := newWebClient(t, p.ready.URL)
	bob.bearer = bobToken
	// A stream client, open while everything below happens.
	dctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	wsURL, wsHeader := strings.Replace(p.ready.URL, "http://", "ws://", 1)+"/v1/ws", http.Header{"Authorization": {"Bearer " + bobToken}}
	conn, resp, err := (&websocket.Dialer{Subprotocols: []string{"companion.v1"}}).DialContext(dctx, wsURL, wsHeader)
	contract.CheckHandshake(wsURL, wsHeader, resp)
	cancel()
	if err != nil {
		t.Fatalf("dial the stream: %v", err)
	}
	watch(t, conn).next(10 * time.Second) // the snapshot
	acctID, first := bob.addDaytonaWith(apiURL, sealedToken, "first")
	var created struct{ Workspace workspace }
	bob.must(202, "POST", "/v1/workspaces", map[string]any{"account_id": acctID, "name": "second"}, &created)
	second := created.Workspace.ID
	waitStateOn(t, bob, first, "running")
	waitStateOn(t, bob, second, "running")
	bob.must(202, "POST", "/v1/workspaces/"+second+"/pause", nil, nil)
	waitStateOn(t, bob, second, "paused")
	const gets = 5
	for range gets {
		bob.must(200, "GET", "/v1/workspaces/"+first, nil, nil)
	}
	var pv deletePreview
	bob.must(200, "POST", "/v1/workspaces/"+first+"/delete-preview", nil, &pv)
	bob.must(202, "POST", "/v1/workspaces/"+first+"/delete", map[string]string{"token": pv.Token}, nil)

	// The gate.
	if code, body := get(t, p.ready.URL+"/metrics", "", ""); code != 401 {
		t.Errorf("GET /metrics without a credential = %d %s, want 401", code, body)
	}
	if code, body := get(t, p.ready.URL+"/metrics", bobToken, ""); code != 403 {
		t.Errorf("GET /metrics with a user's full token = %d %s, want 403", code, body)
	}
	if code, body := get(t, p.ready.URL+"/v1/workspaces", scraper, ""); code != 403 {
		t.Errorf("GET /v1/workspaces with a metrics-scope token = %d %s, want 403", code, body)
	}
	admin := newWebClient(t, p.ready.URL)
	admin.login("root", "root-password-1")
	if code, _, _ := admin.do("GET", "/metrics", nil, nil); code != 200 {
		t.Errorf("GET /metrics as the signed-in admin = %d, want 200", code)
	}

	// What the scrape says moved with what was done. The delete finishes
	// (or blocks) in the background; the workspaces by state are read
	// at scrape time, so they match the API's list once it settles.
	var fams map[string]*dto.MetricFamily
	testsupport.Poll(t, 60*time.Second, func() error {
		fams = scrape(t, p.ready.URL+"/metrics", scraper)
		var list struct{ Workspaces []workspace }
		bob.must(200, "GET", "/v1/workspaces", nil, &list)
		byState := map[string]float64{}
		for _, w := range list.Workspaces {
			byState[w.State]++
		}
		got := map[string]float64{}
		for _, s := range series(fams, "companion_workspaces", map[string]string{"provider": "daytona"}) {
			if s.value > 0 {
				got[s.labels["state"]] = s.value
			}
		}
		if fmt.Sprint(got) != fmt.Sprint(byState) {
			return fmt.Errorf("companion_workspaces{provider=daytona} = %v, the API lists %v", got, byState)
		}
		if sumOf(fams, "companion_deletes_total", map[string]string{"provider": "daytona"}) < 1 {
			return fmt.Errorf("no delete counted yet")
		}
		return nil
	})
	for _, c := range []struct {
		name    string
		labels  map[string]string
		atLeast float64
	}{
		{"companion_http_requests_total", map[string]string{"route": "/v1/workspaces/{id}", "method": "GET", "status": "2xx"}, gets},
		// Refused by the gate before any route: 401, 403, 403.
		{"companion_http_requests_total", map[string]string{"route": "unrouted", "status": "4xx"}, 3},
		{"companion_http_requests_total", map[string]string{"route": "/metrics", "status": "2xx"}, 1},
		{"companion_http_request_duration_seconds", map[string]string{"route": "/v1/workspaces/{id}/pause", "method": "POST"}, 1},
		{"companion_actions_total", map[string]string{"action": "pause", "provider": "daytona", "outcome": "ok", "by": "person"}, 1},
		{"companion_actions_total", map[string]string{"action": "create", "provider": "daytona", "outcome": "ok"}, 2},
		{"companion_delete_steps_total", nil, 1},
		{"companion_wasm_calls_total", map[string]string{"module": "daytona", "op": "create", "outcome": "ok"}, 2},
		{"companion_wasm_call_duration_seconds", map[string]string{"module": "daytona", "op": "suspend"}, 1},
		{"companion_accounts", map[string]string{"state": "ok"}, 1},
		{"companion_provider_calls_total", map[string]string{"provider": "daytona", "op": "create", "outcome": "ok"}, 2},
		{"companion_provider_calls_total", map[string]string{"provider": "docker", "op": "list"}, 1}, // the reconciler's
		{"companion_provider_call_duration_seconds", map[string]string{"provider": "daytona", "op": "suspend"}, 1},
		{"companion_stream_clients", nil, 1},
		{"companion_stream_connections_total", nil, 1},
		{"companion_stream_messages_total", nil, 3},   // the snapshot, then changes
		{"companion_http_requests_in_flight", nil, 1}, // the stream's handshake request lives on
	} {
		if got := sumOf(fams, c.name, c.labels); got < c.atLeast {
			t.Errorf("%s%v = %v, want at least %v", c.name, c.labels, got, c.atLeast)
		}
	}
	// Bounded labels: no workspace or account id, no user name.
	for _, f := range fams {
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				for _, bad := range []string{first, second, acctID, "bob", "root", "ws_", "acct_"} {
					if strings.Contains(l.GetValue(), bad) {
						t.Errorf("%s{%s=%q} holds %q", f.GetName(), l.GetName(), l.GetValue(), bad)
					}
				}
			}
		}
	}
	checkDashboard(t, fams)

	// --metrics-listen serves /metrics alone, without a credential.
	mURL := "http://127.0.0.1:" + metricsPort
	own := scrape(t, mURL+"/metrics", "")
	if sumOf(own, "companion_workspaces", map[string]string{"provider": "daytona", "state": "paused"}) != 1 {
		t.Errorf("--metrics-listen: companion_workspaces{daytona,paused} = %v, want 1", sumOf(own, "companion_workspaces", map[string]string{"provider": "daytona", "state": "paused"}))
	}
	if code, body := get(t, mURL+"/v1/workspaces", bobToken, ""); code != 404 {
		t.Errorf("GET /v1/workspaces on --metrics-listen = %d %s, want 404", code, body)
	}
}

// checkDashboard fails for every metric deploy/grafana/companion.json
// queries that the scrape lacks: the dashboard cannot drift from the
// names the binary serves.
func checkDashboard(t *testing.T, fams map[string]*dto.MetricFamily) {
	t.Helper()
	raw, err := os.ReadFile("../deploy/grafana/companion.json")
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Panels []struct {
			Title   string
			Targets []struct{ Expr string }
		}
		Templating struct{ List []struct{ Query any } }
	}
	if err := json.Unmarshal(raw, &dash); err != nil {
		t.Fatalf("the dashboard is not JSON: %v", err)
	}
	name := regexp.MustCompile(`\bcompanion_[a-z_]+`)
	queried := map[string]string{}
	for _, p := range dash.Panels {
		if len(p.Targets) == 0 {
			t.Errorf("panel %q queries nothing", p.Title)
		}
		for _, tg := range p.Targets {
			for _, n := range name.FindAllString(tg.Expr, -1) {
				queried[n] = p.Title
			}
		}
	}
	for _, v := range dash.Templating.List {
		if q, ok := v.Query.(string); ok {
			for _, n := range name.FindAllString(q, -1) {
				queried[n] = "templating"
			}
		}
	}
	if len(queried) < 20 {
		t.Errorf("the dashboard queries only %d metrics: %v", len(queried), queried)
	}
	var missing []string
	for n, where := range queried {
		base := n
		for _, suf := range []string{"_bucket", "_sum", "_count"} {
			if b, ok := strings.CutSuffix(n, suf); ok && fams[b] != nil && fams[b].GetType() == dto.MetricType_HISTOGRAM {
				base = b
			}
		}
		if fams[base] == nil {
			missing = append(missing, n+" ("+where+")")
		}
	}
	sort.Strings(missing)
	if len(missing) > 0 {
		t.Errorf("the dashboard queries metrics a scrape does not have: %s", strings.Join(missing, ", "))
	}
}

// get makes a GET with an optional bearer token and Host header.
func get(t *testing.T, url, token, host string) (int, string) {
	t.Helper()
	req, err := http.NewRequest("GET", url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if host != "" {
		req.Host = host
	}
	resp, err := (&http.Client{Timeout: 30 * time.Second}).Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// scrape reads url as Prometheus does and parses the text format.
func scrape(t *testing.T, url, token string) map[string]*dto.MetricFamily {
	t.Helper()
	code, body := get(t, url, token, "")
	if code != 200 {
		t.Fatalf("GET %s = %d %s", url, code, body)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(strings.NewReader(body))
	if err != nil {
		t.Fatalf("GET %s is not the Prometheus text format: %v", url, err)
	}
	return fams
}

type sample struct {
	labels map[string]string
	value  float64
}

// series are the samples of a family whose labels include want; a
// histogram's value is its count.
func series(fams map[string]*dto.MetricFamily, name string, want map[string]string) []sample {
	var out []sample
	f := fams[name]
	if f == nil {
		return nil
	}
next:
	for _, m := range f.GetMetric() {
		ls := map[string]string{}
		for _, l := range m.GetLabel() {
			ls[l.GetName()] = l.GetValue()
		}
		for k, v := range want {
			if ls[k] != v {
				continue next
			}
		}
		v := 0.0
		switch {
		case m.Counter != nil:
			v = m.Counter.GetValue()
		case m.Gauge != nil:
			v = m.Gauge.GetValue()
		case m.Histogram != nil:
			v = float64(m.Histogram.GetSampleCount())
		case m.Untyped != nil:
			v = m.Untyped.GetValue()
		}
		out = append(out, sample{ls, v})
	}
	return out
}

func sumOf(fams map[string]*dto.MetricFamily, name string, want map[string]string) float64 {
	total := 0.0
	for _, s := range series(fams, name, want) {
		total += s.value
	}
	return total
}

// TestMetricsDesktop: the desktop serves /metrics to its launch token
// (and refuses it without), and /healthz and /readyz to anyone.
func TestMetricsDesktop(t *testing.T) {
	p := start(t, options{dataDir: t.TempDir(), args: []string{"--docker-scope", dockerScope(t)}})
	if code, body := get(t, p.ready.URL+"/metrics", "", ""); code != 401 {
		t.Errorf("GET /metrics without the token = %d %s, want 401", code, body)
	}
	testsupport.Poll(t, 30*time.Second, func() error {
		if code, body := get(t, p.ready.URL+"/readyz", "", ""); code != 200 {
			return fmt.Errorf("GET /readyz = %d %s", code, body)
		}
		return nil
	})
	p.must(200, "GET", "/v1/workspaces", nil, nil)
	fams := scrape(t, p.ready.URL+"/metrics", p.ready.Token)
	if v := sumOf(fams, "companion_http_requests_total", map[string]string{"route": "/v1/workspaces", "status": "2xx"}); v != 1 {
		t.Errorf("companion_http_requests_total{/v1/workspaces,2xx} = %v, want 1", v)
	}
	p.stop()
}
