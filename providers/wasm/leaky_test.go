package wasm

import (
	"context"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/canvasapp/companion/core"
)

// testdata/leaky passes on whatever its provider answers; it is built on
// first use so that main_test.go's set-up stays untouched.
var (
	leakyOnce sync.Once
	leakyBin  []byte
	leakyErr  error
)

func leakyModule(t *testing.T) []byte {
	t.Helper()
	leakyOnce.Do(func() { leakyBin, leakyErr = buildGuest("testdata/leaky", nil) })
	if leakyErr != nil {
		t.Fatal(leakyErr)
	}
	return leakyBin
}

const echoToken = "tok-ECHO-31c0ffee5eed42aa"

func uEscape(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		fmt.Fprintf(&b, `\u%04x`, s[i])
	}
	return b.String()
}

func pctEscape(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		fmt.Fprintf(&b, "%%%02x", s[i])
	}
	return b.String()
}

// echoForms are what must not be found in anything the module returns.
func echoForms(tok string) []string {
	return []string{tok, pctEscape(tok), strings.ToUpper(pctEscape(tok)), hex.EncodeToString([]byte(tok)),
		strings.ToUpper(hex.EncodeToString([]byte(tok))), base64.StdEncoding.EncodeToString([]byte(tok)),
		base64.StdEncoding.EncodeToString([]byte("Bearer " + tok))}
}

// noEcho also looks for each form reversed: the module mirrors names and
// messages, which the host's output check does not undo, so a reversed
// form proves the credential got into the module.
func noEcho(t *testing.T, where, s string) {
	t.Helper()
	for _, f := range echoForms(echoToken) {
		if strings.Contains(s, f) {
			t.Errorf("%s carries the credential (%q): %q", where, f, s)
		}
		r := []byte(f)
		for i, j := 0, len(r)-1; i < j; i, j = i+1, j-1 {
			r[i], r[j] = r[j], r[i]
		}
		if strings.Contains(s, string(r)) {
			t.Errorf("the credential (%q) reached the module, and then %s: %q", f, where, s)
		}
	}
}

// TestCredentialEchoNeverReachesModuleOutput: a provider echoes the
// injected token, escaped and encoded, into every field; what the module
// hands back (box names, URLs, labels, error messages, its stderr) carries
// none of it, and a box id built from the echo is refused with a named
// error.
func TestCredentialEchoNeverReachesModuleOutput(t *testing.T) {
	e := newEnv(t)
	a := e.load(t, leakyModule(t))
	e.setCred(t, "acc-echo", "token", echoToken)
	var mode atomic.Value
	mode.Store("fields")
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tok := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
		switch mode.Load().(string) {
		case "fields":
			fmt.Fprintf(w, `{"boxes":[{"id":"b-1","name":"n-%s","url":"https://b.example/?k=%s","labels":{"b64":"%s","hex":"%s","%s":"v"}}]}`,
				uEscape(tok), pctEscape(tok), base64.StdEncoding.EncodeToString([]byte("Bearer "+tok)),
				strings.ToUpper(hex.EncodeToString([]byte(tok))), uEscape(tok))
		case "id":
			fmt.Fprintf(w, `{"boxes":[{"id":"b-%s","name":"fine"}]}`, uEscape(tok))
		case "error":
			w.WriteHeader(400)
			fmt.Fprintf(w, `{"message":"token %s is wrong"}`, uEscape(tok))
		}
	}))
	t.Cleanup(srv.Close)
	acct := core.Account{ID: "acc-echo", Provider: "leaky", Config: map[string]string{"api_url": srv.URL}}
	ctx := context.Background()

	boxes, err := a.List(ctx, acct)
	if err != nil || len(boxes) != 1 {
		t.Fatalf("list: %v %v", boxes, err)
	}
	b := boxes[0]
	fields := []string{b.ID, b.Name, b.URL}
	for k, v := range b.Labels {
		fields = append(fields, k, v)
	}
	for _, f := range fields {
		noEcho(t, "a box field", f)
	}
	if !strings.Contains(b.Name, "[redacted]") || !strings.Contains(b.URL, "[redacted]") {
		t.Fatalf("name %q url %q: no redaction marker", b.Name, b.URL)
	}

	mode.Store("id")
	_, err = a.List(ctx, acct)
	mustKind(t, err, core.KindInternal, "provider module leaky", "list", "box id that carries the account's credential")

	mode.Store("error")
	_, err = a.List(ctx, acct)
	ce := mustKind(t, err, core.KindInvalid, "is wrong", "[redacted]")
	noEcho(t, "the error message", ce.Message)

	logs := e.logs.String()
	if !strings.Contains(logs, "leaky: box") || !strings.Contains(logs, "leaky: provider said") {
		t.Fatalf("the module's stderr is not in the log, so the check below proves nothing:\n%s", logs)
	}
	noEcho(t, "the log", logs)
}

// TestLeakyModuleBudgetAndConfig: the module's action budget follows from
// its call timeout, and its account settings refuse plain http toward a
// host that is not loopback.
func TestLeakyModuleBudgetAndConfig(t *testing.T) {
	e := newEnv(t)
	a := e.load(t, leakyModule(t))
	if got := a.ActionBudget(); got != 7*time.Second {
		t.Fatalf("budget %v, want 2 × 1s + 5s", got)
	}
	mustKind(t, a.CheckConfig(map[string]string{"api_url": "http://api.leaky.example"}), core.KindInvalid, "api_url", "use https://")
	for _, ok := range []string{"https://api.leaky.example", "http://127.0.0.1:9", "http://localhost:9", ""} {
		if err := a.CheckConfig(map[string]string{"api_url": ok}); err != nil {
			t.Fatalf("%q: %v", ok, err)
		}
	}
}
