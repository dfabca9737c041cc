package e2e

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// The leaky provider's token: what companion injects, and what the
// emulator below echoes back in every encoding it can think of.
const leakyToken = "tok-LEAKY-7d1e0c55b2a94f3e"

// buildTestModule builds a test module from providers/wasm/testdata the way
// a provider author would (wasip1 reactor, then `companion providers pack`)
// and installs it into data with the CLI.
func buildTestModule(t *testing.T, name, data string) {
	t.Helper()
	dir := t.TempDir()
	raw := filepath.Join(dir, "raw.wasm")
	build := exec.Command("go", "build", "-buildmode=c-shared", "-o", raw, "github.com/canvasapp/companion/providers/wasm/testdata/"+name)
	build.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm", "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build module %s: %v\n%s", name, err, out)
	}
	root, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}").Output()
	if err != nil {
		t.Fatal(err)
	}
	manifest := filepath.Join(strings.TrimSpace(string(root)), "providers/wasm/testdata", name, "manifest.json")
	out := filepath.Join(dir, name+".wasm")
	if b, err := exec.Command(companionBin, "providers", "pack", "--manifest", manifest, "-o", out, raw).CombinedOutput(); err != nil {
		t.Fatalf("providers pack: %v\n%s", err, b)
	}
	install := exec.Command(companionBin, "providers", "install", "--data-dir", data, out)
	install.Stdin = strings.NewReader("y\n")
	if b, err := install.CombinedOutput(); err != nil {
		t.Fatalf("install %s: %v\n%s", name, err, b)
	}
}

// Encodings of the token as a provider could echo it. JSON escapes are
// undone by the module's JSON decoder; the others stay as they are.
func jsonEscaped(s string, upper bool) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if upper && i%2 == 0 {
			fmt.Fprintf(&b, `\u%04X`, s[i])
		} else if i%3 == 0 {
			b.WriteByte(s[i])
		} else {
			fmt.Fprintf(&b, `\u%04x`, s[i])
		}
	}
	return b.String()
}

func percentEncoded(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		fmt.Fprintf(&b, "%%%02X", s[i])
	}
	return b.String()
}

// leakForms are the forms in which the token must appear nowhere.
func leakForms(tok string) map[string]string {
	return map[string]string{
		"raw":              tok,
		"percent":          percentEncoded(tok),
		"percent lower":    strings.ToLower(percentEncoded(tok)),
		"hex":              hex.EncodeToString([]byte(tok)),
		"HEX":              strings.ToUpper(hex.EncodeToString([]byte(tok))),
		"base64":           base64.StdEncoding.EncodeToString([]byte(tok)),
		"base64 bearer":    base64.StdEncoding.EncodeToString([]byte("Bearer " + tok)),
		"base64url bearer": base64.URLEncoding.EncodeToString([]byte("Bearer " + tok)),
		"json escaped":     jsonEscaped(tok, false),
		"json escaped alt": jsonEscaped(tok, true),
	}
}

// assertNoLeak also looks for each form reversed: the module returns
// names and messages mirrored, and the host's check of module output does
// not know reversed tokens, so a reversed one proves that the token got
// into the module.
func assertNoLeak(t *testing.T, where, text string) {
	t.Helper()
	for name, form := range leakForms(leakyToken) {
		if strings.Contains(text, form) {
			t.Errorf("the token (%s) reached %s", name, where)
		}
		if strings.Contains(text, reverse(form)) {
			t.Errorf("the token (%s) reached the module and then %s", name, where)
		}
	}
}

func reverse(s string) string {
	b := []byte(s)
	for i, j := 0, len(b)-1; i < j; i, j = i+1, j-1 {
		b[i], b[j] = b[j], b[i]
	}
	return string(b)
}

// leakyAPI is a provider API that echoes the credential it receives in
// every field, each in another encoding.
type leakyAPI struct {
	mu      sync.Mutex
	boxes   map[string]string // id -> JSON of the box
	order   []string
	created int
}

func newLeakyAPI() *leakyAPI { return &leakyAPI{boxes: map[string]string{}} }

// seed adds a box made outside companion; every text field carries the
// token of the request that lists it.
func (a *leakyAPI) seed(id string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.boxes[id] = ""
	a.order = append(a.order, id)
}

func (a *leakyAPI) box(id, name, tok string, labels map[string]string) string {
	lb := []string{
		`"b64":"` + base64.StdEncoding.EncodeToString([]byte("Bearer "+tok)) + `"`,
		`"hex":"` + strings.ToUpper(hex.EncodeToString([]byte(tok))) + `"`,
		`"html":"` + htmlRefs(tok) + `"`,
	}
	for k, v := range labels {
		kb, _ := json.Marshal(k)
		vb, _ := json.Marshal(v)
		lb = append(lb, string(kb)+":"+string(vb))
	}
	nb, _ := json.Marshal(name)
	return fmt.Sprintf(`{"id":%q,"name":"%s \u0028%s\u0029","url":"https://%s.boxes.example/?key=%s","state":"running","labels":{%s}}`,
		id, strings.Trim(string(nb), `"`), jsonEscaped(tok, false), id, percentEncoded(tok), strings.Join(lb, ","))
}

func htmlRefs(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		fmt.Fprintf(&b, "&#%d;", s[i])
	}
	return b.String()
}

func (a *leakyAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	tok := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
	if tok != leakyToken {
		w.WriteHeader(401)
		fmt.Fprintf(w, `{"message":"bad token %s"}`, jsonEscaped(tok, true))
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Request-Token", base64.RawURLEncoding.EncodeToString([]byte(tok)))
	a.mu.Lock()
	defer a.mu.Unlock()
	path := strings.TrimPrefix(r.URL.Path, "/boxes")
	switch {
	case r.Method == "GET" && path == "":
		var out []string
		for _, id := range a.order {
			var labels map[string]string
			if a.boxes[id] != "" {
				json.Unmarshal([]byte(a.boxes[id]), &labels)
			}
			out = append(out, a.box(id, "seeded", tok, labels))
		}
		fmt.Fprintf(w, `{"boxes":[%s]}`, strings.Join(out, ","))
	case r.Method == "POST" && path == "":
		var spec struct {
			Name   string            `json:"name"`
			Labels map[string]string `json:"labels"`
		}
		body, _ := io.ReadAll(r.Body)
		json.Unmarshal(body, &spec)
		a.created++
		id := "box-" + strconv.Itoa(a.created)
		lb, _ := json.Marshal(spec.Labels)
		a.boxes[id] = string(lb)
		a.order = append(a.order, id)
		w.WriteHeader(201)
		io.WriteString(w, a.box(id, spec.Name, tok, spec.Labels))
	case r.Method == "GET":
		id := strings.TrimPrefix(path, "/")
		if _, ok := a.boxes[id]; !ok {
			w.WriteHeader(404)
			io.WriteString(w, `{"message":"no such box"}`)
			return
		}
		var labels map[string]string
		json.Unmarshal([]byte(a.boxes[id]), &labels)
		io.WriteString(w, a.box(id, "seeded", tok, labels))
	case r.Method == "POST" && strings.HasSuffix(path, "/pause"):
		w.WriteHeader(400)
		fmt.Fprintf(w, `{"message":"your token %s may not pause (hex %s, %s)"}`, jsonEscaped(tok, true), hex.EncodeToString([]byte(tok)), percentEncoded(tok))
	case r.Method == "DELETE":
		id := strings.TrimPrefix(path, "/")
		delete(a.boxes, id)
		io.WriteString(w, `{}`)
	default:
		w.WriteHeader(404)
		io.WriteString(w, `{"message":"unknown route"}`)
	}
}

// TestHostileModuleNeverCarriesTheCredential runs a module that passes on
// everything its provider says through the built binary, against a
// provider that echoes the injected token in every field, in several
// encodings. The token reaches none of: the box names and URLs companion
// shows, its error texts, the WebSocket, the SQLite files, the logs. A
// plain-http api_url toward a host that is not loopback is refused when
// the account is added. And an account whose module stalls on every call
// ends its actions within the action budget while the other account is
// still served.
func TestHostileModuleNeverCarriesTheCredential(t *testing.T) {
	data := t.TempDir()
	buildTestModule(t, "leaky", data)
	api := newLeakyAPI()
	srv := httptest.NewServer(api)
	t.Cleanup(srv.Close)
	api.seed("box-console")

	p := start(t, options{dataDir: data, args: []string{"--docker-scope", "unused"}})
	s := p.dial(-1)
	s.next(10 * time.Second)

	// Plain http toward a host that is not loopback: refused, naming the
	// field and saying what to do.
	for _, u := range []string{"http://api.leaky.example", "http://10.20.30.40:8080/v1"} {
		var e apiError
		p.must(400, "POST", "/v1/accounts", map[string]any{
			"provider": "leaky", "config": map[string]string{"api_url": u},
			"credentials": map[string]string{"token": leakyToken},
		}, &e)
		if !strings.Contains(e.Error.Message, "api_url") || !strings.Contains(e.Error.Message, "use https://") {
			t.Fatalf("%s: %+v", u, e)
		}
	}
	var acct struct {
		Account struct{ ID string } `json:"account"`
	}
	p.must(201, "POST", "/v1/accounts", map[string]any{
		"provider": "leaky", "label": "echoing", "config": map[string]string{"api_url": srv.URL},
		"credentials": map[string]string{"token": leakyToken},
	}, &acct)

	// The box made in the console is adopted: its name went through the
	// module's JSON decoder, after the host redacted the escaped token.
	adopted := s.waitFor("adopted console box", 60*time.Second, func(m wsMsg) bool {
		return m.Type == "upsert" && m.Workspace != nil && m.Workspace.BoxID == "box-console"
	}).Workspace
	if !strings.Contains(adopted.Name, "[redacted]") {
		t.Fatalf("adopted box name %q: the echoed token was not replaced", adopted.Name)
	}

	var created struct{ Workspace workspace }
	p.must(202, "POST", "/v1/workspaces", map[string]any{"account_id": acct.Account.ID, "name": "echo-me"}, &created)
	ws := s.waitFor("created", 60*time.Second, upsertOf(created.Workspace.ID, "running")).Workspace
	if ws.BoxID != "box-1" || !strings.HasPrefix(ws.Name, "echo-me") {
		t.Fatalf("created %+v", ws)
	}
	var got struct{ Workspace workspace }
	p.must(200, "GET", "/v1/workspaces/"+ws.ID, nil, &got)
	if !strings.Contains(got.Workspace.BoxURL+got.Workspace.Name, "[redacted]") {
		t.Fatalf("box url %q name %q: the echoed token was not replaced", got.Workspace.BoxURL, got.Workspace.Name)
	}

	// The provider refuses the pause, quoting the token in its message.
	p.must(202, "POST", "/v1/workspaces/"+ws.ID+"/pause", nil, nil)
	failed := s.waitFor("pause refused", 60*time.Second, func(m wsMsg) bool {
		return m.Type == "upsert" && m.Workspace != nil && m.Workspace.ID == ws.ID && m.Workspace.Error != ""
	}).Workspace
	if !strings.Contains(failed.Error, "may not pause") || !strings.Contains(failed.Error, "[redacted]") {
		t.Fatalf("pause error %q", failed.Error)
	}

	// A second account of the same module stalls on every call. Its
	// create ends within its budget (2 × the 1 s call timeout + 5 s),
	// not after five full timeouts and their backoff.
	var stall struct {
		Account struct{ ID string } `json:"account"`
	}
	p.must(201, "POST", "/v1/accounts", map[string]any{
		"provider": "leaky", "label": "stalling", "config": map[string]string{"api_url": srv.URL, "mode": "stall"},
		"credentials": map[string]string{"token": leakyToken},
	}, &stall)
	var stuck struct{ Workspace workspace }
	p.must(202, "POST", "/v1/workspaces", map[string]any{"account_id": stall.Account.ID, "name": "stuck"}, &stuck)

	// Meanwhile the first account is still served: a new console box is
	// adopted and a create succeeds.
	api.seed("box-console-2")
	s.waitFor("second console box", 60*time.Second, func(m wsMsg) bool {
		return m.Type == "upsert" && m.Workspace != nil && m.Workspace.BoxID == "box-console-2"
	})
	p.must(202, "POST", "/v1/workspaces", map[string]any{"account_id": acct.Account.ID, "name": "still-served"}, &created)
	s.waitFor("create beside the stalling account", 60*time.Second, upsertOf(created.Workspace.ID, "running"))

	gaveUp := s.waitFor("stalled create gives up", 60*time.Second, upsertOf(stuck.Workspace.ID, "error")).Workspace
	if !strings.Contains(gaveUp.Error, "provider leaky: create ran out of its action budget of 7s") {
		t.Fatalf("stalled create: %q", gaveUp.Error)
	}
	m := regexp.MustCompile(`after (\d+) attempt`).FindStringSubmatch(gaveUp.Error)
	if m == nil {
		t.Fatalf("no attempt count in %q", gaveUp.Error)
	}
	if n, _ := strconv.Atoi(m[1]); n < 2 || n > 3 {
		t.Fatalf("stalled create made %v attempts; within a 7s budget of 1s calls and 1-2-4s backoff it is 2 or 3: %q", m, gaveUp.Error)
	}

	p.stop()
	assertNoLeak(t, "the logs", p.stderr.String())
	assertNoLeak(t, "the WebSocket", s.seen.String())
	files, _ := filepath.Glob(filepath.Join(data, "companion.db*"))
	if len(files) == 0 {
		t.Fatal("no database files to check")
	}
	for _, f := range files {
		b, _ := os.ReadFile(f)
		assertNoLeak(t, f, string(b))
	}
	if !bytes.Contains([]byte(p.stderr.String()), []byte("leaky: box")) {
		t.Fatal("the module's stderr did not reach the log; the log check above proves nothing")
	}
}
